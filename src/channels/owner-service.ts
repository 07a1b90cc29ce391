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
import type { SharedCache } from './shared-cache';
import { OwnerStore, userKey, type OwnerEvents } from './owner';
import { RemoteCounts, RemotePresence } from './remote-presence';
import type { MemberMsg, Outgoing, Publisher } from './publisher';
import type { MemberTally } from './reconcile';
import { currentMembers, missedMemberEvents } from './rebuild';
import { topicOf } from './topic';
import { logLimited } from '../log';

/** Owner messages this service answers (the rest of ControlMsg is the shard's business). */
export type OwnerMsg = Extract<ControlMsg, { type: 'sub' | 'presence_join' | 'presence_leave' | 'channel_info' | 'channels_list' | 'members' | 'cache_set' | 'cache_get' | 'remote_member' | 'remote_count' | 'remote_node_gone' | 'local_presence' | 'reconcile' }>;

const OWNER_TYPES: ReadonlySet<string> = new Set<OwnerMsg['type']>([
  'sub', 'presence_join', 'presence_leave', 'channel_info', 'channels_list', 'members', 'cache_set', 'cache_get',
  'remote_member', 'remote_count', 'remote_node_gone', 'local_presence', 'reconcile',
]);

/** Node-local presence transitions, told to the other nodes (in a cluster; through the primary). */
export interface ClusterPresencePort {
  memberChanged(m: { op: 'added' | 'removed'; app: string; channel: string; userId: unknown; userInfo: unknown }): void;
  /** This node's subscription count of a channel changed (the primary coalesces them). */
  countChanged(c: { app: string; channel: string; total: number }): void;
}

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
  /** cache.driver redis / redis-cluster: the store written through to Redis (shared-cache.ts); else null. */
  sharedCache?: SharedCache | null;
  log: Logger;
  metrics?: MetricsSink;
  out(canonical: string): string;
  hooks?: OwnerHooks;
  /** subscription_count coalescing window (ms). */
  countDelayMs?: number;
  /** In a cluster: where node-local presence transitions go (null or absent: a single node). */
  cluster?: ClusterPresencePort | null;
  /** Member events per pair of shards (channels/reconcile.ts); absent: reports' shadows are not compared. */
  tally?: MemberTally;
  /** A member event to one shard (bus.control, counted in `tally`); throws BusFullError. */
  sendMember?(shard: number, msg: MemberMsg): void;
}

export interface OwnerService {
  readonly store: OwnerStore;
  /** Other nodes' members of the channels this shard owns (empty on a single node). */
  readonly remote: RemotePresence;
  handle(msg: OwnerMsg, from: number): void;
  /** The reconciliation timer (channels/reconcile.ts): subscription_count events a full queue refused are sent again. */
  tick(): void;
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
  /** subscription_count events a full queue refused: sent again at the next tick(). */
  const countRetry = new Map<string, [string, string]>();
  const corrected = (kind: string, n: number) => {
    if (n > 0) metrics.inc('owner_reconcile_corrections_total', { kind }, n);
  };
  const cluster = deps.cluster ?? null;
  const shared = deps.sharedCache ?? null;
  const remote = new RemotePresence();
  const remoteCounts = new RemoteCounts();
  const member = (op: 'added' | 'removed', app: string, channel: string, userId: unknown, userInfo: unknown, except = '') =>
    publisher.member({ type: 'member', op, app, channel, userId, userInfo, except });

  function presenceMembers(app: string, channel: string): void {
    if (meters.enabled) metrics.set('presence_members', { app_id: app, channel }, store.info(app, channel).user_count ?? 0);
  }

