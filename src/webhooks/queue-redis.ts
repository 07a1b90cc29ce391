// The `redis` queue driver: at-least-once delivery across restarts. A job is accepted
// when RPUSH to `<key_prefix>webhooks:pending` returns; a consumer moves it atomically to
// `<key_prefix>webhooks:processing` (BLMOVE) before sending and removes it (LREM) only
// once it is delivered or given up. A process killed meanwhile (kill -9) leaves it in
// `processing`; the next start moves every job found there back to the head of
// `pending` and sends it again. So a receiver may see a request twice (the spec: "receivers
// should be idempotent") but never loses one Redis has accepted. Several nodes on one
// Redis share the lists (any node sends any job); a node starting while another is
// sending re-sends that node's in-flight jobs too, which at-least-once allows.
//
// Connection: database.redis (host/port or Sentinel), as the redis rate limiter. Two
// clients: one for commands, one blocked in BLMOVE.

import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import type { RedisConfig } from '../config/types';
import type { MetricsSink } from '../metrics/types';
import type { Deliverer } from './deliver';
import type { WebhookQueue } from './queue';
import type { Job } from './send';

/** Seconds a BLMOVE blocks before the loop looks at `stopping` again. */
const BLOCK_SECONDS = 1;

export function redisOptions(cfg: RedisConfig, name: string): RedisOptions {
  const sentinel = cfg.sentinels.length > 0;
  return {
    ...(sentinel
      ? { sentinels: cfg.sentinels, name: cfg.name, sentinelPassword: cfg.sentinel_password ?? undefined }
      : { host: cfg.host, port: cfg.port }),
    username: cfg.username ?? undefined,
    password: cfg.password ?? undefined,
    db: cfg.db,
    connectTimeout: 2000,
    maxRetriesPerRequest: null, // commands wait for a reconnect rather than fail
    retryStrategy: (times) => Math.min(50 * times, 1000),
    connectionName: name,
    lazyConnect: true,
  };
}

export class RedisQueue implements WebhookQueue {
  readonly driver = 'redis';
  private readonly cmd: Redis;
  private readonly block: Redis;
  private readonly pending: string;
  private readonly processing: string;
  private inflight = 0;
  private pushes = 0;
  private stopping = false;
  private loop: Promise<void> | null = null;
  private slot: (() => void) | null = null;
  private drained: (() => void) | null = null;

  constructor(
    cfg: RedisConfig,
    private readonly deliverer: Deliverer,
    private readonly concurrency: number,
    /** RPUSHes waiting for Redis (e.g. while it is down) past which new jobs are dropped. */
    private readonly maxPending: number,
    private readonly metrics: MetricsSink,
    private readonly log: Logger,
  ) {
    this.cmd = new Redis(redisOptions(cfg, 'ringcast-webhooks'));
    this.block = new Redis(redisOptions(cfg, 'ringcast-webhooks-consumer'));
    for (const c of [this.cmd, this.block]) c.on('error', (err: Error) => log.warn({ err: err.message }, 'webhook queue: redis error'));
    this.pending = `${cfg.key_prefix}webhooks:pending`;
    this.processing = `${cfg.key_prefix}webhooks:processing`;
  }

  get size(): number {
    return this.inflight + this.pushes;
  }

  async start(): Promise<void> {
    await Promise.all([this.cmd.connect(), this.block.connect()]);
    let requeued = 0;
    // jobs a previous run took and did not finish (killed): to the head of pending, oldest first
    while (await this.cmd.lmove(this.processing, this.pending, 'RIGHT', 'LEFT')) requeued++;
    if (requeued > 0) this.log.warn({ requeued }, 'webhook queue: re-sending jobs a previous run had not finished');
    this.loop = this.consume();
  }

  push(job: Job): void {
    if (this.pushes >= this.maxPending) {
      this.metrics.inc('webhooks_dropped_total', { app_id: job.app, reason: 'queue_full' });
      return;
    }
    this.pushes++;
    this.cmd.rpush(this.pending, JSON.stringify(job)).then(() => undefined, (err: Error) => {
      this.metrics.inc('webhooks_dropped_total', { app_id: job.app, reason: 'queue_error' });
      this.log.error({ err: err.message, app: job.app, events: job.events }, 'webhook dropped: could not queue it in redis');
    }).finally(() => {
      this.pushes--;
      if (this.pushes === 0) this.drained?.();
    });
  }

  async stop(graceMs: number): Promise<void> {
    // what was accepted goes to Redis first (it is sent after the next start if not now)
    if (this.pushes > 0) await this.wait((r) => (this.drained = r), graceMs);
    this.stopping = true;
    this.slot?.();
    this.block.disconnect(); // ends a BLMOVE in progress
    await this.loop?.catch(() => undefined);
    this.deliverer.stop();
    this.cmd.disconnect();
  }

  private async consume(): Promise<void> {
    while (!this.stopping) {
      if (this.inflight >= this.concurrency) {
        await new Promise<void>((r) => (this.slot = r));
        continue;
      }
      let raw: string | null;
      try {
        raw = await this.block.blmove(this.pending, this.processing, 'LEFT', 'RIGHT', BLOCK_SECONDS);
      } catch (err) {
        if (this.stopping) return;
        this.log.warn({ err: (err as Error).message }, 'webhook queue: BLMOVE failed; retrying');
        await new Promise((r) => setTimeout(r, 500));
        continue;
      }
      if (raw === null) continue;
      if (this.stopping) return; // left in processing: sent after the next start
      this.run(raw);
    }
  }

  private run(raw: string): void {
    let job: Job;
    try {
      job = JSON.parse(raw) as Job;
    } catch {
      this.log.error({ raw: raw.slice(0, 200) }, 'webhook queue: unreadable job removed');
      void this.cmd.lrem(this.processing, 1, raw);
      return;
    }
    this.inflight++;
    void this.deliverer.run(job).then((done) => {
      // stopped while waiting to retry: keep it for the next start
      if (done || !this.stopping) return this.cmd.lrem(this.processing, 1, raw);
      return 0;
    }).catch((err: Error) => this.log.warn({ err: err.message }, 'webhook queue: could not remove a finished job'))
      .finally(() => {
        this.inflight--;
        const s = this.slot;
        this.slot = null;
        s?.();
      });
  }

  private wait(set: (r: () => void) => void, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      t.unref();
      set(() => { clearTimeout(t); resolve(); });
    });
  }
}
