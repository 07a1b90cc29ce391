// Shard wiring of history channels and idempotent publish (src/history/): the shard side
// (pipeline stage, serial topics, rewind and recovery of its subscriptions), the owner side
// of the channels and idempotency keys hashed to this shard, and what the HTTP API asks.

import type { Bus } from '../bus/bus';
import type { ControlMsg, HistSubReply } from '../bus/messages';
import type { Interest } from '../channels/interest';
import type { Fanout } from '../channels/fanout';
import { ownerOf } from '../channels/owner';
import type { OwnerService } from '../channels/owner-service';
import type { OutboundStage, Publisher, StageWrites } from '../channels/publisher';
import type { Config } from '../config/types';
import { createHistoryStore } from '../history';
import { createIdempotencyOwner, isIdemMsg, keyOwner } from '../history/idempotency';
import { createNatsIdempotency } from '../history/idempotency-nats';
import { createRedisIdempotency } from '../history/idempotency-redis';
import { createHistoryOwner, isHistoryOwnerMsg } from '../history/owner';
import { RedisHistory } from '../history/redis';
import { HistorySettings } from '../history/settings';
import { createHistoryShard, type HistoryFilters, type HistoryShard, type HistPub } from '../history/shard';
import type { ApiDeps } from '../http/deps';
import type { MetricsSink } from '../metrics/types';
import type { Logger } from 'pino';
import type { AppConfig } from '../config/types';
import type { Socket } from '../ws/types';
import type { Algo } from '../delta/settings';
import { forceOf, serialInput } from '../delta/wire';
import { logLimited } from '../log';

