// Cache channels (`cache-…`, `private-cache-…`, `presence-cache-…`,
// `private-encrypted-cache-…`, or any name ending in `#cache-<seconds>`): the last event
// published to the channel through the HTTP API is kept by the channel's owner shard
// until its TTL ends, and every new subscriber gets it right after
// `subscription_succeeded` (or `pusher:cache_miss`).
//
//   CacheStore     the owner side: one entry per (app, channel), expired lazily on read
//                  and by a periodic (unref'ed) sweep, so memory is bounded by what was
//                  published within the TTLs. Entries outlive the channel's subscribers:
//                  that is the point of a cache channel.
//   CacheChannels  the shard side: `remember` (publisher → owner, `cache_set`), `lookup`
//                  (API → owner, `cache_get`) and `forReplay` (a new subscription).
//   SharedCache    cache.driver redis / redis-cluster (shared-cache.ts): the owner's store
//                  written through to Redis and read back on a local miss.
//
// Order (see docs/architecture.md, "Cache channels"): the publisher writes `cache_set` to
// the owner *before* the publish frames. A subscriber whose shard delivered the publish
// before the socket subscribed asks the owner later in the bus's global stamp order than
// the `cache_set`, so the owner has it: the event reaches every new subscriber live or
// as the replay. When a live API publish on the channel reaches the subscriber's shard
// while its question is in flight, the socket already got an event at least as new as
// the cached one, and the replay is skipped (no duplicate, never an older event last).

import type { Bus } from '../bus/bus';
import type { PublishFrame } from '../bus/messages';
import { sentLabel } from '../metrics/meters';
import { cacheTtl } from '../protocol/channels';
import { ownerOf } from './owner';

/** A cached message as the owner answers it: the serialised frame and the time it has left. */
export interface CachedMessage {
  /** The event frame exactly as it was published ({"event","channel","data"}). */
  message: string;
  /** Milliseconds until it expires (> 0). */
  ttlMs: number;
  /** The event's tags (sorted JSON) when it had some and tag filtering is on. */
  tags?: string;
}

interface Entry {
  message: string;
  expiresAt: number;
  tags: string | undefined;
}

/** Owner side: the last message per (app, channel), until its expiry. */
export class CacheStore {
  private readonly entries = new Map<string, Entry>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly now: () => number = Date.now) {}

  get size(): number {
    return this.entries.size;
  }

  set(app: string, channel: string, message: string, ttlSeconds: number, tags?: string): void {
    this.setMs(app, channel, message, ttlSeconds * 1000, tags);
  }

  /** set() with the time left in ms (an entry read back from Redis, shared-cache.ts). */
  setMs(app: string, channel: string, message: string, ttlMs: number, tags?: string): void {
    const key = app + ' ' + channel;
    // delete first: the Map keeps insertion order, the newest entries last
    this.entries.delete(key);
    this.entries.set(key, { message, expiresAt: this.now() + ttlMs, tags });
  }

  /** The entry, or null when there is none or it has expired (then it is dropped). */
  get(app: string, channel: string): CachedMessage | null {
    const key = app + ' ' + channel;
    const e = this.entries.get(key);
    if (e === undefined) return null;
    const left = e.expiresAt - this.now();
    if (left <= 0) {
      this.entries.delete(key);
      return null;
    }
    return e.tags === undefined ? { message: e.message, ttlMs: left } : { message: e.message, ttlMs: left, tags: e.tags };
  }

  /** Drops every expired entry; returns how many. */
  sweep(): number {
    const now = this.now();
    let n = 0;
    for (const [key, e] of this.entries) {
      if (e.expiresAt <= now) {
        this.entries.delete(key);
        n++;
      }
    }
    return n;
  }

  /** Sweeps every `intervalMs` on an unref'ed timer (it never keeps the thread alive). */
  startSweep(intervalMs: number): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.sweep(), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}

/** What a new subscription gets: the cached frame, a miss, or nothing (a live event got there first). */
export type Replay = { kind: 'hit'; message: string; tags: string | null } | { kind: 'miss' } | { kind: 'live' };

/** Shard side of cache channels (every cache.driver but `none`). */
export class CacheChannels {
  /**
   * Topics with a replay question in flight on this shard: the count of live API
   * publishes delivered here since each question was asked (see `forReplay`).
   */
  private readonly watched = new Map<string, { waiting: number; published: number }>();

  constructor(
    private readonly bus: Bus,
    private readonly shards: number,
    private readonly defaultTtl: number,
  ) {}

  /** TTL in seconds when `channel` is a cache channel, else null. */
  ttl(channel: string): number | null {
    return cacheTtl(channel, this.defaultTtl);
  }

  /**
   * An API publish to a cache channel: tell the owner (before the publish frames go out).
   * Throws BusFullError when the owner's queue is full (nothing taken).
   */
  remember(app: string, channel: string, message: string, ttlSeconds: number): void {
    this.bus.control(ownerOf(app, channel, this.shards), { type: 'cache_set', app, channel, message, ttl: ttlSeconds });
  }

  /** The owner's entry for the channel (API `info=cache`). */
  lookup(app: string, channel: string): Promise<CachedMessage | null> {
    return this.bus.request<CachedMessage | null>(ownerOf(app, channel, this.shards), { type: 'cache_get', app, channel });
  }

  /**
   * A socket of this shard has just subscribed to the cache channel (it is on the topic):
   * asks the owner. `live` when an API publish on the channel was delivered on this shard
   * meanwhile (the socket got it, and it is at least as new as the cached one).
   */
  async forReplay(app: string, channel: string): Promise<Replay> {
    const topic = app + ' ' + channel;
    let w = this.watched.get(topic);
    if (w === undefined) {
      w = { waiting: 0, published: 0 };
      this.watched.set(topic, w);
    }
    w.waiting++;
    const seen = w.published;
    try {
      const cached = await this.lookup(app, channel);
      if (w.published !== seen) return { kind: 'live' };
      return cached === null ? { kind: 'miss' } : { kind: 'hit', message: cached.message, tags: cached.tags ?? null };
    } finally {
      if (--w.waiting === 0) this.watched.delete(topic);
    }
  }

  /** Every publish frame this shard delivers (cheap when no replay question is in flight). */
  delivered(f: PublishFrame): void {
    if (this.watched.size === 0) return;
    const w = this.watched.get(f.app + ' ' + f.channel);
    // Only API events are cached: a client event or subscription_count does not replace the replay.
    if (w !== undefined && sentLabel(f.message) === 'api-event') w.published++;
  }
}
