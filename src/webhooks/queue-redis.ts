// The `redis` queue driver: at-least-once delivery across restarts and across nodes. A job
// is accepted when RPUSH to `<key_prefix>webhooks:pending` returns; a consumer moves it
// atomically to its own `<key_prefix>webhooks:processing:<consumer>` list (BLMOVE) before
// sending and removes it (LREM) only once it is delivered or given up.
//
// Each consumer (one per process start) holds a lease, `<key_prefix>webhooks:lease:<consumer>`,
// a key with a LEASE_MS expiry that it renews every RENEW_MS, and is listed in the set
// `<key_prefix>webhooks:consumers` (reclaim reads that set; it never scans the keyspace).
// Every consumer, at start and every RENEW_MS, looks for processing lists whose lease is
// gone (a process killed with kill -9, or cut off from Redis for longer than the lease) and
// moves their jobs back to the head of `pending`, oldest first, in one script per list (so
// two consumers never both take a list). A clean stop puts its own unfinished jobs back at once and drops its lease. So
// several nodes on one Redis share the queue without one re-sending what another is sending
// (only a consumer whose lease lapsed while it was still sending can cause a second request),
// and a job Redis has accepted is never lost: a receiver may see a request twice (the spec:
// "receivers should be idempotent"), never zero times.
//
// The single `<key_prefix>webhooks:processing` list of earlier versions has no lease: it is
// taken back like a dead consumer's.
//
// Connection: database.redis (host/port or Sentinel), as the redis rate limiter. Two
// clients: one for commands, one blocked in BLMOVE.

import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { RedisConfig } from '../config/types';
import { redisClient, redisFailure } from '../redis/client';
import type { MetricsSink } from '../metrics/types';
import type { Deliverer } from './deliver';
import type { WebhookQueue } from './queue';
import type { Job } from './send';

/** Seconds a BLMOVE blocks before the loop looks at `stopping` again. */
const BLOCK_SECONDS = 1;
/** A consumer's lease: how long after its last renewal its jobs count as abandoned. */
export const LEASE_MS = 6000;
/** How often a consumer renews its lease and looks for abandoned processing lists. */
export const RENEW_MS = 2000;
/** At stop, how long unfinished sends may take before their jobs go back to `pending`. */
const STOP_SETTLE_MS = 2000;

/**
 * Moves a processing list (KEYS[1]) back to the head of pending (KEYS[3]), oldest job first,
 * unless its lease (KEYS[2]) is alive, and drops its consumer (ARGV[1]) from the set of
 * consumers (KEYS[4]). Returns the number of jobs moved, -1 if leased.
 */
const RECLAIM = `
if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
local n = 0
while redis.call('LMOVE', KEYS[1], KEYS[3], 'RIGHT', 'LEFT') do n = n + 1 end
redis.call('SREM', KEYS[4], ARGV[1])
return n`;


interface Reclaimer {
  ringcastReclaim(list: string, lease: string, pending: string, consumers: string, consumer: string): Promise<number>;
}

export class RedisQueue implements WebhookQueue {
  readonly driver = 'redis';
  private readonly cmd: Redis;
  private readonly block: Redis;
  private readonly prefix: string;
  private readonly pending: string;
  /** This consumer's id, its processing list and its lease key. */
  readonly consumer = randomBytes(8).toString('hex');
  private readonly processing: string;
  private readonly lease: string;
  /** The set of consumer ids that have a processing list (where reclaim looks). */
  private readonly consumers: string;
  private renewal: NodeJS.Timeout | null = null;
  private inflight = 0;
  private pushes = 0;
  private stopping = false;
  private loop: Promise<void> | null = null;
  private slot: (() => void) | null = null;
  private drained: (() => void) | null = null;
  private settled: (() => void) | null = null;

