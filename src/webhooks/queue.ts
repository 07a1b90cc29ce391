// The seam between accepting a webhook request and sending it: one interface, one file per
// driver (queue-sync.ts, queue-redis.ts), the factory in index.ts picks it from
// `queue.driver` (QUEUE_DRIVER).

import type { Job } from './send';

export interface WebhookQueue {
  readonly driver: 'sync' | 'redis';
  /** Startup: resolves when the queue can take jobs (redis: connected, orphans requeued); rejects otherwise. */
  start(): Promise<void>;
  /** Accepts a job; never throws (a job that cannot be queued is counted in webhooks_dropped_total and logged). */
  push(job: Job): void;
  /** Jobs accepted and not finished (sync: waiting, in flight, waiting to retry). */
  readonly size: number;
  /**
   * Graceful stop within graceMs. sync: sends what is queued, then drops what is left
   * (counted, logged). redis: stops taking jobs; jobs still in flight stay in Redis and
   * are sent after the next start.
   */
  stop(graceMs: number): Promise<void>;
}
