// Redis pub/sub as the cluster transport, for one Redis (or a Sentinel-managed master)
// and for a Redis Cluster. Two connections: one publishes, one subscribes (a subscribed
// Redis connection can do nothing else). Order per subject per node holds because every
// publish of a node goes down the one publishing connection.
//
// A plain PUBLISH in a Redis Cluster goes to any master (ioredis picks one per keyless
// command), so two publishes of one node could overtake each other (the suite saw it);
// the cluster transport uses sharded pub/sub instead: SPUBLISH/SSUBSCRIBE route by the
// subject's slot, and the subjects share one hash tag (adapter/index.ts), so every message
// goes through one master in one order.
//
// While Redis is down a publish is refused at once (no offline queue): the message is
// dropped and counted by the cluster, and local delivery goes on untouched. A hung Redis
// (connection open, nothing answered) is refused the same way once the publisher has
// MAX_PUBLISHES_IN_FLIGHT commands unanswered or MAX_PUBLISH_BUFFER_BYTES waiting in its
// socket: ioredis keeps every command it sent until its reply comes (the 1 s command
// timeout rejects the promise, not the entry), so without the cap a hung Redis would hold
// every publish of the outage. When Redis answers again, the queue drains and publishes
// go out again.

import type { Cluster, Redis } from 'ioredis';
import type { RedisConfig } from '../config/types';
import { isCluster, redisClient, redisClusterClient, redisClusterWhere, redisFailure, redisWhere, type RedisClusterConfig } from '../redis/client';
import { AdapterUnavailable, StateCell, withTimeout, type Transport, type TransportName } from './transport';

type Client = Redis | Cluster;

/** Commands a publisher may have sent that Redis has not answered; past it a publish fails fast. */
export const MAX_PUBLISHES_IN_FLIGHT = 1024;
/** Bytes a publisher may have waiting in its socket's buffer; past it a publish fails fast. */
export const MAX_PUBLISH_BUFFER_BYTES = 8 * 1024 * 1024;

/** The connections of a client: itself, or a Cluster's node clients. */
function connections(c: Client): Redis[] {
  return isCluster(c) ? c.nodes('all') : [c];
}

class RedisTransport implements Transport {
  /** One thread per server (or per Cluster shard of a subject): one order for all (transport.ts). */
  readonly ordered = true;
  private readonly state = new StateCell();
  private readonly handlers = new Map<string, (data: Uint8Array) => void>();
  private closed = false;
  private pub: Client;
  private sub: Client;

  constructor(
    readonly name: TransportName,
    readonly where: string,
    /** Builds the publishing and the subscribing connection (again on renew()). */
    private readonly make: { pub: () => Client; sub: () => Client },
    /** Redis Cluster: sharded pub/sub (SPUBLISH to the subject's slot: one master, so one order). */
    private readonly sharded = false,
  ) {
    this.pub = this.attach(make.pub());
    this.sub = this.attachSub(make.sub());
  }

  private readonly onMessage = (channel: Buffer, message: Buffer) => {
    this.handlers.get(channel.toString())?.(message);
  };

  /**
   * The subscribing connection: its messages, and (one Redis) its subjects subscribed
   * again on every reconnect, here rather than by ioredis (redis/client.ts ownResubscribe).
   * A refusal leaves it deaf, which the cluster notices and renews (cluster.ts, echo.ts).
   * A Cluster's sharded subscribers are subscribed again by ioredis, errors caught there.
   */
  private attachSub(c: Client): Client {
    this.attach(c);
    c.on(this.sharded ? 'smessageBuffer' : 'messageBuffer', this.onMessage);
    if (!this.sharded) {
      c.on('ready', () => {
        if (this.handlers.size > 0 && c === this.sub) c.subscribe(...this.handlers.keys()).catch(() => undefined);
      });
    }
    return c;
  }

  private refresh = () => this.state.set(!this.closed && this.pub.status === 'ready' && this.sub.status === 'ready');

  private attach(c: Client): Client {
    c.on('ready', this.refresh);
    c.on('close', this.refresh);
    c.on('end', this.refresh);
    c.on('reconnecting', this.refresh);
    // ioredis emits 'error' for every failed attempt; the state and the cluster's
    // metrics report it, an unhandled 'error' event would kill the process
    c.on('error', () => undefined);
    return c;
  }

