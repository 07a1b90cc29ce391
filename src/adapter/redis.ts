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

  constructor(
    readonly name: TransportName,
    readonly where: string,
    private readonly pub: Client,
    private readonly sub: Client,
    /** Redis Cluster: sharded pub/sub (SPUBLISH to the subject's slot: one master, so one order). */
    private readonly sharded = false,
  ) {
    const refresh = () => this.state.set(pub.status === 'ready' && sub.status === 'ready');
    for (const c of [pub, sub]) {
      c.on('ready', refresh);
      c.on('close', refresh);
      c.on('end', refresh);
      c.on('reconnecting', refresh);
      // ioredis emits 'error' for every failed attempt; the state and the cluster's
      // metrics report it, an unhandled 'error' event would kill the process
      c.on('error', () => undefined);
    }
    sub.on(sharded ? 'smessageBuffer' : 'messageBuffer', (channel: Buffer, message: Buffer) => {
      this.handlers.get(channel.toString())?.(message);
    });
  }

  async connect(timeoutMs: number): Promise<void> {
    const ready = (c: Client) => c.status === 'ready'
      ? Promise.resolve()
      : new Promise<void>((resolve) => c.once('ready', () => resolve()));
    try {
      await withTimeout(Promise.all([ready(this.pub), ready(this.sub)]), timeoutMs, this);
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
      commands += c.commandQueue.length;
      bytes += (c.stream as { writableLength?: number } | undefined)?.writableLength ?? 0;
    }
    return { commands, bytes };
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

  isUp(): boolean {
    return this.state.get();
  }

  onState(listener: (up: boolean) => void): void {
    this.state.on(listener);
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
  return new RedisTransport('redis', redisWhere(cfg),
    redisClient(cfg, { name: 'adapter-pub', queue: false }), redisClient(cfg, { name: 'adapter-sub', queue: true, commandTimeoutMs: null }));
}

export function createRedisClusterTransport(cfg: RedisClusterConfig): Transport & Pick<RedisTransport, 'inFlight'> {
  return new RedisTransport('redis-cluster', redisClusterWhere(cfg),
    redisClusterClient(cfg, { name: 'adapter-pub', queue: false }),
    redisClusterClient(cfg, { name: 'adapter-sub', queue: true, commandTimeoutMs: null, sharded: true }), true);
}
