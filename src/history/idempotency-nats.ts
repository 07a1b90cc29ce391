// The cluster-wide idempotency window with adapter.driver nats (docs/protocol.md "Idempotent
// publish": across nodes with a cluster adapter): a NATS JetStream key-value bucket,
// `<adapter.nats.prefix, dots as _>_idem`, its entries kept idempotency.window_seconds
// (the bucket's max age) and one revision each. Every node asks the same bucket, so a
// retry that reaches another node, or another shard, finds the first request's key. The
// NATS server needs JetStream (`nats-server -js`); without it every claim is a 503 saying so.
//
// One entry per (app, idempotency_key), named by the SHA-256 of both (a bucket key allows
// letters, digits, `-`, `_`, `=`, `/` and `.` only; an idempotency_key may hold any printable
// character).
//
//   claim    create the entry with a pending marker `P<token>` (it must not exist: JetStream
//            checks the last revision, so of two nodes racing on one key one wins) → 'new';
//            else its value: the first answer `D<json>` ('done'), or a pending marker
//            ('pending': 503 retry) unless that marker is older than PENDING_MS (its
//            request's node died), then this request takes it over (update at its revision).
//   done     a 2xx answer: update the entry to `D<json>` at the revision this request
//            wrote (never over another request's marker); retried every DONE_RETRY_MS
//            while the marker would stand (PENDING_MS) when NATS did not answer.
//   release  anything else (a 503 delivered nothing): delete the entry at that revision,
//            so the retry publishes once.
//
// NATS unreachable or slow (a claim waits at most COMMAND_TIMEOUT_MS for each request): the
// claim fails, the request is answered 503 naming NATS and nothing is delivered. A `done`
// that never reaches NATS leaves the pending marker, which a retry takes over after
// PENDING_MS and publishes again: logged and counted (idempotency_errors_total{op="done"}).

import { createHash, randomBytes } from 'node:crypto';
import type { KV, NatsConnection } from 'nats';
import type { Logger } from 'pino';
import { natsConnectOptions } from '../adapter/nats';
import type { Config } from '../config/types';
import type { MetricsSink } from '../metrics/types';
import { PENDING_MS, idempotencyDown, routeLetter, storedAnswer, storedReply, writeAnswer, type ClusterIdempotency, type IdemReply, type IdemRoute } from './idempotency';

/** ms a claim's request to NATS (connect, bucket, create, get, update) may take. */
export const COMMAND_TIMEOUT_MS = 1000;

export interface NatsIdempotencyDeps {
  config: Pick<Config, 'adapter' | 'idempotency'>;
  log: Logger;
  metrics: MetricsSink;
}

/** The bucket's name for a subject prefix (a bucket name takes no dots). */
export const bucketOf = (prefix: string): string => `${prefix.replace(/\./g, '_')}_idem`;

/** The bucket key of an app's idempotency_key. */
export const entryOf = (app: string, key: string): string => createHash('sha256').update(app).update('\0').update(key).digest('base64url');

const enc = new TextEncoder();
const dec = new TextDecoder();
/** JetStream refused a write because the entry is not at the revision given (create: it exists). */
const wrongRevision = (err: unknown): boolean => /wrong last sequence/i.test((err as Error)?.message ?? '');

