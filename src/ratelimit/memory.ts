// The `memory` driver: per PROCESS, not per shard. The state lives in one
// SharedArrayBuffer that the primary allocates (main.ts → ShardInit.ratelimit) and every
// shard thread maps, so N shards in one process share one limit, checked and updated with
// one Atomics.compareExchange (no lock, no message to another thread).
//
// Layout (all 8-byte cells):
//
//   [ bucket 0 | bucket 1 | … | bucket B-1 | window slot 0 | … | window slot S-1 ]
//     BigInt64: TAT in ns          BigUint64: tag:24 | start:20 | count:20
//
// Buckets (token buckets, one cell each): two per app, in config order: `api:<id>`
// (max_client_events_per_second) and `backend:<id>` (max_backend_events_per_second).
// A bucket is stored in its GCRA form: the cell holds the "theoretical arrival time"
// (TAT) on the monotonic process clock (process.hrtime, shared by all threads), which
// encodes both fields of a classic bucket at once:
//     tokens = (capacity·T − max(0, TAT − now)) / T,   T = 1 s / refill rate
// A request of `cost` sets TAT := max(TAT, now) + cost·T when that stays within
// capacity·T of now, else it is refused and nothing changes. Refill is implicit (time
// passing), so one compare-exchange of one word is the whole update: two threads never
// both take the last token, and a lost CAS just retries with the fresh value.
//
// Window slots (rate_limiter.api per-IP windows; only when that limit is configured): an
// open-addressing table of S slots, probed linearly from hash2(key) (at most PROBES
// slots). A slot is one word: a 24-bit tag (hash1 of the key), the window start
// (100 ms ticks, 20 bits) and the count (20 bits). A slot is free when its window has
// ended; a stale slot of another key is simply taken over. Again one CAS per update.
// Limits of this encoding (documented in the README): counts saturate at 2^20−1 (a
// larger max_requests acts as that), windows longer than 2^20 ticks (~29 h) act as ~29 h,
// two keys share a counter only if 40 bits of hash collide. When all PROBES slots are
// held by other live keys (> S distinct IPs in one window), the key is counted in a
// per-thread map instead (still limited, per shard).

import type { AppConfig, Config } from '../config/types';
import { limitKey, type Decision, type RateLimiter } from './types';

/** Window table size when rate_limiter.api is configured (512 KiB). Power of two. */
export const WINDOW_SLOTS = 65_536;
const PROBES = 8;
const TICK_MS = 100;
const TIME_BITS = 20n;
const COUNT_BITS = 20n;
const TIME_MASK = (1n << TIME_BITS) - 1n;
const COUNT_MASK = (1n << COUNT_BITS) - 1n;
const MAX_COUNT = Number(COUNT_MASK);
const MAX_WINDOW_TICKS = Number(TIME_MASK);

export interface MemoryLayout {
  /** Bucket keys in cell order. */
  buckets: string[];
  /** Window table slots (0: windows are per-thread maps). */
  windowSlots: number;
}

/** The layout both the primary (allocation) and each shard (mapping) derive from config. */
export function memoryLayout(config: Pick<Config, 'rate_limiter'> & { apps: Pick<AppConfig, 'id'>[] }): MemoryLayout {
  const buckets: string[] = [];
  for (const app of config.apps) buckets.push(limitKey.api(app.id), limitKey.backend(app.id));
  return { buckets, windowSlots: config.rate_limiter.api.max_requests !== null ? WINDOW_SLOTS : 0 };
}

export function allocateMemory(layout: MemoryLayout): SharedArrayBuffer {
  return new SharedArrayBuffer(Math.max(1, layout.buckets.length + layout.windowSlots) * 8);
}

