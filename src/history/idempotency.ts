// Idempotent publish (PROTOCOL.md "Idempotent publish"): the answers of API publishes that
// carried an `idempotency_key`, per app, for idempotency.window_seconds. A key belongs to
// one shard of the process (keyOwner: the hash of app and key), so a retry that lands on
// any shard finds it; the window is process-wide. The shard that got the request:
//
//   claim ──idem_claim──▶ key owner:  unknown key  → 'new' (now pending: this request publishes)
//                                     done         → 'done' + the first answer (not delivered again)
//                                     pending      → 'pending' (the first is still publishing:
//                                                    503, retry; never waits, so never deadlocks)
//   then  ──idem_done (2xx answer) or idem_release (anything else: a 503 delivered nothing)──▶
//
// Bounded: at most max_keys / shards keys per shard, the oldest forgotten first; a pending
// claim whose request never ends (its shard died) lapses after PENDING_MS.
// Across the nodes of a cluster the window is shared instead: in Redis with a redis /
// redis-cluster adapter (idempotency-redis.ts), in a NATS JetStream key-value bucket with
// a nats adapter (idempotency-nats.ts); both keep the same claim / done / release contract.

import type { ControlMsg } from '../bus/messages';
import { channelHash } from '../channels/topic';

export type IdemMsg = Extract<ControlMsg, { type: 'idem_claim' | 'idem_done' | 'idem_release' }>;
export type IdemReply = { state: 'new' } | { state: 'pending' } | { state: 'done'; status: number; body: unknown };

const TYPES: ReadonlySet<string> = new Set<IdemMsg['type']>(['idem_claim', 'idem_done', 'idem_release']);
export const isIdemMsg = (m: ControlMsg): m is IdemMsg => TYPES.has(m.type);

/** The cluster-wide window (idempotency-redis.ts, idempotency-nats.ts): the same contract as the owner shard's. */
export interface ClusterIdempotency {
  claim(app: string, key: string): Promise<IdemReply>;
  done(app: string, key: string, status: number, body: unknown): void;
  release(app: string, key: string): void;
  close(): Promise<void>;
}

/** The code of the error a claim rejects with when the cluster-wide window's store did not answer (503, nothing delivered). */
export const IDEMPOTENCY_DOWN = 'RC_ERR_IDEMPOTENCY_DOWN';

/** That error: its message names the store, where it is and why (`the idempotency window's Redis at h:p did not answer (…)`). */
export function idempotencyDown(store: string, where: string, why: string): Error {
  return Object.assign(new Error(`the idempotency window's ${store} at ${where} did not answer (${why})`), { code: IDEMPOTENCY_DOWN });
}

/** Whether `err` is that error. */
export const isIdempotencyDown = (err: unknown): err is Error => err instanceof Error && (err as { code?: unknown }).code === IDEMPOTENCY_DOWN;

/** ms between attempts to record an answer the cluster-wide store did not take. */
export const DONE_RETRY_MS = 500;

/**
 * Writes a delivered publish's answer to the cluster-wide store: `write` again every
 * DONE_RETRY_MS while the claim's pending marker would stand (PENDING_MS), then `lost`
 * (a retry after the marker lapses publishes again). `settled(err)`: a refusal that ends
 * it (the key is another request's by now). Each failed attempt is `failed()`.
 */
export function writeAnswer(write: () => Promise<unknown>, hooks: { settled?: (err: unknown) => boolean; failed: () => void; lost: (err: unknown) => void }): void {
  const until = Date.now() + PENDING_MS;
  const attempt = (): void => {
    write().catch((err: unknown) => {
      if (hooks.settled?.(err)) return;
      hooks.failed();
      if (Date.now() + DONE_RETRY_MS < until) setTimeout(attempt, DONE_RETRY_MS).unref();
      else hooks.lost(err);
    });
  };
  attempt();
}

/** How long a claim stays pending without an end (ms). */
export const PENDING_MS = 10_000;
export const MAX_KEY_LENGTH = 128;

/** The shard that keeps a key. */
export function keyOwner(app: string, key: string, shards: number): number {
  return channelHash(app, '\0' + key) % shards;
}

/** The field's rule: 1–128 printable ASCII characters; null when it is fine. */
export function invalidKey(v: unknown): string | null {
  if (typeof v !== 'string') return 'idempotency_key must be a string';
  if (v.length === 0 || v.length > MAX_KEY_LENGTH) return `idempotency_key must be 1 to ${MAX_KEY_LENGTH} characters long (got ${v.length})`;
  if (!/^[\x20-\x7e]+$/.test(v)) return 'idempotency_key must be printable ASCII characters';
  return null;
}

interface Entry {
  /** null while a request is publishing; then its answer. */
  done: { status: number; body: unknown } | null;
  until: number;
}

export interface IdempotencyOwnerDeps {
  windowMs: number;
  maxKeys: number;
  reply(to: number, req: number, body: IdemReply): void;
  now?: () => number;
}

export function createIdempotencyOwner(deps: IdempotencyOwnerDeps) {
  const now = deps.now ?? Date.now;
  /** Insertion order = oldest first (a done entry is moved last). */
  const entries = new Map<string, Entry>();

  function live(k: string, t: number): Entry | undefined {
    const e = entries.get(k);
    if (e !== undefined && e.until <= t) {
      entries.delete(k);
      return undefined;
    }
    return e;
  }

  function handle(m: IdemMsg, from: number): void {
    const k = m.app + '\0' + m.key;
    const t = now();
    switch (m.type) {
      case 'idem_claim': {
        const e = live(k, t);
        if (e === undefined) {
          while (entries.size >= deps.maxKeys) entries.delete(entries.keys().next().value as string);
          entries.set(k, { done: null, until: t + PENDING_MS });
          return deps.reply(from, m.req, { state: 'new' });
        }
        return deps.reply(from, m.req, e.done === null ? { state: 'pending' } : { state: 'done', ...e.done });
      }
      case 'idem_done':
        entries.delete(k);
        entries.set(k, { done: { status: m.status, body: m.body }, until: t + deps.windowMs });
        return;
      case 'idem_release':
        if (entries.get(k)?.done === null) entries.delete(k);
    }
  }

  return {
    handle,
    /** Drops what the window has passed. */
    sweep(): void {
      const t = now();
      for (const k of [...entries.keys()]) live(k, t);
    },
    size: () => entries.size,
  };
}