export function createNatsIdempotency(deps: NatsIdempotencyDeps): ClusterIdempotency {
  const { config, log, metrics } = deps;
  const cfg = config.adapter.nats;
  const where = cfg.servers.join(', ');
  const bucket = bucketOf(cfg.prefix);
  const windowMs = config.idempotency.window_seconds * 1000;
  const failed = (op: 'claim' | 'done' | 'release') => metrics.inc('idempotency_errors_total', { op });
  let nc: NatsConnection | null = null;
  let closed = false;
  /** The bucket, opened (created if missing) at the first claim; after a failure, at the next. */
  let opening: Promise<KV> | null = null;
  let down = false;

  function why(err: unknown): string {
    const e = err as { code?: unknown; message?: string };
    // no responder on $JS.API: the server runs without JetStream
    if (String(e?.code) === '503') return 'JetStream is not enabled on the NATS server: start it with -js';
    return e?.message ?? String(err);
  }

  function store(): Promise<KV> {
    if (closed) return Promise.reject(new Error('closed'));
    opening ??= (async () => {
      if (nc === null || nc.isClosed()) {
        // loaded here: a process without a nats adapter never loads the client
        const { connect } = await import('nats');
        nc = await connect(natsConnectOptions(cfg, 'ringcast-idempotency', COMMAND_TIMEOUT_MS));
        if (closed) await nc.close();
      }
      return nc.jetstream({ timeout: COMMAND_TIMEOUT_MS }).views.kv(bucket, { ttl: windowMs, history: 1 });
    })();
    const p = opening;
    p.then(() => {
      if (down) log.info({ nats: where }, 'idempotency: NATS JetStream reachable again');
      down = false;
    }, (err: unknown) => {
      if (opening === p) opening = null;
      if (!down) log.warn({ err: why(err), nats: where }, 'idempotency: NATS JetStream unreachable; publishes with an idempotency_key are refused (503)');
      down = true;
    });
    return p;
  }

  /** The revision this shard wrote for each claim it holds, by app\0key. */
  const held = new Map<string, number>();

  async function claimIn(kv: KV, app: string, key: string, route: IdemRoute): Promise<IdemReply> {
    const entry = entryOf(app, key);
    const marker = enc.encode('P' + routeLetter(route) + randomBytes(12).toString('base64url'));
    // twice at most: an entry deleted (released) between the create and the get is free again
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        held.set(app + '\0' + key, await kv.create(entry, marker));
        return { state: 'new' };
      } catch (err) {
        if (!wrongRevision(err)) throw err;
      }
      const e = await kv.get(entry);
      if (e === null || e.operation !== 'PUT') continue;
      const v = dec.decode(e.value);
      const stored = storedReply(v, route);
      if (stored.state !== 'pending') return stored;
      if (Date.now() - e.created.getTime() < PENDING_MS) return { state: 'pending' };
      // a pending marker whose request never ended (its node died): this request takes it over
      try {
        held.set(app + '\0' + key, await kv.update(entry, marker, e.revision));
        return { state: 'new' };
      } catch (err) {
        if (!wrongRevision(err)) throw err;
        return { state: 'pending' }; // another retry took it over first
      }
    }
    return { state: 'pending' };
  }

  return {
    async claim(app, key, route = 'events') {
      try {
        return await claimIn(await store(), app, key, route);
      } catch (err) {
        failed('claim');
        throw idempotencyDown('NATS JetStream', where, why(err));
      }
    },
    done(app, key, status, body, route = 'events') {
      const id = app + '\0' + key;
      const revision = held.get(id);
      held.delete(id);
      if (revision === undefined) return;
      const answer = enc.encode(storedAnswer(route, status, body));
      writeAnswer(() => store().then((kv) => kv.update(entryOf(app, key), answer, revision)), {
        settled: wrongRevision, // the marker lapsed and another request holds the key
        failed: () => failed('done'),
        lost: (err) => log.error({ err: why(err), nats: where, app_id: app },
          'idempotency: the answer of a delivered publish never reached NATS; a retry after its pending marker lapses publishes again'),
      });
    },
    release(app, key) {
      const id = app + '\0' + key;
      const revision = held.get(id);
      held.delete(id);
      if (revision === undefined) return;
      // lost: the pending marker lapses after PENDING_MS (retries get 503 meanwhile)
      store().then((kv) => kv.delete(entryOf(app, key), { previousSeq: revision })).catch((err: unknown) => {
        if (!wrongRevision(err)) failed('release');
      });
    },
    async close() {
      closed = true;
      const c = nc;
      nc = null;
      await c?.close().catch(() => undefined);
    },
  };
}