  function countChanged(app: string, channel: string): void {
    if (!apps.byId(app)?.subscription_count_events || isPresence(channel)) return;
    const key = topicOf(app, channel);
    if (countTimers.has(key)) return;
    const timer = setTimeout(() => {
      countTimers.delete(key);
      // in a cluster: this node's subscriptions and the other nodes' last reports
      const n = store.info(app, channel).subscription_count + remoteCounts.sum(app, channel);
      if (n === 0) return;
      const msg: Outgoing = {
        kind: 'count', app, channel, except: '',
        message: frame(deps.out(Ev.SubscriptionCount), JSON.stringify({ subscription_count: n }), channel),
      };
      try {
        publisher.publishOne(msg);
      } catch (err) {
        meters.busFullAt('member_event');
        countRetry.set(key, [app, channel]);
        logLimited(log, 'error', { err, channel }, 'subscription_count not delivered: internal queue full (sent again by the reconciliation)');
      }
    }, countDelay);
    timer.unref();
    countTimers.set(key, timer);
  }

  const store = new OwnerStore(deps.shards, {
    countChanged: (app, channel, total) => {
      cluster?.countChanged({ app, channel, total });
      countChanged(app, channel);
      hooks.countChanged?.(app, channel, total + remoteCounts.sum(app, channel));
    },
    // In a cluster the occupancy and member hooks are the primary's: it decides them for
    // the whole cluster in the backend's order (adapter/transitions.ts).
    occupied: (app, channel) => {
      meters.app(app).channelsActive.inc();
      log.debug({ app, channel }, 'channel occupied');
      if (!cluster) hooks.occupied?.(app, channel);
    },
    vacated: (app, channel) => {
      meters.app(app).channelsActive.dec();
      if (meters.enabled && isPresence(channel)) metrics.remove('presence_members', { app_id: app, channel });
      log.debug({ app, channel }, 'channel vacated');
      if (!cluster) hooks.vacated?.(app, channel);
    },
    // In a cluster these are node-local transitions: the other nodes are told, and the
    // clients only hear of a user no other node has (adapter/presence.ts).
    memberAdded: (app, channel, userId, userInfo, except) => {
      presenceMembers(app, channel);
      cluster?.memberChanged({ op: 'added', app, channel, userId, userInfo });
      if (remote.has(app, channel, userKey(userId))) return;
      member('added', app, channel, userId, userInfo, except);
      if (!cluster) hooks.memberAdded?.(app, channel, userId, userInfo, except);
    },
    memberRemoved: (app, channel, userId) => {
      presenceMembers(app, channel);
      cluster?.memberChanged({ op: 'removed', app, channel, userId, userInfo: null });
      if (remote.has(app, channel, userKey(userId))) return;
      member('removed', app, channel, userId, null);
      if (!cluster) hooks.memberRemoved?.(app, channel, userId);
    },
    restored: (app, channel) => {
      meters.app(app).channelsActive.inc();
      hooks.restored?.(app, channel);
    },
  });

  const localHas = (app: string, channel: string, id: unknown) => store.memberMap(app, channel).has(userKey(id));

  /** A shard's `reconcile` report (channels/reconcile.ts). */
  function reconcile(msg: Extract<OwnerMsg, { type: 'reconcile' }>, from: number): void {
    // First the member events its clients missed, against the records the report saw
    // (the corrections below then reach that shard as ordinary member events).
    let resent = 0;
    if (deps.tally && deps.sendMember && deps.tally.sent[from] === msg.members) {
      for (const c of msg.channels) {
        if (!c.shadow || (c.pending?.length ?? 0) > 0) continue; // an answered join's snapshot is on its way
        const known = new Map<string, unknown>();
        for (const id of c.shadow) known.set(userKey(id), id);
        for (const m of missedMemberEvents(c.app, c.channel, known, currentMembers(store, remote, c.app, c.channel))) {
          try {
            deps.sendMember(from, m);
            resent++;
          } catch (err) {
            logLimited(log, 'error', { err, channel: c.channel, shard: from }, 'reconciliation: member event not delivered (internal queue full)');
          }
        }
      }
    }
    const c = store.reconcile(from, msg.channels);
    corrected('member_event', resent);
    corrected('subscription', c.subscriptions);
    corrected('join', c.joins);
    corrected('leave', c.leaves);
    if (resent + c.subscriptions + c.joins + c.leaves > 0) {
      logLimited(log, 'warn', { shard: from, ...c, memberEvents: resent }, 'reconciliation: owner records corrected to the shard\'s subscriptions (notices were lost)');
    }
  }

