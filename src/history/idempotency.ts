// Idempotent publish (docs/protocol.md "Idempotent publish"): the answers of API publishes that
// carried an `idempotency_key`, per app, for idempotency.window_seconds. A key belongs to
// one shard of the process (keyOwner: the hash of app and key), so a retry that lands on
// any shard finds it; the window is process-wide. The shard that got the request:
//
//   claim ──idem_claim──▶ key owner:  unknown key  → 'new' (now pending: this request publishes)
//                                     done         → 'done' + the first answer (not delivered again)
//                                     pending      → 'pending' (the first is still publishing:
//                                                    503, retry; never waits, so never deadlocks)
//                                     other route  → 'conflict' (the key was first used on the
//                                                    other route: 422, nothing delivered)
//   then  ──idem_done (2xx answer) or idem_release (anything else: a 503 delivered nothing)──▶
//
// A key belongs to the route it was first used on (/events or /batch_events): the same
// key on the other route is a client mistake, refused before anything is published.
// Bounded: at most max_keys / shards keys per shard; past it the oldest key of the app
// that holds the most goes first, so one app's burst forgets its own keys, not another
// app's (idempotency_evictions_total{app_id}); a pending claim whose request never ends
// (its shard died) lapses after PENDING_MS.
// Across the nodes of a cluster the window is shared instead: in Redis with a redis /
// redis-cluster adapter (idempotency-redis.ts), in a NATS JetStream key-value bucket with
// a nats adapter (idempotency-nats.ts); both keep the same claim / done / release contract.

import type { ControlMsg } from '../bus/messages';
import { channelHash } from '../channels/topic';

export type IdemMsg = Extract<ControlMsg, { type: 'idem_claim' | 'idem_done' | 'idem_release' }>;
/** The route a key was used on: POST /apps/{id}/events or /apps/{id}/batch_events. */
export type IdemRoute = 'events' | 'batch_events';
export type IdemReply = { state: 'new' } | { state: 'pending' } | { state: 'done'; status: number; body: unknown }
  | { state: 'conflict'; route: IdemRoute };

/** A stored value's route letter (pending markers `P<letter>…`, answers' `r`): e = events, b = batch_events. */
export const routeLetter = (r: IdemRoute): string => (r === 'events' ? 'e' : 'b');
/** The route of a stored letter; a value written without one counts as `events`. */
export const letterRoute = (l: unknown): IdemRoute => (l === 'b' ? 'batch_events' : 'events');

/**
 * The reply to a claim on `route` of a key that holds the stored value `v` (the cluster-wide
 * windows: `P<letter>…` pending, `D{"s","b","r"}` answered).
 */
export function storedReply(v: string, route: IdemRoute): IdemReply {
  if (v.startsWith('D')) {
    const a = JSON.parse(v.slice(1)) as { s: number; b: unknown; r?: string };
    const first = letterRoute(a.r);
    return first !== route ? { state: 'conflict', route: first } : { state: 'done', status: a.s, body: a.b };
  }
  const first = letterRoute(v[1]);
  return first !== route ? { state: 'conflict', route: first } : { state: 'pending' };
}

/** The stored value of an answer on `route`. */
export const storedAnswer = (route: IdemRoute, status: number, body: unknown): string => 'D' + JSON.stringify({ s: status, b: body, r: routeLetter(route) });

const TYPES: ReadonlySet<string> = new Set<IdemMsg['type']>(['idem_claim', 'idem_done', 'idem_release']);
export const isIdemMsg = (m: ControlMsg): m is IdemMsg => TYPES.has(m.type);

/** The cluster-wide window (idempotency-redis.ts, idempotency-nats.ts): the same contract as the owner shard's. */
export interface ClusterIdempotency {
  claim(app: string, key: string, route?: IdemRoute): Promise<IdemReply>;
  /** `route`: the claim's (its answer keeps it). */
  done(app: string, key: string, status: number, body: unknown, route?: IdemRoute): void;
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
  route: IdemRoute;
}

export interface IdempotencyOwnerDeps {
  windowMs: number;
  maxKeys: number;
  reply(to: number, req: number, body: IdemReply): void;
  /** A key forgotten before its window ended, to make room (counted per app). */
  evicted?(app: string): void;
  now?: () => number;
}

export function createIdempotencyOwner(deps: IdempotencyOwnerDeps) {
  const now = deps.now ?? Date.now;
  /** Per app: its keys in insertion order = oldest first (a done entry is moved last). */
  const apps = new Map<string, Map<string, Entry>>();
  let size = 0;

  function remove(app: string, keys: Map<string, Entry>, k: string): void {
    if (!keys.delete(k)) return;
    size--;
    if (keys.size === 0) apps.delete(app);
  }

  function live(app: string, k: string, t: number): Entry | undefined {
    const keys = apps.get(app);
    const e = keys?.get(k);
    if (e !== undefined && e.until <= t) {
      remove(app, keys!, k);
      return undefined;
    }
    return e;
  }

  /** Room for one more key: the oldest key of the app holding the most goes (the claimer's own when it is that app). */
  function makeRoom(claimer: string): void {
    while (size >= deps.maxKeys) {
      let most = claimer;
      let n = apps.get(claimer)?.size ?? 0;
      for (const [app, keys] of apps) if (keys.size > n) { most = app; n = keys.size; }
      const keys = apps.get(most)!;
      remove(most, keys, keys.keys().next().value as string);
      deps.evicted?.(most);
    }
  }

  function set(app: string, k: string, e: Entry): void {
    let keys = apps.get(app);
    if (keys === undefined) apps.set(app, keys = new Map<string, Entry>());
    if (keys.has(k)) keys.delete(k);
    else size++;
    keys.set(k, e);
  }

  function handle(m: IdemMsg, from: number): void {
    const k = m.key;
    const t = now();
    switch (m.type) {
      case 'idem_claim': {
        const route = m.route ?? 'events';
        const e = live(m.app, k, t);
        if (e === undefined) {
          makeRoom(m.app);
          set(m.app, k, { done: null, until: t + PENDING_MS, route });
          return deps.reply(from, m.req, { state: 'new' });
        }
        if (e.route !== route) return deps.reply(from, m.req, { state: 'conflict', route: e.route });
        return deps.reply(from, m.req, e.done === null ? { state: 'pending' } : { state: 'done', ...e.done });
      }
      case 'idem_done': {
        const e = apps.get(m.app)?.get(k);
        if (e === undefined) makeRoom(m.app);
        set(m.app, k, { done: { status: m.status, body: m.body }, until: t + deps.windowMs, route: e?.route ?? m.route ?? 'events' });
        return;
      }
      case 'idem_release': {
        const keys = apps.get(m.app);
        if (keys?.get(k)?.done === null) remove(m.app, keys, k);
      }
    }
  }

  return {
    handle,
    /** Drops what the window has passed. */
    sweep(): void {
      const t = now();
      for (const [app, keys] of [...apps]) for (const k of [...keys.keys()]) live(app, k, t);
    },
    size: () => size,
    /** Keys held for `app`. */
    sizeOf: (app: string) => apps.get(app)?.size ?? 0,
  };
}