  constructor(
    cfg: RedisConfig,
    private readonly deliverer: Deliverer,
    private readonly concurrency: number,
    /** RPUSHes waiting for Redis (e.g. while it is down) past which new jobs are dropped. */
    private readonly maxPending: number,
    private readonly metrics: MetricsSink,
    private readonly log: Logger,
  ) {
    this.cmd = redisClient(cfg, { name: 'webhooks', queue: true, lazy: true, commandTimeoutMs: null });
    this.block = redisClient(cfg, { name: 'webhooks-consumer', queue: true, lazy: true, commandTimeoutMs: null });
    for (const c of [this.cmd, this.block]) c.on('error', (err: Error) => log.warn({ err: err.message }, 'webhook queue: redis error'));
    this.prefix = cfg.key_prefix;
    this.pending = `${cfg.key_prefix}webhooks:pending`;
    this.processing = `${cfg.key_prefix}webhooks:processing:${this.consumer}`;
    this.lease = `${cfg.key_prefix}webhooks:lease:${this.consumer}`;
    this.consumers = `${cfg.key_prefix}webhooks:consumers`;
    this.cmd.defineCommand('ringcastReclaim', { numberOfKeys: 4, lua: RECLAIM });
  }

  get size(): number {
    return this.inflight + this.pushes;
  }

  /** Why the queue's clients are not connected (the credentials refused, …), or null. */
  failure(): string | null {
    return redisFailure(this.cmd) ?? redisFailure(this.block);
  }

  async start(): Promise<void> {
    await Promise.all([this.cmd.connect(), this.block.connect()]);
    await this.renew();
    await this.reclaim();
    this.renewal = setInterval(() => {
      this.renew().then(() => this.reclaim()).catch((err: Error) => this.log.warn({ err: err.message }, 'webhook queue: could not renew the lease or look for abandoned jobs; retrying'));
    }, RENEW_MS);
    this.renewal.unref();
    this.loop = this.consume();
  }

  /** The lease, and the listing (again: another consumer drops it when it takes back a lapsed lease's jobs). */
  private async renew(): Promise<void> {
    await this.cmd.set(this.lease, '1', 'PX', LEASE_MS);
    await this.cmd.sadd(this.consumers, this.consumer);
  }

  /** Jobs of consumers whose lease is gone (killed, or earlier versions'): back to the head of pending. */
  async reclaim(): Promise<number> {
    const base = `${this.prefix}webhooks:processing`;
    // the single list of earlier versions has no lease: a key that never exists stands for it
    const lists: [list: string, lease: string, consumer: string][] = [[base, `${this.prefix}webhooks:lease`, '']];
    for (const id of await this.cmd.smembers(this.consumers)) {
      if (id !== this.consumer) lists.push([`${base}:${id}`, `${this.prefix}webhooks:lease:${id}`, id]);
    }
    let requeued = 0;
    for (const [list, lease, id] of lists) {
      const n = await (this.cmd as unknown as Reclaimer).ringcastReclaim(list, lease, this.pending, this.consumers, id);
      if (n > 0) {
        requeued += n;
        this.log.warn({ requeued: n, consumer: id || '(earlier version)' }, 'webhook queue: re-sending jobs a consumer that is gone had not finished');
        this.metrics.inc('webhooks_requeued_total', {}, n);
      }
    }
    return requeued;
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
    if (this.renewal) clearInterval(this.renewal);
    this.slot?.();
    this.block.disconnect(); // ends a BLMOVE in progress
    await this.loop?.catch(() => undefined);
    this.deliverer.stop(); // jobs waiting for a retry end now, left in our processing list
    if (this.inflight > 0) await this.wait((r) => (this.settled = r), STOP_SETTLE_MS);
    // what we did not finish goes back for the other nodes (or the next start) at once;
    // if Redis does not answer, the lease lapses and another consumer takes it back
    await this.handBack().catch((err: Error) => this.log.warn({ err: err.message }, `webhook queue: unfinished jobs stay in ${this.processing} until its lease lapses`));
    this.cmd.disconnect();
  }

  private async handBack(): Promise<void> {
    if (this.cmd.status !== 'ready') throw new Error(`redis connection ${this.cmd.status}`);
    let moved = 0;
    const done = (async () => {
      while (await this.cmd.lmove(this.processing, this.pending, 'RIGHT', 'LEFT')) moved++;
      await this.cmd.del(this.lease);
      await this.cmd.srem(this.consumers, this.consumer);
    })();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([done, new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error('redis did not answer within 1 s')), 1000);
    })]).finally(() => clearTimeout(timer));
    if (moved > 0) this.log.info({ requeued: moved }, 'webhook queue: unfinished jobs handed back to pending');
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
        if (this.inflight === 0) this.settled?.();
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