  return {
    store,
    remote,
    handle(msg, from) {
      switch (msg.type) {
        case 'sub':
          return store.sub(msg.app, msg.channel, msg.shard, msg.delta);
        case 'presence_join': {
          const { app, channel } = msg;
          const local = store.memberMap(app, channel);
          // the limit counts the users of the whole cluster (remote ones not also here)
          const max = (apps.byId(app)?.max_presence_members_per_channel ?? deps.defaultMaxMembers) - remote.othersThan(app, channel, local);
          const reply = store.join(app, channel, from, msg.socketId, msg.userId, msg.userInfo, max);
          if (reply.ok) {
            for (const m of remote.members(app, channel)) if (!local.has(userKey(m[0]))) reply.members.push(m);
          }
          return deps.reply(from, msg.req, reply);
        }
        case 'remote_member': {
          const { app, channel, node, userId } = msg;
          if (msg.op === 'added') {
            const present = localHas(app, channel, userId) || remote.has(app, channel, userKey(userId));
            remote.add(app, channel, node, userId, msg.userInfo);
            if (!present) member('added', app, channel, userId, msg.userInfo);
          } else if (remote.remove(app, channel, node, userKey(userId)) && !localHas(app, channel, userId)) {
            member('removed', app, channel, userId, null);
          }
          return;
        }
        case 'remote_count': {
          const { app, channel } = msg;
          const { before, after } = remoteCounts.set(app, channel, msg.node, msg.total);
          if (before !== after) countChanged(app, channel);
          return;
        }
        case 'remote_node_gone': {
          for (const [app, channel, userId] of remote.dropNode(msg.node)) {
            if (!localHas(app, channel, userId)) member('removed', app, channel, userId, null);
          }
          for (const [app, channel] of remoteCounts.dropNode(msg.node)) countChanged(app, channel);
          return;
        }
        case 'local_presence':
          return deps.reply(from, msg.req, { members: store.presenceEntries(), counts: store.countEntries() });
        case 'presence_leave':
          store.leave(msg.app, msg.channel, msg.socketId);
          return;
        case 'reconcile':
          return reconcile(msg, from);
        case 'channel_info':
          return deps.reply(from, msg.req, store.info(msg.app, msg.channel));
        case 'channels_list':
          return deps.reply(from, msg.req, store.list(msg.app, msg.prefix));
        case 'members':
          return deps.reply(from, msg.req, store.members(msg.app, msg.channel));
        case 'cache_set':
          // shared: written to Redis only when made on this node; the primary (thread
          // `shards`) sends the publishes it bridged from the other nodes, written by theirs
          if (shared) return shared.set(msg.app, msg.channel, msg.message, msg.ttl, msg.tags, from !== deps.shards);
          return deps.cacheStore?.set(msg.app, msg.channel, msg.message, msg.ttl, msg.tags);
        case 'cache_get': {
          if (!shared) return deps.reply(from, msg.req, deps.cacheStore?.get(msg.app, msg.channel) ?? null);
          const got = shared.get(msg.app, msg.channel);
          if (!(got instanceof Promise)) return deps.reply(from, msg.req, got);
          // a local miss asks Redis; the owner goes on meanwhile (shared-cache.ts: the order)
          void got.then((r) => {
            try {
              deps.reply(from, msg.req, r);
            } catch (err) {
              log.warn({ err, channel: msg.channel }, 'cache channel: the answer from Redis could not be sent back');
            }
          });
          return;
        }
      }
    },
    tick() {
      corrected('count_event', countRetry.size);
      const retry = [...countRetry.values()];
      countRetry.clear();
      for (const [app, channel] of retry) countChanged(app, channel);
    },
    stop() {
      for (const t of countTimers.values()) clearTimeout(t);
      countTimers.clear();
      countRetry.clear();
    },
  };
}
