// Shard wiring of history channels and idempotent publish (src/history/): the shard side
// (pipeline stage, serial topics, rewind and recovery of its subscriptions), the owner side
// of the channels and idempotency keys hashed to this shard, and what the HTTP API asks.

import type { Bus } from '../bus/bus';
import type { ControlMsg, HistSubReply } from '../bus/messages';
import type { Interest } from '../channels/interest';
import { ownerOf } from '../channels/owner';
import type { OwnerService } from '../channels/owner-service';
import type { OutboundStage, Publisher, StageWrites } from '../channels/publisher';
import type { Config } from '../config/types';
import { createHistoryStore } from '../history';
import { createIdempotencyOwner, isIdemMsg, keyOwner } from '../history/idempotency';
import { createRedisIdempotency } from '../history/idempotency-redis';
import { createHistoryOwner, isHistoryOwnerMsg } from '../history/owner';
import { RedisHistory } from '../history/redis';
import { HistorySettings } from '../history/settings';
import { createHistoryShard, type HistoryShard, type HistPub } from '../history/shard';
import type { ApiDeps } from '../http/deps';
import type { MetricsSink } from '../metrics/types';
import type { Logger } from 'pino';
import type { TemplatedApp } from 'uWebSockets.js';
import type { AppConfig } from '../config/types';
import type { Socket } from '../ws/types';

type HistorySettingsApps = { byId(id: string): AppConfig | undefined };

/** Expired history messages and idempotency keys go at this pace (reads drop them lazily meanwhile). */
const SWEEP_MS = 5000;

/** The shard side, and with history.driver redis / redis-cluster its Redis (null: memory). */
export interface ShardHistorySide {
  side: HistoryShard;
  redis: RedisHistory | null;
}

/**
 * Built before the publisher (its stage is one of the publisher's). With the memory driver
 * the stage's hist_pub to the owner is written in the publish's batch (channels/publisher.ts
 * StageWrites), so a publish refused with 503 is not numbered and sent by the owner either.
 */
export function createShardHistorySide(d: {
  config: Config; apps: HistorySettingsApps; shards: number; uws: TemplatedApp; sockets: ReadonlyMap<string, Socket>; bus: Bus; interest: Interest;
  out(canonical: string): string; log: Logger; metrics: MetricsSink; publisher: () => Publisher;
}): ShardHistorySide {
  const settings = new HistorySettings({ byId: (id) => d.apps.byId(id) });
  const driver = d.config.history.driver;
  let side: HistoryShard | null = null;
  /** The publish's batch while the stage runs. */
  let writes: StageWrites | null = null;
  // redis / redis-cluster: numbered in Redis, delivered from its stream (history/redis.ts)
  const redis = driver === 'memory' ? null : new RedisHistory({
    config: d.config, driver, log: d.log, metrics: d.metrics,
    setting: (app, channel) => settings.of(app, channel),
    wanted: (app, channel) => d.interest.targets(app, channel, []).includes(d.bus.self),
    deliver: (h) => side!.deliver(h),
  });
  const toOwner = (m: HistPub) => {
    const to = ownerOf(m.app, m.channel, d.shards);
    if (writes !== null) writes.control(to, m);
    else d.bus.control(to, m);
  };
  side = createHistoryShard({
    settings, uws: d.uws, sockets: d.sockets, out: (c) => d.out(c), log: d.log, metrics: d.metrics,
    number: redis ? (m) => redis.publish(m) : toOwner,
    ask: redis ? (q, answer, failed) => redis.ask(q, answer, failed)
      : (q, answer, failed) => d.bus.request<HistSubReply>(ownerOf(q.app, q.channel, d.shards), { type: 'hist_sub', ...q }).then(answer, failed),
    publisher: d.publisher,
  });
  const inner = side.stage;
  const stage: OutboundStage = {
    out(m, w) {
      const outer = writes;
      writes = w;
      try {
        return inner.out(m, w);
      } finally {
        writes = outer;
      }
    },
  };
  return { side: { ...side, stage }, redis };
}

export interface ShardHistory {
  /** True when it handled the message (owner side of history channels and idempotency keys). */
  handle(msg: ControlMsg, from: number): boolean;
  /** The HTTP API's part (ApiDeps.history, ApiDeps.idempotency). */
  api: Pick<ApiDeps, 'history' | 'idempotency'>;
  sweep(now: number): void;
  /** Closes the Redis clients (history driver, cluster-wide idempotency window): an open socket keeps the thread alive. */
  close(): Promise<void>;
}