function fnv1a(s: string, basis: number): number {
  let h = basis;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export class MemoryRateLimiter implements RateLimiter {
  readonly driver = 'memory' as const;
  private readonly buckets: BigInt64Array;
  private readonly slots: BigUint64Array;
  private readonly bucketIndex = new Map<string, number>();
  /** Per-thread cells for keys outside the shared layout (see the header). */
  private readonly localBuckets = new Map<string, BigInt64Array>();
  private readonly localWindows = new Map<string, BigUint64Array>();

  /** `sab` from allocateMemory(layout) (null: a private one, for a single thread). */
  constructor(sab: SharedArrayBuffer | null, layout: MemoryLayout) {
    const mem = sab ?? allocateMemory(layout);
    if (mem.byteLength < (layout.buckets.length + layout.windowSlots) * 8) {
      throw new Error('rate limiter memory is smaller than its layout (primary and shard configs differ)');
    }
    this.buckets = new BigInt64Array(mem, 0, layout.buckets.length);
    this.slots = new BigUint64Array(mem, layout.buckets.length * 8, layout.windowSlots);
    layout.buckets.forEach((k, i) => this.bucketIndex.set(k, i));
  }

  consume(key: string, capacity: number, refillPerSec: number, cost = 1): Decision {
    let cells = this.buckets;
    let i = this.bucketIndex.get(key);
    if (i === undefined) {
      let local = this.localBuckets.get(key);
      if (!local) this.localBuckets.set(key, (local = new BigInt64Array(1)));
      cells = local;
      i = 0;
    }
    return gcra(cells, i, capacity, refillPerSec, cost, process.hrtime.bigint());
  }

  window(key: string, max: number, windowSec: number, cost = 1): Decision {
    const nowMs = Date.now();
    const now = BigInt(Math.floor(nowMs / TICK_MS)) & TIME_MASK;
    const ticks = BigInt(Math.min(MAX_WINDOW_TICKS, Math.max(1, Math.round((windowSec * 1000) / TICK_MS))));
    const limit = Math.min(max, MAX_COUNT);
    const n = this.slots.length;
    if (n > 0) {
      const tag = BigInt(fnv1a(key, 0x811c9dc5) & 0xffffff);
      const start = fnv1a(key, 0x01234567) & (n - 1);
      for (let p = 0; p < PROBES; p++) {
        const d = hitSlot(this.slots, (start + p) & (n - 1), tag, now, ticks, limit, cost, nowMs);
        if (d) return d;
      }
    }
    let local = this.localWindows.get(key);
    if (!local) this.localWindows.set(key, (local = new BigUint64Array(1)));
    if (this.localWindows.size > 10_000) this.pruneLocal(now, ticks);
    return hitSlot(local, 0, 0n, now, ticks, limit, cost, nowMs)!;
  }

  private pruneLocal(now: bigint, ticks: bigint): void {
    for (const [k, cell] of this.localWindows) {
      if (((now - ((cell[0] >> COUNT_BITS) & TIME_MASK)) & TIME_MASK) >= ticks) this.localWindows.delete(k);
    }
  }

  ready(): Promise<void> {
    return Promise.resolve();
  }

  /** Shared memory of this process: nothing can be down. */
  health(): void {}

  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** One GCRA step on cells[i] (see the header). `now` in ns on the process-wide monotonic clock. */
export function gcra(cells: BigInt64Array, i: number, capacity: number, refillPerSec: number, cost: number, now: bigint): Decision {
  // T: ns per token (≥ 1 ns); span: the whole bucket in ns.
  const T = BigInt(Math.max(1, Math.round(1e9 / refillPerSec)));
  const span = T * BigInt(capacity);
  const need = T * BigInt(cost);
  for (;;) {
    const tat = Atomics.load(cells, i);
    const base = tat > now ? tat : now;
    const next = base + need;
    if (next - now > span) {
      const used = base - now;
      return {
        allowed: false,
        limit: capacity,
        remaining: Number((span - used) / T),
        resetSeconds: Number(used) / 1e9,
        retryAfterSeconds: Number(next - now - span) / 1e9,
      };
    }
    if (Atomics.compareExchange(cells, i, tat, next) === tat) {
      const used = next - now;
      return { allowed: true, limit: capacity, remaining: Number((span - used) / T), resetSeconds: Number(used) / 1e9, retryAfterSeconds: 0 };
    }
  }
}

/**
 * One window step on cells[i] for the key with this tag; null when the slot is held by
 * another key whose window is still running (probe the next one).
 */
function hitSlot(cells: BigUint64Array, i: number, tag: bigint, now: bigint, ticks: bigint,
  limit: number, cost: number, nowMs: number): Decision | null {
  for (;;) {
    const cur = Atomics.load(cells, i);
    const curTag = cur >> (TIME_BITS + COUNT_BITS);
    const curStart = (cur >> COUNT_BITS) & TIME_MASK;
    const curCount = Number(cur & COUNT_MASK);
    const live = curCount > 0 && ((now - curStart) & TIME_MASK) < ticks;
    if (live && curTag !== tag) return null;
    const start = live ? curStart : now;
    const count = live ? curCount : 0;
    // ms until the window ends: start tick + ticks, against the precise clock.
    const endMs = Number(((start + ticks - now) & TIME_MASK)) * TICK_MS - (nowMs % TICK_MS);
    const resetSeconds = Math.max(0, endMs) / 1000;
    if (count + cost > limit) {
      return { allowed: false, limit, remaining: Math.max(0, limit - count), resetSeconds, retryAfterSeconds: resetSeconds };
    }
    const next = (tag << (TIME_BITS + COUNT_BITS)) | (start << COUNT_BITS) | BigInt(count + cost);
    if (Atomics.compareExchange(cells, i, cur, next) === cur) {
      return { allowed: true, limit, remaining: limit - count - cost, resetSeconds, retryAfterSeconds: 0 };
    }
  }
}
