// The owner side of the channel directory, as a service built from its dependencies: it
// answers the owner messages of the channels hashed to this shard (channels/directory.ts
// sends them) from its OwnerStore and CacheStore, and turns the store's once-only
// transitions into broadcasts and metrics:
//
//   occupied / vacated            channels_active (and a log line)
//   member added / removed        a member event to every shard with subscribers (publisher)
//   count changed                 pusher_internal:subscription_count, coalesced per channel
//
// Webhooks and cluster presence hook into `events` (OwnerHooks), not into the wiring.
// No thread, bus or socket here: test/channels/owner-service.test.ts drives it directly.

import type { Logger } from 'pino';
import type { ControlMsg } from '../bus/messages';
import type { AppConfig } from '../config/types';
import { metersFor } from '../metrics/meters';
import { noMetrics, type MetricsSink } from '../metrics/types';
import { isPresence } from '../protocol/channels';
import { Ev } from '../protocol/events';
import { frame } from '../protocol/frames';
import type { CacheStore } from './cache';
import { OwnerStore, type OwnerEvents } from './owner';
import type { Outgoing, Publisher } from './publisher';
import { topicOf } from './topic';

/** Owner messages this service answers (the rest of ControlMsg is the shard's business). */
export type OwnerMsg = Extract<ControlMsg, { type: 'sub' | 'presence_join' | 'presence_leave' | 'channel_info' | 'channels_list' | 'members' | 'cache_set' | 'cache_get' }>;

const OWNER_TYPES: ReadonlySet<string> = new Set<OwnerMsg['type']>([
  'sub', 'presence_join', 'presence_leave', 'channel_info', 'channels_list', 'members', 'cache_set', 'cache_get',
]);

export function isOwnerMsg(msg: ControlMsg): msg is OwnerMsg {
  return OWNER_TYPES.has(msg.type);
}

/** Extra listeners of the owner's transitions (webhooks, cluster presence). */
export type OwnerHooks = Partial<OwnerEvents>;

export interface OwnerServiceDeps {
  shards: number;
  apps: { byId(id: string): AppConfig | undefined };
  /** Member limit for an app the registry does not know (presence.max_members_per_channel). */
  defaultMaxMembers: number;
  publisher: Pick<Publisher, 'publishOne' | 'member'>;
  /** Answers a request (bus.reply). */
  reply(to: number, req: number, body: unknown): void;
  /** null with cache.driver `none`. */
  cacheStore: CacheStore | null;
  log: Logger;
  metrics?: MetricsSink;
  out(canonical: string): string;
  hooks?: OwnerHooks;
  /** subscription_count coalescing window (ms). */
  countDelayMs?: number;
}

export interface OwnerService {
  readonly store: OwnerStore;
  handle(msg: OwnerMsg, from: number): void;
  /** Cancels pending subscription_count timers. */
  stop(): void;
}

/** pusher_internal:subscription_count: at most one per channel every 250 ms (coalesced). */
export const COUNT_DELAY_MS = 250;

export function createOwnerService(deps: OwnerServiceDeps): OwnerService {
  const { apps, publisher, log } = deps;
  const metrics = deps.metrics ?? noMetrics;
  const meters = metersFor(metrics);
  const hooks = deps.hooks ?? {};
  const countDelay = deps.countDelayMs ?? COUNT_DELAY_MS;
  const countTimers = new Map<string, NodeJS.Timeout>();

  function presenceMembers(app: string, channel: string): void {
    if (meters.enabled) metrics.set('presence_members', { app_id: app, channel }, store.info(app, channel).user_count ?? 0);
  }

  function countChanged(app: string, channel: string): void {
    if (!apps.byId(app)?.subscription_count_events || isPresence(channel)) return;
    const key = topicOf(app, channel);
    if (countTimers.has(key)) return;
    const timer = setTimeout(() => {
      countTimers.delete(key);
      const n = store.info(app, channel).subscription_count;
      if (n === 0) return;
      const msg: Outgoing = {
        kind: 'count', app, channel, except: '',
        message: frame(deps.out(Ev.SubscriptionCount), JSON.stringify({ subscription_count: n }), channel),
      };
      try {
        publisher.publishOne(msg);
      } catch (err) {
        meters.busFullAt('member_event');
        log.error({ err, channel }, 'subscription_count not delivered: internal queue full');
      }
    }, countDelay);
    timer.unref();
    countTimers.set(key, timer);
  }

  const store = new OwnerStore(deps.shards, {
    countChanged: (app, channel, total) => {
      countChanged(app, channel);
      hooks.countChanged?.(app, channel, total);
    },
    occupied: (app, channel) => {
      meters.app(app).channelsActive.inc();
      log.debug({ app, channel }, 'channel occupied');
      hooks.occupied?.(app, channel);
    },
    vacated: (app, channel) => {
      meters.app(app).channelsActive.dec();
      if (meters.enabled && isPresence(channel)) metrics.remove('presence_members', { app_id: app, channel });
      log.debug({ app, channel }, 'channel vacated');
      hooks.vacated?.(app, channel);
    },
    memberAdded: (app, channel, userId, userInfo, except) => {
      presenceMembers(app, channel);
      publisher.member({ type: 'member', op: 'added', app, channel, userId, userInfo, except });
      hooks.memberAdded?.(app, channel, userId, userInfo, except);
    },
    memberRemoved: (app, channel, userId) => {
      presenceMembers(app, channel);
      publisher.member({ type: 'member', op: 'removed', app, channel, userId, userInfo: null, except: '' });
      hooks.memberRemoved?.(app, channel, userId);
    },
    restored: (app, channel) => {
      meters.app(app).channelsActive.inc();
      hooks.restored?.(app, channel);
    },
  });

  return {
    store,
    handle(msg, from) {
      switch (msg.type) {
        case 'sub':
          return store.sub(msg.app, msg.channel, msg.shard, msg.delta);
        case 'presence_join': {
          const max = apps.byId(msg.app)?.max_presence_members_per_channel ?? deps.defaultMaxMembers;
          return deps.reply(from, msg.req, store.join(msg.app, msg.channel, from, msg.socketId, msg.userId, msg.userInfo, max));
        }
        case 'presence_leave':
          return store.leave(msg.app, msg.channel, msg.shard, msg.userKey);
        case 'channel_info':
          return deps.reply(from, msg.req, store.info(msg.app, msg.channel));
        case 'channels_list':
          return deps.reply(from, msg.req, store.list(msg.app, msg.prefix));
        case 'members':
          return deps.reply(from, msg.req, store.members(msg.app, msg.channel));
        case 'cache_set':
          return deps.cacheStore?.set(msg.app, msg.channel, msg.message, msg.ttl, msg.tags);
        case 'cache_get':
          return deps.reply(from, msg.req, deps.cacheStore?.get(msg.app, msg.channel) ?? null);
      }
    },
    stop() {
      for (const t of countTimers.values()) clearTimeout(t);
      countTimers.clear();
    },
  };
}