/**
 * With adapter.driver nats the window cannot be cluster-wide (NATS has no shared store
 * here): publishes with an idempotency_key are refused rather than deduplicated per node.
 */
export const NATS_REFUSAL = 'idempotency_key is not supported with adapter.driver nats: its window must be cluster-wide and NATS ' +
  'has no shared store in ringcast (use adapter.driver redis or redis-cluster, or publish without idempotency_key)';

export function createShardHistory(d: {
  config: Config; shards: number; bus: Bus; interest: Interest; side: HistoryShard; redis: RedisHistory | null; publisher: Publisher; owner: OwnerService;
  log: Logger; metrics: MetricsSink;
}): ShardHistory {
  const { config, shards, bus, log } = d;
  // the memory driver's owner side; redis numbers in Redis (history/redis.ts)
  const owner = d.redis ? null : createHistoryOwner({
    store: createHistoryStore(config, shards, d.metrics),
    settings: d.side.settings,
    maxRecover: config.history.max_recover,
    targets: (app, channel) => d.interest.targets(app, channel, []),
    send: (targets, msg) => {
      const batch = bus.batch();
      for (const to of targets) batch.control(to, msg);
      batch.commit();
    },
    plain: (m) => d.publisher.publishOne({ kind: 'api', app: m.app, channel: m.channel, except: m.except, message: m.message, tags: m.tags }),
    reply: (to, req, body) => bus.reply(to, req, body),
    subscribed: (app, channel) => d.owner.store.info(app, channel).subscription_count > 0,
    log,
    metrics: d.metrics,
  });
  const idempotency = createIdempotencyOwner({
    windowMs: config.idempotency.window_seconds * 1000,
    maxKeys: Math.max(1, Math.floor(config.idempotency.max_keys / shards)),
    reply: (to, req, body) => bus.reply(to, req, body),
  });
  const tellKeyOwner = (msg: Extract<ControlMsg, { type: 'idem_done' | 'idem_release' }>): void => {
    try {
      bus.control(keyOwner(msg.app, msg.key, shards), msg);
    } catch (err) {
      // done lost: a retry publishes again; release lost: the claim lapses (PENDING_MS)
      log.error({ err }, 'could not tell an idempotency key\'s owner how its publish ended');
    }
  };
  // With a cluster adapter the window is cluster-wide: Redis (history/idempotency-redis.ts), or refused (nats).
  const driver = config.adapter.driver;
  const clusterWide = driver === 'redis' || driver === 'redis-cluster'
    ? createRedisIdempotency({ config, log, metrics: d.metrics })
    : null;
  const processWide: NonNullable<ApiDeps['idempotency']> = {
    claim: (app, key) => bus.request(keyOwner(app, key, shards), { type: 'idem_claim', app, key }),
    done: (app, key, status, body) => tellKeyOwner({ type: 'idem_done', app, key, status, body }),
    release: (app, key) => tellKeyOwner({ type: 'idem_release', app, key }),
  };
  let sweptAt = Date.now();
  return {
    handle(msg, from) {
      if (isHistoryOwnerMsg(msg)) owner?.handle(msg, from);
      else if (isIdemMsg(msg)) idempotency.handle(msg, from);
      else if (msg.type === 'hist') d.side.deliver(msg);
      else return false;
      return true;
    },
    api: {
      history: {
        settings: d.side.settings,
        page: d.redis ? (app, channel, q) => d.redis!.page(app, channel, q)
          : (app, channel, q) => bus.request(ownerOf(app, channel, shards), { type: 'hist_page', app, channel, ...q }),
        ...(d.redis ? { numbered: (publish: () => void) => d.redis!.numbered(publish) } : {}),
      },
      idempotency: driver === 'nats' ? { ...processWide, refused: NATS_REFUSAL } : clusterWide ?? processWide,
    },
    sweep(now) {
      if (now - sweptAt < SWEEP_MS) return;
      sweptAt = now;
      owner?.sweep();
      d.side.sweep();
      idempotency.sweep();
    },
    close: () => Promise.all([clusterWide?.close(), d.redis?.close()]).then(() => undefined),
  };
}
