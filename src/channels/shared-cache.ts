// cache.driver `redis` / `redis-cluster`: the cache channels' last events shared by every
// node through Redis, so that a node that starts (or restarts) later still replays them.
//
// The owner shard's CacheStore (cache.ts) stays the fast path: every node's owner keeps
// the entries of its channels in memory as with the memory driver (its own publishes,
// and with an adapter the other nodes' publishes it bridges). Redis is the store of
// record behind it:
//
//   write  a publish made on this node (never one bridged from another node: its origin
//          node writes it) is SET with PX = its TTL, fire and forget, in the order the
//          owner saw the publishes (one connection per owner thread).
//   read   only on a local miss: GET + PTTL (one MULTI), the answer kept in the memory
//          store for the TTL Redis has left, so the next subscribers are served locally.
//
// While the owner has an entry, Redis is not asked (the hot path stays one Map lookup).
// So a publish of another node that never reached this node (its adapter was down, or
// the nodes share only the cache) replaces this node's older entry only when that entry
// expires or the node restarts; with a working adapter every publish reaches every owner.
//
// While a read is in flight the owner goes on handling its queue. A publish it learns of
// meanwhile is newer than whatever Redis answers, so the memory entry wins when both
// exist (never an older event last). Reads of one key share one Redis round trip.
//
// One more race, across nodes: another node's publish reaches Redis (its owner's SET)
// and this node (the adapter) by two paths. When Redis answers an event this node has
// not yet seen, the adapter's copy is still on its way and the subscriber would get it
// twice (the replay, then live). So with an adapter, a Redis entry younger than
// IN_FLIGHT_MS (its age measured on Redis's clock: the TTL it was set with minus PTTL)
// is answered only after the adapter's copy arrived (then the memory entry, and the
// subscriber's shard has already delivered it live: its replay is skipped) or the wait
// ran out (the copy was lost: the Redis entry is the replay).
//
// Redis down or slow: commands fail at once while disconnected (no offline queue) and
// after COMMAND_TIMEOUT_MS when hung; a failed read answers from the memory store alone
// (a miss: `pusher:cache_miss`), a failed write leaves the entry in this node's memory
// only. Both count `cache_errors_total` (op read / write); nothing waits on Redis longer.

import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import { redisClient, redisClusterClient, redisClusterWhere, redisUnreachable, whenReady } from '../redis/client';
import { redisWhere } from '../config/redis';
import type { Config } from '../config/types';
import { noMetrics, type MetricsSink } from '../metrics/types';
import { CacheStore, type CachedMessage } from './cache';

/** ms the primary waits for the cache's Redis at startup before it refuses to start. */
export const STARTUP_TIMEOUT_MS = 3000;
/** ms a Redis command may take (a hung Redis must not hold a subscriber's replay). */
export const COMMAND_TIMEOUT_MS = 1000;
/** Longest time an adapter takes to carry a publish to this node, as far as the replay waits for it. */
export const IN_FLIGHT_MS = 1000;

/** The Redis behind cache.driver `redis` / `redis-cluster` is unreachable (startup check). */
export class CacheUnavailable extends Error {
  readonly code = 'RC_ERR_CACHE_DOWN';
  constructor(message: string) {
    super(message);
    this.name = 'CacheUnavailable';
  }
}

export type SharedCacheConfig = Pick<Config, 'cache' | 'database' | 'adapter'>;

/** The value stored in Redis: the frame, its tags, and the TTL it was set with (for its age). */
interface Stored { m: string; t?: string; ttl: number }

export interface SharedCacheDeps {
  metrics?: MetricsSink;
  log?: Logger;
  /** The owner's answers wait for an adapter's copy of a fresh entry (see above); false on a single node. */
  adapter: boolean;
  /** IN_FLIGHT_MS unless given (tests). */
  inFlightMs?: number;
}

export class SharedCache {
  private readonly client: Redis | Cluster;
  private readonly prefix: string;
  readonly where: string;
  private down = false;
  /** Reads in flight, by key: later askers share the answer. */
  private readonly reading = new Map<string, Promise<CachedMessage | null>>();
  /** Answers waiting for a bridged publish of the key (the adapter's copy of a fresh entry). */
  private readonly awaiting = new Map<string, (() => void)[]>();
  private readonly metrics: MetricsSink;
  private readonly driver: Config['cache']['driver'];

  constructor(config: SharedCacheConfig, private readonly store: CacheStore, private readonly deps: SharedCacheDeps) {
    this.metrics = deps.metrics ?? noMetrics;
    this.driver = config.cache.driver;
    const role = { name: 'cache', queue: false, commandTimeoutMs: COMMAND_TIMEOUT_MS };
    if (config.cache.driver === 'redis-cluster') {
      const c = config.database.redis_cluster;
      this.client = redisClusterClient(c, role);
      this.prefix = c.key_prefix;
      this.where = redisClusterWhere(c);
    } else {
      const c = config.database.redis;
      this.client = redisClient(c, role);
      this.prefix = c.key_prefix;
      this.where = redisWhere(c);
    }
    const log = deps.log;
    // ioredis emits 'error' for every failed attempt: without a listener it would kill the thread
    this.client.on('error', (err: Error) => {
      if (!this.down) log?.warn({ err: err.message, redis: this.where }, 'cache: Redis unreachable; cache channels answer from this node\'s memory');
      this.down = true;
    });
    this.client.on('ready', () => {
      if (this.down) log?.info({ redis: this.where }, 'cache: Redis reachable again');
      this.down = false;
    });
  }

  /**
   * `<key_prefix>cache:{<app>:<channel>}`. The hash tag is the channel's own, so a Redis
   * Cluster spreads the channels over its masters (a key_prefix holding a tag of its own
   * would put them all in one slot). A channel name has no ':', so the key is unambiguous.
   */
  key(app: string, channel: string): string {
    return `${this.prefix}cache:{${app}:${channel}}`;
  }

