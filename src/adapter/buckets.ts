// The data plane by interest: a publish for channel C travels on C's bucket subject
// (bucketOf(app, C, adapter.buckets)), and a node subscribes to a bucket only while one
// of its shards has a subscriber of a channel of that bucket. A node with no subscriber
// of a bucket receives none of its publishes (no bytes from the backend, no decoding).
//
//   shard, first subscriber of bucket b on this node:
//     interest bit set (channels/interest.ts) ─▶ ready[b]? ─yes─▶ subscription_succeeded
//                                                  └─no─▶ `cluster_bucket` request ─▶ primary:
//     subscribe(b) acknowledged by the backend ─▶ ready[b] = 1 ─▶ reply ─▶ subscription_succeeded
//
// So a publish accepted after subscription_succeeded, on any node, reaches this node: the
// backend had the subscription before the client was told (test/adapter/buckets.test.ts).
//
// Unsubscribing (the sweep, every SWEEP_MS): a subscribed bucket without interest for
// adapter.bucket_linger_ms is dropped (the linger keeps churn from thrashing). The race
// with a shard's new subscriber is closed by the order of two sequentially consistent
// accesses on each side: the shard sets its interest bit, then reads ready[b]; the
// primary clears ready[b], then reads the interest bits. At least one sees the other's
// write: the shard asks for the bucket again, or the primary keeps it.
//
// A node whose backend connection is renewed or reconnected subscribes again exactly the
// buckets it holds (the transport keeps them: redis.ts, nats.ts).

import type { Logger } from 'pino';
import type { MetricsSink } from '../metrics/types';
import type { Transport } from './transport';

/** How often subscribed buckets are checked for interest (at most; shorter with a short linger). */
const SWEEP_MS = 1000;

export interface BucketDeps {
  transport: Transport;
  buckets: number;
  lingerMs: number;
  /** The subject of bucket b. */
  subject: (b: number) => string;
  /** Whether a local shard has a subscriber of a channel of bucket b (Interest.anyIn). */
  interest: (b: number) => boolean;
  /** Int32[buckets], shared with the shards: 1 while bucket b is subscribed and acknowledged. */
  ready: SharedArrayBuffer;
  handler: (data: Uint8Array) => void;
  log: Logger;
  metrics: MetricsSink;
}

export interface BucketPlane {
  /** Resolves once bucket b is subscribed and acknowledged by the backend. */
  ensure(b: number): Promise<void>;
  /** Buckets subscribed now. */
  subscribed(): number[];
  /** One pass of the sweep (the timer's; tests call it). */
  sweep(now?: number): void;
  stop(): void;
}

export function startBucketPlane(deps: BucketDeps): BucketPlane {
  const { transport: tx, log, metrics } = deps;
  const ready = new Int32Array(deps.ready);
  /** Subscribed (or subscribing) buckets → when they were first seen without interest (null: interest). */
  const held = new Map<number, { idleSince: number | null; pending: Promise<void> | null }>();
  const gauge = () => metrics.set('adapter_buckets_subscribed', {}, held.size);

  function ensure(b: number): Promise<void> {
    const h = held.get(b);
    if (h) {
      h.idleSince = null;
      if (Atomics.load(ready, b) === 1) return Promise.resolve();
      if (h.pending) return h.pending;
    }
    const entry = h ?? { idleSince: null, pending: null };
    held.set(b, entry);
    gauge();
    const pending = tx.subscribe(deps.subject(b), deps.handler).then(() => {
      if (held.get(b) !== entry) return; // dropped meanwhile
      entry.pending = null;
      Atomics.store(ready, b, 1);
      metrics.inc('adapter_subscribe_total');
    }, (err: unknown) => {
      entry.pending = null; // the next subscriber asks again
      metrics.inc('adapter_errors_total');
      log.warn({ bucket: b, error: err instanceof Error ? err.message : String(err) }, 'cluster: subscribing a bucket failed');
      throw err;
    });
    entry.pending = pending;
    return pending;
  }

  function sweep(now = Date.now()): void {
    for (const [b, h] of held) {
      if (h.pending !== null || deps.interest(b)) {
        h.idleSince = null;
        continue;
      }
      if (h.idleSince === null) h.idleSince = now;
      if (now - h.idleSince < deps.lingerMs) continue;
      // ready first, then the interest again (the order the shards mirror: see above)
      Atomics.store(ready, b, 0);
      if (deps.interest(b)) {
        Atomics.store(ready, b, 1);
        h.idleSince = null;
        continue;
      }
      held.delete(b);
      tx.unsubscribe(deps.subject(b)).catch((err: unknown) => {
        log.warn({ bucket: b, error: err instanceof Error ? err.message : String(err) }, 'cluster: unsubscribing a bucket failed');
      });
    }
    gauge();
  }

  const timer = setInterval(() => sweep(), Math.max(10, Math.min(SWEEP_MS, Math.floor(deps.lingerMs / 2))));
  timer.unref();
  gauge();
  return {
    ensure,
    subscribed: () => [...held.keys()].filter((b) => Atomics.load(ready, b) === 1),
    sweep,
    stop: () => clearInterval(timer),
  };
}