  async connect(timeoutMs: number): Promise<void> {
    const ready = (c: Client) => c.status === 'ready'
      ? Promise.resolve()
      : new Promise<void>((resolve) => c.once('ready', () => resolve()));
    try {
      await withTimeout(Promise.all([ready(this.pub), ready(this.sub)]), timeoutMs, this);
      // a Cluster's publisher connects to a master with its first command there: every
      // master now, so that no publish waits on a connection being made (buckets spread
      // over all of them; a publish made while that master hangs would not be counted)
      if (isCluster(this.pub)) await withTimeout(Promise.all(this.pub.nodes('master').map((n) => n.ping())), timeoutMs, this);
    } catch (err) {
      const why = redisFailure(this.pub) ?? redisFailure(this.sub);
      throw why && err instanceof AdapterUnavailable ? new AdapterUnavailable(this.name, this.where, `no answer within ${timeoutMs} ms (${why})`) : err;
    }
    this.state.set(true);
  }

  /** Commands sent by the publisher and not answered yet, and bytes not yet written to its socket. */
  inFlight(): { commands: number; bytes: number } {
    let commands = 0;
    let bytes = 0;
    for (const c of connections(this.pub)) {
      // offlineQueue: a Cluster's node client that is not connected yet (its first command
      // connects it) queues there, not in commandQueue
      commands += c.commandQueue.length + ((c as unknown as { offlineQueue?: { length: number } }).offlineQueue?.length ?? 0);
      bytes += (c.stream as { writableLength?: number } | undefined)?.writableLength ?? 0;
    }
    return { commands, bytes };
  }

  backlog(): number {
    if (this.pub.status !== 'ready') return 0;
    const f = this.inFlight();
    return Math.max(f.commands / MAX_PUBLISHES_IN_FLIGHT, f.bytes / MAX_PUBLISH_BUFFER_BYTES);
  }

  publish(subject: string, data: Uint8Array): boolean {
    if (this.pub.status !== 'ready') return false;
    const f = this.inFlight();
    if (f.commands >= MAX_PUBLISHES_IN_FLIGHT || f.bytes >= MAX_PUBLISH_BUFFER_BYTES) return false;
    const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    (this.sharded ? this.pub.spublish(subject, bytes) : this.pub.publish(subject, bytes)).catch(() => undefined);
    return true;
  }

  async subscribe(subject: string, handler: (data: Uint8Array) => void): Promise<void> {
    this.handlers.set(subject, handler);
    await (this.sharded ? this.sub.ssubscribe(subject) : this.sub.subscribe(subject));
  }

  async unsubscribe(subject: string): Promise<void> {
    if (!this.handlers.delete(subject)) return;
    await (this.sharded ? this.sub.sunsubscribe(subject) : this.sub.unsubscribe(subject));
  }

  isUp(): boolean {
    return this.state.get();
  }

  onState(listener: (up: boolean) => void): void {
    this.state.on(listener);
  }

  /**
   * Both connections dropped and made again, and every subject subscribed anew: for a
   * transport that says it is up but does not deliver the node's own heartbeat back
   * (cluster.ts). A client library can be left connected and not subscribed: a
   * resubscribe refused after a reconnect (an ACL that denied the channel meanwhile,
   * NOPERM) is only logged by ioredis, and a Redis Cluster's sharded subscribers have
   * known states that never subscribe again.
   */
  async renew(): Promise<void> {
    if (this.closed) return;
    const old = [this.pub, this.sub];
    this.pub = this.attach(this.make.pub());
    this.sub = this.attachSub(this.make.sub());
    for (const c of old) {
      c.removeAllListeners();
      c.on('error', () => undefined);
      c.disconnect();
    }
    this.refresh();
    await Promise.all([...this.handlers.keys()].map((s) => this.sharded ? this.sub.ssubscribe(s) : this.sub.subscribe(s)));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.allSettled([this.pub.quit(), this.sub.quit()]);
    this.pub.disconnect();
    this.sub.disconnect();
  }
}

export function createRedisTransport(cfg: RedisConfig): Transport & Pick<RedisTransport, 'inFlight'> {
  // the subscriber must queue its SUBSCRIBE until connected; the publisher never queues
  return new RedisTransport('redis', redisWhere(cfg), {
    pub: () => redisClient(cfg, { name: 'adapter-pub', queue: false }),
    sub: () => redisClient(cfg, { name: 'adapter-sub', queue: true, commandTimeoutMs: null, ownResubscribe: true }),
  });
}

export function createRedisClusterTransport(cfg: RedisClusterConfig): Transport & Pick<RedisTransport, 'inFlight'> {
  return new RedisTransport('redis-cluster', redisClusterWhere(cfg), {
    pub: () => redisClusterClient(cfg, { name: 'adapter-pub', queue: false }),
    sub: () => redisClusterClient(cfg, { name: 'adapter-sub', queue: true, commandTimeoutMs: null, sharded: true }),
  }, true);
}
