// The `sync` queue driver (default): jobs live in this process's memory. At most
// `concurrency` requests are in flight; up to `max_queue` more wait in arrival order;
// past that a new job is dropped (webhooks_dropped_total{reason="queue_full"}, a warning
// at most once a second) rather than letting a slow receiver grow the heap without bound.
// A job waiting for its retry holds no slot (a failing endpoint does not hold up the
// others): its timer puts it back at the end of the queue. A crash or kill loses what is
// queued: use the `redis` driver for at-least-once.

import type { Logger } from 'pino';
import type { MetricsSink } from '../metrics/types';
import type { Deliverer } from './deliver';
import type { WebhookQueue } from './queue';
import type { Job } from './send';

export class SyncQueue implements WebhookQueue {
  readonly driver = 'sync';
  private readonly waiting: { job: Job; n: number }[] = [];
  private head = 0;
  private inflight = 0;
  /** Retry timers: their jobs come back to `waiting` when they fire. */
  private readonly retries = new Map<NodeJS.Timeout, Job>();
  private lastWarn = 0;
  private stopping = false;
  private idle: (() => void) | null = null;

  constructor(
    private readonly deliverer: Deliverer,
    private readonly opts: { concurrency: number; maxQueue: number },
    private readonly metrics: MetricsSink,
    private readonly log: Logger,
  ) {}

  start(): Promise<void> {
    return Promise.resolve();
  }

  get size(): number {
    return this.waiting.length - this.head + this.inflight + this.retries.size;
  }

  push(job: Job): void {
    if (this.stopping) return this.drop(job, 'shutdown');
    if (this.waiting.length - this.head >= this.opts.maxQueue) return this.drop(job, 'queue_full');
    this.waiting.push({ job, n: 0 });
    this.pump();
  }

  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    if (this.size > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, graceMs);
        timer.unref();
        this.idle = () => { clearTimeout(timer); resolve(); };
      });
    }
    this.idle = null;
    this.deliverer.stop();
    const left = this.waiting.length - this.head + this.retries.size;
    for (let i = this.head; i < this.waiting.length; i++) this.drop(this.waiting[i].job, 'shutdown');
    for (const [timer, job] of this.retries) {
      clearTimeout(timer); // retries still waiting give up now
      this.drop(job, 'shutdown');
    }
    this.retries.clear();
    this.waiting.length = 0;
    this.head = 0;
    if (left > 0 || this.inflight > 0) this.log.warn({ dropped: left, inflight: this.inflight }, 'webhooks still queued at the end of the shutdown grace period were dropped');
  }

  private pump(): void {
    while (this.inflight < this.opts.concurrency && this.head < this.waiting.length) {
      const { job, n } = this.waiting[this.head++];
      if (this.head > 1024 && this.head * 2 > this.waiting.length) {
        this.waiting.splice(0, this.head); // compact now and then: O(1) amortised shift
        this.head = 0;
      }
      this.inflight++;
      void this.deliverer.once(job, n).then((r) => {
        if (typeof r === 'number') {
          const timer = setTimeout(() => {
            this.retries.delete(timer);
            this.waiting.push({ job, n: n + 1 });
            this.pump();
          }, r);
          this.retries.set(timer, job);
        }
      }).finally(() => {
        this.inflight--;
        this.pump();
        if (this.size === 0) this.idle?.();
      });
    }
    this.metrics.set('webhook_queue_size', undefined, this.size);
  }

  private drop(job: Job, reason: 'queue_full' | 'shutdown'): void {
    this.metrics.inc('webhooks_dropped_total', { app_id: job.app, reason });
    const now = Date.now();
    if (reason === 'queue_full' && now - this.lastWarn < 1000) return;
    this.lastWarn = now;
    this.log.warn({ app: job.app, events: job.events, reason, max_queue: this.opts.maxQueue }, 'webhook dropped');
  }
}
