// The primary's webhook service: shards report events over the bus (`webhook`,
// `webhook_sync`: webhooks/shard.ts); this service makes owner transitions exactly-once
// (ledger.ts), routes each event to the endpoints of its app whose event_types include
// it, batches (batcher.ts), and hands the requests to the queue driver, which sends them
// with retries (deliver.ts, send.ts, lambda.ts). All network I/O happens on the primary
// thread: a slow or failing receiver never touches a shard's event loop.

import type { Logger } from 'pino';
import type { ControlMsg } from '../bus/messages';
import type { AppConfig, Config } from '../config/types';
import type { MetricsSink } from '../metrics/types';
import { Batcher } from './batcher';
import { Deliverer, type WebhookOutcome } from './deliver';
import type { WebhookEvent } from './events';
import { createHttpPoster } from './http';
import { createLambdaInvoker, type LambdaInvoker } from './lambda';
import { Ledger } from './ledger';
import type { WebhookQueue } from './queue';
import { RedisQueue } from './queue-redis';
import { SyncQueue } from './queue-sync';
import { redisWhere } from '../redis/client';

export type WebhookMsg = Extract<ControlMsg, { type: 'webhook' | 'webhook_sync' }>;

export class WebhookQueueUnavailable extends Error {
  readonly code = 'RC_ERR_WEBHOOK_QUEUE_DOWN';
}

export interface WebhookService {
  handle(msg: WebhookMsg): void;
  /**
   * An occupancy or member webhook the cluster decided once for every node
   * (adapter/transitions.ts): sent as it is, without this process's ledger, which follows
   * a single node's transitions only.
   */
  send(app: string, e: WebhookEvent): void;
  /** Jobs accepted by the queue and not finished. */
  readonly queued: number;
  /** Tells `fn` each delivery attempt's outcome (the live console); null: nobody. */
  observe(fn: ((o: WebhookOutcome) => void) | null): void;
  /** Sends the open batches and stops the queue within graceMs. */
  stop(graceMs: number): Promise<void>;
}

/** ms the primary waits for the redis queue at startup. */
const STARTUP_TIMEOUT_MS = 3000;

export function appsWithWebhooks(config: Pick<Config, 'apps'>): boolean {
  return config.apps.some((a) => a.webhooks.length > 0);
}

export async function startWebhookService(config: Config, log: Logger, metrics: MetricsSink): Promise<WebhookService> {
  const byId = new Map<string, AppConfig>(config.apps.map((a) => [a.id, a]));
  const cfg = config.webhooks;
  const lambda: LambdaInvoker = createLambdaInvoker({ endpoint: cfg.lambda_endpoint, timeoutMs: cfg.timeout_ms });
  const poster = createHttpPoster({ timeoutMs: cfg.timeout_ms, concurrency: cfg.concurrency });
  const deliverer = new Deliverer({
    cfg,
    credentials: (app) => byId.get(app) ?? null,
    headers: (app, url) => byId.get(app)?.webhooks.find((w) => w.url === url)?.headers ?? null,
    lambda,
    http: poster,
  }, cfg.retry, metrics, log);
  const queue: WebhookQueue = config.queue.driver === 'redis'
    ? new RedisQueue(config.database.redis, deliverer, cfg.concurrency, cfg.max_queue, metrics, log)
    : new SyncQueue(deliverer, { concurrency: cfg.concurrency, maxQueue: cfg.max_queue }, metrics, log);
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([queue.start(), new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${STARTUP_TIMEOUT_MS} ms`)), STARTUP_TIMEOUT_MS);
    })]);
  } catch (err) {
    await queue.stop(0);
    lambda.close();
    poster.close();
    throw new WebhookQueueUnavailable(`queue.driver redis: cannot use Redis at ${redisWhere(config.database.redis)} for the webhook queue ` +
      `(${(queue instanceof RedisQueue ? queue.failure() : null) ?? (err as Error).message})`);
  } finally {
    clearTimeout(timer);
  }
  const batcher = new Batcher(cfg.batching, (job) => queue.push(job));
  const ledger = new Ledger(config.workers);

  function route(app: string, e: WebhookEvent): void {
    const a = byId.get(app);
    if (!a) return;
    for (const w of a.webhooks) if (w.event_types.includes(e.name)) batcher.add(app, w.url, e);
  }

  return {
    handle(msg) {
      if (msg.type === 'webhook') {
        for (const [app, e] of msg.events) if (ledger.accept(app, e)) route(app, e);
        return;
      }
      // after a rebuild, and from every owner each bus.owner_reconcile_interval_ms (shard/reconcile.ts)
      const events = ledger.reconcile(msg.shard, msg.channels);
      if (events.length > 0) {
        metrics.inc('owner_reconcile_corrections_total', { kind: 'webhook' }, events.length);
        log.warn({ shard: msg.shard, events: events.length }, 'webhooks: transitions of an owner shard\'s channels re-decided from its records (a report was lost, or the shard restarted)');
      }
      for (const { app, event } of events) route(app, event);
    },
    send: route,
    observe(fn) {
      deliverer.observer = fn;
    },
    get queued() {
      return queue.size;
    },
    async stop(graceMs) {
      batcher.flush();
      await queue.stop(graceMs);
      lambda.close();
      poster.close();
    },
  };
}