  /** Whether Redis can be asked now (GET /up/{appId}). */
  isUp(): boolean {
    return this.client.status === 'ready';
  }

  /** Resolves once connected; rejects with CacheUnavailable after timeoutMs. */
  ready(timeoutMs: number): Promise<void> {
    return whenReady(this.client, timeoutMs, () => new CacheUnavailable(`cache.driver ${this.driver}: ` +
      redisUnreachable(this.client, this.where, timeoutMs)));
  }

  /**
   * A cache_set at the owner. Always the memory entry; `share`: a publish made on this
   * node, also written to Redis. A bridged one (share false) wakes answers waiting for it.
   */
  set(app: string, channel: string, message: string, ttlSeconds: number, tags: string | undefined, share: boolean): void {
    this.store.set(app, channel, message, ttlSeconds, tags);
    const key = this.key(app, channel);
    if (share) {
      const ttl = ttlSeconds * 1000;
      const v: Stored = tags === undefined ? { m: message, ttl } : { m: message, t: tags, ttl };
      this.client.set(key, JSON.stringify(v), 'PX', ttl).catch((err: unknown) => this.failed('write', err));
    }
    const waiting = this.awaiting.get(key);
    if (waiting !== undefined) {
      this.awaiting.delete(key);
      for (const wake of waiting) wake();
    }
  }

  /** A cache_get at the owner: the memory entry at once, else (a promise of) Redis's. Never rejects. */
  get(app: string, channel: string): CachedMessage | null | Promise<CachedMessage | null> {
    const local = this.store.get(app, channel);
    if (local !== null) return local;
    const key = this.key(app, channel);
    let p = this.reading.get(key);
    if (p === undefined) {
      p = this.read(app, channel, key).finally(() => this.reading.delete(key));
      this.reading.set(key, p);
    }
    return p;
  }

  private async read(app: string, channel: string, key: string): Promise<CachedMessage | null> {
    let got: Stored | null = null;
    let left = 0;
    try {
      const r = await this.client.multi().get(key).pttl(key).exec();
      if (r === null) throw new Error('MULTI aborted');
      const [[getErr, raw], [ttlErr, pttl]] = r;
      const cmdErr = getErr ?? ttlErr;
      if (cmdErr) throw cmdErr instanceof Error ? cmdErr : new Error(String(cmdErr));
      if (typeof raw === 'string' && typeof pttl === 'number' && pttl > 0) {
        got = JSON.parse(raw) as Stored;
        left = pttl;
      }
    } catch (err) {
      this.failed('read', err);
    }
    // a publish the owner learnt of meanwhile is newer than Redis's answer
    const now = this.store.get(app, channel);
    if (now !== null || got === null || typeof got.m !== 'string') return now;
    const age = got.ttl - left;
    const inFlight = this.deps.inFlightMs ?? IN_FLIGHT_MS;
    if (this.deps.adapter && age < inFlight) {
      await this.bridged(key, inFlight - age);
      const later = this.store.get(app, channel);
      if (later !== null) return later;
      left -= inFlight - age;
      if (left <= 0) return null;
    }
    this.store.setMs(app, channel, got.m, left, got.t);
    return got.t === undefined ? { message: got.m, ttlMs: left } : { message: got.m, ttlMs: left, tags: got.t };
  }

  /** Resolves when a publish of the key is set here, or after ms. */
  private bridged(key: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        // no copy came: forget this waiter (a channel never published again leaves nothing)
        const list = this.awaiting.get(key);
        const i = list ? list.indexOf(wake) : -1;
        if (i >= 0) list!.splice(i, 1);
        if (list?.length === 0) this.awaiting.delete(key);
        resolve();
      }, ms);
      timer.unref();
      const list = this.awaiting.get(key) ?? [];
      list.push(wake);
      this.awaiting.set(key, list);
    });
  }

  /** Answers waiting for an adapter's copy, over all channels (tests: nothing is left behind). */
  get waiting(): number {
    let n = 0;
    for (const l of this.awaiting.values()) n += l.length;
    return n;
  }

  private failed(op: 'read' | 'write', err: unknown): void {
    this.metrics.inc('cache_errors_total', { op });
    // one line per outage ('error' above), then debug: a down Redis fails every command
    const why = err instanceof Error ? err.message : String(err);
    if (this.down) this.deps.log?.debug({ err: why, op }, 'cache: Redis command failed');
    else this.deps.log?.warn({ err: why, op, redis: this.where }, 'cache: Redis command failed');
  }

  close(): Promise<void> {
    this.client.disconnect();
    return Promise.resolve();
  }
}

/** null unless cache.driver is redis or redis-cluster. */
export function createSharedCache(config: SharedCacheConfig, store: CacheStore | null, deps: Omit<SharedCacheDeps, 'adapter'>): SharedCache | null {
  if (store === null || (config.cache.driver !== 'redis' && config.cache.driver !== 'redis-cluster')) return null;
  return new SharedCache(config, store, { ...deps, adapter: config.adapter.driver !== 'local' });
}

/**
 * Startup check (primary, before any shard starts): the cache driver's Redis must answer
 * within timeoutMs, else CacheUnavailable (code RC_ERR_CACHE_DOWN) naming where and why.
 */
export async function checkSharedCache(config: SharedCacheConfig, timeoutMs = STARTUP_TIMEOUT_MS): Promise<void> {
  const c = createSharedCache(config, new CacheStore(), {});
  if (c === null) return;
  try {
    await c.ready(timeoutMs);
  } finally {
    await c.close();
  }
}
