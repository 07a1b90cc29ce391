// The one small interface every multi-node backend implements: fire-and-forget publish
// to a subject, subscribe to a subject, and an up/down state. Everything a cluster does
// (publish fan-out, heartbeats, cluster-wide questions with their answers) is written
// once above it, in cluster.ts; a backend only moves bytes. Like ratelimit/, each backend
// is one file and one test suite runs against all of them (test/adapter/transport.test.ts).
//
// Guarantees a backend must give (the cluster relies on them):
//  - messages one node publishes to one subject arrive at each subscriber in publish order;
//  - `ordered`: whether every subscriber receives one subject's messages (all
//    publishers') in the same order. One Redis server or Sentinel master and one Redis
//    Cluster shard per channel (sharded pub/sub) do: each is one thread. NATS does not:
//    it orders each publisher's messages only (nats-server hands two publishers'
//    messages to its subscribers from two goroutines, so two nodes can see them in
//    opposite orders). The cluster's webhooks depend on it (transitions.ts);
//  - a node receives its own publishes (the cluster drops them by node id);
//  - publish never throws and never blocks: while the backend is down it returns false
//    (the message is dropped and counted) or buffers within a bound of its own.

export type TransportName = 'redis' | 'redis-cluster' | 'nats';

export interface Transport {
  readonly name: TransportName;
  /** One order of a subject's messages for every subscriber (see above). */
  readonly ordered: boolean;
  /** Where it connects, for logs and errors (never a password). */
  readonly where: string;
  /** Connects; rejects with a clear error after timeoutMs when the backend does not answer. */
  connect(timeoutMs: number): Promise<void>;
  /** Fire and forget. false: not sent (the backend is down, or, for Redis, too many publishes unanswered). */
  publish(subject: string, data: Uint8Array): boolean;
  /**
   * Subscribes until unsubscribe (re-subscribed after reconnects); resolves once the backend
   * has acknowledged it: a message published on the subject after that reaches this node.
   */
  subscribe(subject: string, handler: (data: Uint8Array) => void): Promise<void>;
  /** Ends a subscription of subscribe() (nothing when there is none). */
  unsubscribe(subject: string): Promise<void>;
  /**
   * How full the publisher's bound on unanswered publishes is (0–1; a publish past 1 is
   * refused). Absent: no such bound (NATS).
   */
  backlog?(): number;
  /** Whether the backend is reachable now. */
  isUp(): boolean;
  /** Called on every change of isUp(). */
  onState(listener: (up: boolean) => void): void;
  /**
   * Drops its connections, makes them again and subscribes every subject anew: the
   * cluster calls it when the backend says it is up but the node's own heartbeat does not
   * come back (cluster.ts, "deaf"). Absent: the backend's client is trusted to resubscribe.
   */
  renew?(): Promise<void>;
  close(): Promise<void>;
}

export class AdapterUnavailable extends Error {
  readonly code = 'RC_ERR_ADAPTER_DOWN';
  constructor(name: TransportName, where: string, reason: string) {
    super(`the ${name} adapter could not reach ${where}: ${reason}`);
    this.name = 'AdapterUnavailable';
  }
}

/** Resolves when `ready` resolves, rejects with AdapterUnavailable after ms. */
export function withTimeout<T>(ready: Promise<T>, ms: number, t: Pick<Transport, 'name' | 'where'>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new AdapterUnavailable(t.name, t.where, `no answer within ${ms} ms`)), ms);
  });
  return Promise.race([ready, timeout]).finally(() => clearTimeout(timer));
}

/** Keeps the up/down state and tells listeners about changes only. */
export class StateCell {
  private up = false;
  private readonly listeners: ((up: boolean) => void)[] = [];
  get(): boolean {
    return this.up;
  }
  set(up: boolean): void {
    if (up === this.up) return;
    this.up = up;
    for (const l of this.listeners) l(up);
  }
  on(listener: (up: boolean) => void): void {
    this.listeners.push(listener);
  }
}