/** The delta sequencer's thread and its interest tables, when delta compression is on (delta/). */
export interface HistoryDelta {
  sequencer: number;
  interest: Record<Algo, Interest>;
}

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
  config: Config; apps: HistorySettingsApps; shards: number; fanout: Fanout; sockets: ReadonlyMap<string, Socket>; bus: Bus; interest: Interest;
  out(canonical: string): string; log: Logger; metrics: MetricsSink; publisher: () => Publisher;
  /** Delta compression on history channels: the memory driver only (docs/history.md, "With delta compression"). */
  delta: HistoryDelta | null;
  /** The filter stage (tag_filtering.enabled), for tag-filtered history subscriptions (every driver keeps the tags). */
  filters: HistoryFilters | null;
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
    missed: () => side!.catchUp(),
  });
  const toOwner = (m: HistPub) => {
    const to = ownerOf(m.app, m.channel, d.shards);
    if (writes !== null) writes.control(to, m);
    else d.bus.control(to, m);
  };
  side = createHistoryShard({
    settings, fanout: d.fanout, sockets: d.sockets, out: (c) => d.out(c), log: d.log, metrics: d.metrics,
    number: redis ? (m) => redis.publish(m) : toOwner,
    ask: redis ? (q, answer, failed) => redis.ask(q, answer, failed)
      : ({ delta, ...q }, answer, failed) => d.bus.request<HistSubReply>(ownerOf(q.app, q.channel, d.shards),
        // a delta subscription's answer comes through the sequencer (delta/sequencer.ts rule 6)
        { type: 'hist_sub', ...q, ...(delta && d.delta ? { relay: d.delta.sequencer } : {}) }).then(answer, failed)
        // never an unhandled rejection (it would end the shard)
        .catch((err: Error) => logLimited(d.log, 'error', { err: err.message, channel: q.channel }, 'history: acting on an answer failed')),
    deltas: redis === null && d.delta !== null,
    maxQuestionsPerConnection: d.config.history.max_questions_per_connection,
    replayBytesPerSecond: d.config.history.replay_bytes_per_second,
    filters: d.filters,
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
  api: Pick<ApiDeps, 'history' | 'idempotency' | 'historyUp'>;
  sweep(now: number): void;
  /** Closes the Redis and NATS clients (history driver, cluster-wide idempotency window): an open socket keeps the thread alive. */
  close(): Promise<void>;
}

export function createShardHistory(d: {
  config: Config; shards: number; bus: Bus; interest: Interest; side: HistoryShard; redis: RedisHistory | null; publisher: Publisher; owner: OwnerService;
  log: Logger; metrics: MetricsSink; delta: HistoryDelta | null;
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
    delta: d.delta ? historyDelta(bus, d.delta, log) : undefined,
    subscribed: (app, channel) => d.owner.store.info(app, channel).subscription_count > 0,
    log,
    metrics: d.metrics,
  });
  const idempotency = createIdempotencyOwner({
    windowMs: config.idempotency.window_seconds * 1000,
    maxKeys: Math.max(1, Math.floor(config.idempotency.max_keys / shards)),
    reply: (to, req, body) => bus.reply(to, req, body),
    evicted: (app) => d.metrics.inc('idempotency_evictions_total', { app_id: app }),
  });
  const tellKeyOwner = (msg: Extract<ControlMsg, { type: 'idem_done' | 'idem_release' }>): void => {
    try {
      bus.control(keyOwner(msg.app, msg.key, shards), msg);
    } catch (err) {
      // done lost: a retry publishes again; release lost: the claim lapses (PENDING_MS)
      log.error({ err }, 'could not tell an idempotency key\'s owner how its publish ended');
    }
  };
  // With a cluster adapter the window is cluster-wide: Redis (history/idempotency-redis.ts)
  // or a NATS JetStream key-value bucket (history/idempotency-nats.ts).
  const driver = config.adapter.driver;
  const clusterWide = driver === 'redis' || driver === 'redis-cluster' ? createRedisIdempotency({ config, log, metrics: d.metrics })
    : driver === 'nats' ? createNatsIdempotency({ config, log, metrics: d.metrics })
      : null;
  const processWide: NonNullable<ApiDeps['idempotency']> = {
    claim: (app, key, route) => bus.request(keyOwner(app, key, shards), { type: 'idem_claim', app, key, route }),
    done: (app, key, status, body, route) => tellKeyOwner({ type: 'idem_done', app, key, status, body, route }),
    release: (app, key) => tellKeyOwner({ type: 'idem_release', app, key }),
  };
  let sweptAt = Date.now();
  // The redis drivers keep a channel's numbering (its meta key) while it has subscribers
  // (docs/protocol.md), stock ones too: each shard touches the history channels it owns that
  // have subscriptions, every quarter of meta_ttl (at least every second), so the meta is
  // touched several times before it could lapse. (The memory driver's owner keeps its own.)
  const touchEveryMs = Math.max(1000, config.history.meta_ttl * 250);
  let touchedAt = 0;
  const keepAlive = (now: number): void => {
    // (half a sweep of slack: a 1 s sweep that fires at 999 ms must not wait for the next one, 2 s later)
    if (d.redis === null || now - touchedAt < touchEveryMs - 500) return;
    touchedAt = now;
    for (const [app, channel] of d.owner.store.countEntries()) {
      if (d.side.settings.of(app, channel) !== null) d.redis.touch(app, channel);
    }
  };
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
      idempotency: clusterWide ?? processWide,
      ...(d.redis ? { historyUp: () => d.redis!.isUp() } : {}),
    },
    sweep(now) {
      keepAlive(now);
      if (now - sweptAt < SWEEP_MS) return;
      sweptAt = now;
      owner?.sweep();
      d.side.sweep();
      idempotency.sweep();
    },
    close: () => Promise.all([clusterWide?.close(), d.redis?.close()]).then(() => undefined),
  };
}

/** The owner's side of delta compression on its history channels (history/owner.ts HistoryOwnerDeps.delta). */
function historyDelta(bus: Bus, delta: HistoryDelta, log: Logger): NonNullable<Parameters<typeof createHistoryOwner>[0]['delta']> {
  const to = [delta.sequencer];
  const scratch: number[] = [];
  const tables = [delta.interest.fossil, delta.interest.xdelta3];
  return {
    publish(m, serial, epoch) {
      if (!tables.some((t) => t.targets(m.app, m.channel, scratch).length > 0)) return;
      try {
        bus.publishTo(to, m.app, m.channel, m.except, serialInput(forceOf(m.delta), serial, epoch, m.message), m.tags ?? null);
      } catch (err) {
        // delta/sequencer.ts rule 3: its delta subscribers resynchronise on the next message
        logLimited(log, 'error', { err, channel: m.channel }, 'history channel message not sent to the delta sequencer: internal queue full');
      }
    },
    relay(via, replyTo, req, body) {
      try {
        bus.control(via, { type: 'hist_relay', to: replyTo, req, body });
      } catch (err) {
        // the subscription's request times out: it goes on live (history/shard.ts)
        logLimited(log, 'error', { err }, 'history answer not sent through the delta sequencer: internal queue full');
      }
    },
  };
}
