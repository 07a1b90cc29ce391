// Delivering one job: the first attempt and up to `retry.max_retries` more after
// retryable failures, waiting initial × 2^n (capped) between them (1, 2, 4 s by default).
// A final failure is logged with the endpoint and the event names and counted
// (webhooks_failed_total); the queue drivers (queue-sync.ts, queue-redis.ts) decide when
// a job runs and what happens to it afterwards.

import type { Logger } from 'pino';
import type { Config } from '../config/types';
import type { MetricsSink } from '../metrics/types';
import { attempt, retryDelay, type Job, type SendDeps } from './send';

/** The URL for logs: lambda ARNs as they are, http(s) without credentials or query. */
export function endpointForLog(url: string): string {
  if (url.startsWith('lambda://')) return url;
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '(invalid url)';
  }
}

/** One attempt's outcome, for the live console (console/server.ts). */
export interface WebhookOutcome {
  app: string;
  /** endpointForLog of the job's URL. */
  endpoint: string;
  events: string[];
  op: 'delivered' | 'retry' | 'failed';
  status?: number;
  reason?: string;
}

export class Deliverer {
  /** Told each attempt's outcome (the live console watches), or null. */
  observer: ((o: WebhookOutcome) => void) | null = null;
  private readonly waits = new Set<{ timer: NodeJS.Timeout; wake(): void }>();
  private stopped = false;

  constructor(
    private readonly send: SendDeps,
    private readonly retry: Config['webhooks']['retry'],
    private readonly metrics: MetricsSink,
    private readonly log: Logger,
  ) {}

  /**
   * Attempt `n` of a job (0: the first): 'delivered', 'failed' (given up: logged and
   * counted), or the ms to wait before attempt n + 1.
   */
  async once(job: Job, n: number): Promise<'delivered' | 'failed' | number> {
    if (n > 0) this.metrics.inc('webhook_retries_total', { app_id: job.app });
    const r = await attempt(job, this.send);
    const final = !r.ok && (!r.retry || n >= this.retry.max_retries);
    if (this.observer) {
      this.observer({
        app: job.app, endpoint: endpointForLog(job.url), events: job.events, op: r.ok ? 'delivered' : final ? 'failed' : 'retry',
        ...(r.status !== undefined ? { status: r.status } : {}), ...(!r.ok ? { reason: r.reason } : {}),
      });
    }
    if (r.ok) {
      this.metrics.inc('webhooks_sent_total', { app_id: job.app });
      return 'delivered';
    }
    if (final) {
      this.metrics.inc('webhooks_failed_total', { app_id: job.app, reason: r.reason });
      this.log.error({
        app: job.app, endpoint: endpointForLog(job.url), events: job.events,
        status: r.status, reason: r.reason, error: r.error, attempts: n + 1,
      }, r.retry ? 'webhook not delivered: retries exhausted' : 'webhook not delivered: answer not retried');
      return 'failed';
    }
    return retryDelay(n + 1, this.retry);
  }

  /**
   * Every attempt of a job, waiting in between (the redis driver): true when delivered,
   * false when given up or stopped while waiting to retry.
   */
  async run(job: Job): Promise<boolean> {
    for (let n = 0; ; n++) {
      const r = await this.once(job, n);
      if (r === 'delivered') return true;
      if (r === 'failed' || !(await this.sleep(r))) return false;
    }
  }

  /** Retries waiting for their timer. */
  get waiting(): number {
    return this.waits.size;
  }

  /** Cancels the retry waits (their jobs resolve false) and refuses new waits. */
  stop(): void {
    this.stopped = true;
    for (const w of [...this.waits]) {
      clearTimeout(w.timer);
      w.wake();
    }
  }

  private sleep(ms: number): Promise<boolean> {
    if (this.stopped) return Promise.resolve(false);
    return new Promise((resolve) => {
      const w = {
        timer: setTimeout(() => { this.waits.delete(w); resolve(true); }, ms),
        wake: () => { this.waits.delete(w); resolve(false); },
      };
      this.waits.add(w);
    });
  }
}
