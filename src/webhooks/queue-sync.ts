// The `sync` queue driver (default): jobs live in this process's memory. At most
// `concurrency` requests are in flight; up to `max_queue` more wait, each app in its own
// arrival order, the apps taking turns. Past max_queue the app holding the most waiting
// jobs gives one up: the new job itself when it is that app's, else that app's newest
// (webhooks_dropped_total{app_id, reason="queue_full"} of the app that lost it, a warning
// at most once a second); so one app's churn cannot drop another app's webhooks, and a
// slow receiver cannot grow the heap without bound.
// A job waiting for its retry holds no slot (a failing endpoint does not hold up the
// others): its timer puts it back at the end of the queue. A crash or kill loses what is
// queued: use the `redis` driver for at-least-once.

import type { Logger } from 'pino';
import { logLimited } from '../log';
import type { MetricsSink } from '../metrics/types';
import type { Deliverer } from './deliver';
import type { WebhookQueue } from './queue';
import type { Job } from './send';

export class SyncQueue implements WebhookQueue {
  readonly driver = 'sync';
  /** Per app: its waiting jobs (FIFO); an app is here while it has one. */
  private readonly waiting = new Map<string, Fifo>();
  /** Apps with waiting jobs, in turn order (the next to send first). */
  private turn: string[] = [];
  private waitingCount = 0;
  private inflight = 0;
  /** Retry timers: their jobs come back to `waiting` when they fire. */
  private readonly retries = new Map<NodeJS.Timeout, Job>();
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
    return this.waitingCount + this.inflight + this.retries.size;
  }

  push(job: Job): void {
    if (this.stopping) return this.drop(job, 'shutdown');
    this.enqueue({ job, n: 0 });
    this.pump();
  }

  /** `w` waits; past max_queue the app holding the most waiting gives one up. */
  private enqueue(w: Waiting): void {
    if (this.waitingCount >= this.opts.maxQueue) {
      let most = w.job.app;
      let n = this.waiting.get(most)?.size ?? 0;
      for (const [app, q] of this.waiting) if (q.size > n) { most = app; n = q.size; }
      if (most === w.job.app) return this.drop(w.job, 'queue_full');
      this.drop(this.take(most, 'newest').job, 'queue_full');
    }
    let q = this.waiting.get(w.job.app);
    if (q === undefined) {
      this.waiting.set(w.job.app, q = new Fifo());
      this.turn.push(w.job.app);
    }
    q.push(w);
    this.waitingCount++;
  }

  /** An app's oldest (to send) or newest (to drop) waiting job. */
  private take(app: string, which: 'oldest' | 'newest'): Waiting {
    const q = this.waiting.get(app)!;
    const w = which === 'oldest' ? q.shift() : q.pop();
    this.waitingCount--;
    if (q.size === 0) {
      this.waiting.delete(app);
      this.turn = this.turn.filter((a) => a !== app);
    }
    return w;
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
    const left = this.waitingCount + this.retries.size;
    for (const q of this.waiting.values()) for (const w of q.all()) this.drop(w.job, 'shutdown');
    for (const [timer, job] of this.retries) {
      clearTimeout(timer); // retries still waiting give up now
      this.drop(job, 'shutdown');
    }
    this.retries.clear();
    this.waiting.clear();
    this.turn = [];
    this.waitingCount = 0;
    if (left > 0 || this.inflight > 0) this.log.warn({ dropped: left, inflight: this.inflight }, 'webhooks still queued at the end of the shutdown grace period were dropped');
  }

  private pump(): void {
    while (this.inflight < this.opts.concurrency && this.turn.length > 0) {
      // the app whose turn it is sends one, then goes to the end of the turn
      const app = this.turn[0];
      const { job, n } = this.take(app, 'oldest');
      if (this.waiting.has(app)) this.turn.push(this.turn.shift()!);
      this.inflight++;
      void this.deliverer.once(job, n).then((r) => {
        if (typeof r === 'number') {
          const timer = setTimeout(() => {
            this.retries.delete(timer);
            this.enqueue({ job, n: n + 1 });
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
    const line = { app: job.app, events: job.events, reason, max_queue: this.opts.maxQueue };
    // a full queue: at most one line a second per app (with the count of the others)
    if (reason === 'queue_full') logLimited(this.log, 'warn', line, 'webhook dropped');
    else this.log.warn(line, 'webhook dropped');
  }
}

interface Waiting { job: Job; n: number }

/** A FIFO with O(1) amortised shift (a head index, compacted now and then) and pop. */
class Fifo {
  private items: Waiting[] = [];
  private head = 0;

  get size(): number {
    return this.items.length - this.head;
  }

  push(w: Waiting): void {
    this.items.push(w);
  }

  shift(): Waiting {
    const w = this.items[this.head++];
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items.splice(0, this.head);
      this.head = 0;
    }
    return w;
  }

  pop(): Waiting {
    return this.items.pop()!;
  }

  all(): Waiting[] {
    return this.items.slice(this.head);
  }
}
