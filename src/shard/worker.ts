// Shard wiring: one uWS App on the shared port (SO_REUSEPORT), the bus end of this
// thread, the owner records of the channels hashed to this shard, and the handlers
// built with their dependencies.

import { parentPort, workerData } from 'node:worker_threads';
import uWS, { type TemplatedApp, type us_listen_socket } from 'uWebSockets.js';
import { AppRegistry } from '../apps/registry';
import { Bus, BusFullError } from '../bus/bus';
import type { ChannelInfo, ControlMsg } from '../bus/messages';
import { CacheChannels, CacheStore } from '../channels/cache';
import { ConnectionCounters } from '../channels/counters';
import { OwnerStore, ownerOf } from '../channels/owner';
import type { AppConfig } from '../config/types';
import { registerRoutes } from '../http/router';
import { deepFreeze } from '../config';
import { createLogger } from '../log';
import { createRateLimiter, STARTUP_TIMEOUT_MS } from '../ratelimit';
import { metersFor } from '../metrics/meters';
import { PromMetrics } from '../metrics/registry';
import { noMetrics, type MetricsSink } from '../metrics/types';
import { Ev, outName } from '../protocol/events';
import { frame } from '../protocol/frames';
import { Backpressure } from '../ws/backpressure';
import { createWsBehavior } from '../ws/connection';
import { terminateUser } from '../ws/signin';
import type { Socket } from '../ws/types';
import { createFailover } from './failover';
import { createShutdown } from './shutdown';
import { Fanout, topicOf } from './fanout';
import { isPresence } from '../protocol/channels';
import { heapFigures, type PrimaryCommand, type ShardEvent, type ShardInit } from './init';

const init = workerData as ShardInit;
const { shardId, shards } = init;
// Frozen again: structured cloning to this thread drops the primary's freeze, and
// frozen arrays let protocol/origin.ts cache compiled origin matchers.
const config = deepFreeze(init.config);
const log = createLogger(config.log, { shard: shardId });
const apps = new AppRegistry(config.apps);
const prefix = config.protocol.event_prefix;
const out = (canonical: string) => outName(canonical, prefix);
const post = (e: ShardEvent) => parentPort!.postMessage(e);

const uws: TemplatedApp = config.ssl.enabled
  ? uWS.SSLApp({ cert_file_name: config.ssl.cert_path, key_file_name: config.ssl.key_path })
  : uWS.App();
const sockets = new Map<string, Socket>();
const bus = new Bus(shardId, init.topology);
const promMetrics = config.metrics.enabled ? new PromMetrics(config.metrics.prefix) : null;
const metrics: MetricsSink = promMetrics ?? noMetrics;
const meters = metersFor(metrics);
const backpressure = new Backpressure({
  maxBytes: config.websocket.max_bytes,
  maxMessages: config.websocket.max_messages,
  action: config.websocket.on_backpressure,
  metrics,
  sockets,
});
const fanout = new Fanout(bus, uws, sockets, metrics, backpressure);
const counters = new ConnectionCounters(init.counters);
/** memory driver: maps the primary's buffer, so its limits are per process (ratelimit/memory.ts). */
const limiter = createRateLimiter(config, { memory: init.ratelimit, log });
/** Cache channels (channels/cache.ts): the entries of the channels this shard owns; off with cache.driver `none`. */
const cacheStore = new CacheStore();
const cache = config.cache.driver === 'memory' ? new CacheChannels(bus, shards, config.channel_limits.cache_ttl) : null;
if (cache) cacheStore.startSweep(30_000);

function broadcastSafe(app: string, channel: string, except: string, message: string) {
  try {
    fanout.broadcast(app, channel, except, message);
  } catch (err) {
    if (err instanceof BusFullError) meters.busFullAt('member_event');
    log.error({ err, channel }, 'member event not delivered: internal queue full');
  }
}

/**
 * A presence member event decided by this owner: a `member` control to every shard (this
 * one included), which frames it for its local subscribers and updates its shadow member
 * set of the channel (channels/rebuild.ts: what a restarted owner's rebuild compares).
 */
function memberEvent(op: 'added' | 'removed', app: string, channel: string, userId: unknown, userInfo: unknown, except: string): void {
  const msg: ControlMsg = { type: 'member', op, app, channel, userId, userInfo, except };
  for (let s = 0; s < shards; s++) {
    try {
      bus.control(s, msg);
    } catch (err) {
      if (err instanceof BusFullError) meters.busFullAt('member_event');
      log.error({ err, channel, shard: s }, 'member event not delivered: internal queue full');
    }
  }
}

function deliverMember(m: Extract<ControlMsg, { type: 'member' }>): void {
  failover.shadows.apply(m.app, m.channel, m.op, m.userId);
  const data = m.op === 'added' ? { user_id: m.userId, user_info: m.userInfo } : { user_id: m.userId };
  const bytes = Buffer.from(frame(out(m.op === 'added' ? Ev.MemberAdded : Ev.MemberRemoved), JSON.stringify(data), m.channel));
  fanout.deliverLocal({ app: m.app, channel: m.channel, except: m.except, message: bytes });
}

/** presence_members of a channel this shard owns, after a member change. */
function presenceMembers(app: string, channel: string): void {
  if (meters.enabled) metrics.set('presence_members', { app_id: app, channel }, owner.info(app, channel).user_count ?? 0);
}

/**
 * pusher_internal:subscription_count for apps with subscription_count_events: at most one
 * per channel every 250 ms (coalesced), from the owner, on non-presence channels.
 */
const countTimers = new Map<string, NodeJS.Timeout>();
function subscriptionCountChanged(app: string, channel: string): void {
  if (!apps.byId(app)?.subscription_count_events || isPresence(channel)) return;
  const key = topicOf(app, channel);
  if (countTimers.has(key)) return;
  const timer = setTimeout(() => {
    countTimers.delete(key);
    const n = owner.info(app, channel).subscription_count;
    if (n > 0) broadcastSafe(app, channel, '', frame(out(Ev.SubscriptionCount), JSON.stringify({ subscription_count: n }), channel));
  }, 250);
  timer.unref();
  countTimers.set(key, timer);
}

const owner = new OwnerStore(shards, {
  countChanged: (app, channel) => subscriptionCountChanged(app, channel),
  occupied: (app, channel) => {
    meters.app(app).channelsActive.inc();
    log.debug({ app, channel }, 'channel occupied');
  },
  vacated: (app, channel) => {
    meters.app(app).channelsActive.dec();
    if (meters.enabled && channel.startsWith('presence-')) metrics.remove('presence_members', { app_id: app, channel });
    log.debug({ app, channel }, 'channel vacated');
  },
  memberAdded: (app, channel, userId, userInfo, except) => {
    presenceMembers(app, channel);
    memberEvent('added', app, channel, userId, userInfo, except);
  },
  memberRemoved: (app, channel, userId) => {
    presenceMembers(app, channel);
    memberEvent('removed', app, channel, userId, null, '');
  },
  restored: (app) => meters.app(app).channelsActive.inc(),
});

function onControl(msg: ControlMsg, from: number): void {
  if (failover.defer(msg, from)) return; // a replacement shard still rebuilding its records
  switch (msg.type) {
    case 'sub':
      return owner.sub(msg.app, msg.channel, msg.shard, msg.delta);
    case 'presence_join': {
      const app = apps.byId(msg.app);
      const max = app ? app.max_presence_members_per_channel : config.presence.max_members_per_channel;
      return bus.reply(from, msg.req, owner.join(msg.app, msg.channel, from, msg.socketId, msg.userId, msg.userInfo, max));
    }
    case 'presence_leave':
      return owner.leave(msg.app, msg.channel, msg.shard, msg.userKey);
    case 'channel_info':
      return bus.reply(from, msg.req, owner.info(msg.app, msg.channel));
    case 'channels_list':
      return bus.reply(from, msg.req, owner.list(msg.app, msg.prefix));
    case 'members':
      return bus.reply(from, msg.req, owner.members(msg.app, msg.channel));
    case 'terminate_user':
      terminateUser(sockets.values(), msg.app, msg.userId, out);
      return;
    case 'cache_set':
      return cacheStore.set(msg.app, msg.channel, msg.message, msg.ttl);
    case 'cache_get':
      return bus.reply(from, msg.req, cacheStore.get(msg.app, msg.channel));
    case 'member':
      return deliverMember(msg);
    case 'restore':
      return failover.restore(msg, from);
    case 'reply':
      return; // settled by the bus itself
  }
}

// Crash handling, rewiring to a restarted peer, the rebuild of a replacement (shard/failover.ts).
// Before bus.start: a replacement finds its `restore` messages already in its rings.
const failover = createFailover({
  init, bus, owner, sockets, log, post, onControl,
  stopping: () => stopping,
  closeEverything: () => {
    stopping = true; // closing sockets send no unsub / presence_leave: the rebuild accounts for them
    clearInterval(sweepTimer);
    if (listenSocket) {
      uWS.us_listen_socket_close(listenSocket);
      listenSocket = null;
    }
    for (const ws of [...sockets.values()]) ws.close();
    bus.stop();
    void limiter.close();
  },
  endThread: () => parentPort!.close(),
});

let socketSeq = 0;
const behavior = createWsBehavior({
  config, apps, shardId, shards, bus, fanout, counters, sockets, uws, log, metrics, limiter, out, backpressure,
  shadows: failover.shadows,
  cache,
  stopping: () => stopping,
  nextSocketId: () => `${init.socketIdPrefix}.${++socketSeq}`,
});
if (init.testHooks) {
  // test_crash {how: 'ws_message'}: the next WebSocket message throws inside uWS's callback.
  const message = behavior.message!;
  behavior.message = (ws, m, isBinary) => {
    failover.throwInWsMessage();
    return message(ws, m, isBinary);
  };
}
uws.ws('/app/:key', behavior);

// After uws.ws(): uWS's publish segfaults on an App with no WebSocket route yet, and a
// replacement shard (failover.ts) finds member events and publishes already in its rings.
bus.start({
  onPublish: (f) => {
    cache?.delivered(f);
    fanout.deliverLocal(f);
  },
  onControl,
  onError: (err, type) => log.error({ err, frameType: type }, 'bus frame handler failed'),
});

registerRoutes(uws, {
  config, apps, fanout, log, metrics, limiter, cache,
  stopping: () => stopping,
  channelInfo: (app: AppConfig, channel: string) =>
    bus.request<ChannelInfo>(ownerOf(app.id, channel, shards), { type: 'channel_info', app: app.id, channel }),
  channelList: async (app: AppConfig, prefix: string) => {
    const parts = await Promise.all(Array.from({ length: shards }, (_, s) =>
      bus.request<[string, number | null][]>(s, { type: 'channels_list', app: app.id, prefix })));
    return parts.flat();
  },
  terminateUser: (app: AppConfig, userId: string) => {
    for (let s = 0; s < shards; s++) bus.control(s, { type: 'terminate_user', app: app.id, userId });
  },
  members: (app: AppConfig, channel: string) =>
    bus.request<[unknown, unknown][]>(ownerOf(app.id, channel, shards), { type: 'members', app: app.id, channel }),
});

const sweepTimer = setInterval(() => behavior.sweep(Date.now()), 1000);

let listenSocket: us_listen_socket | null = null;
// A Redis rate limiter connects before the shard listens (the primary has checked that it
// answers). Should it still not be ready in time, listen anyway: limited API requests
// answer 503 until Redis is reachable (fail closed), the rest works.
void limiter.ready(STARTUP_TIMEOUT_MS).catch((err: unknown) => {
  log.error({ err }, 'rate limiter not ready; limited API requests answer 503 until it is');
}).then(() => {
  if (stopping) return;
  uws.listen(config.host, init.port, (ls) => {
    if (!ls) {
      shutdownNow({ type: 'listen_failed', port: init.port });
      return;
    }
    listenSocket = ls;
    post({ type: 'ready', port: uWS.us_socket_local_port(ls) });
  });
});

let stopping = false;

/** The stop, bounded by shutdown_grace_period (shard/shutdown.ts). */
const shutdown = createShutdown({
  sockets,
  closeListener: () => {
    if (listenSocket) uWS.us_listen_socket_close(listenSocket);
    listenSocket = null;
  },
  // In the native binding, not in uWS's TypeScript types.
  closeAll: () => (uws as TemplatedApp & { close(): void }).close(),
  bus, limiter, post, log,
  endThread: () => parentPort!.close(),
  graceMs: config.shutdown_grace_period,
  clock: { setTimeout },
});

function shutdownNow(final: ShardEvent): void {
  stopping = true;
  clearInterval(sweepTimer);
  shutdown.run(final);
}

if (promMetrics) {
  promMetrics.onCollect(() => {
    promMetrics.set('bus_spill_bytes', undefined, bus.spilledBytes());
    let buffered = 0;
    for (const ws of sockets.values()) buffered += ws.getBufferedAmount();
    promMetrics.set('websocket_buffer_usage', undefined, buffered);
  });
}

function answerMetrics(req: number): void {
  if (!promMetrics) return post({ type: 'metrics', req, metrics: [] });
  promMetrics.json().then((m) => post({ type: 'metrics', req, metrics: m }),
    (err: unknown) => log.error({ err }, 'could not collect metrics'));
}

parentPort!.on('message', (cmd: PrimaryCommand) => {
  if (cmd.type === 'shutdown' && !stopping) shutdownNow({ type: 'stopped' });
  else if (cmd.type === 'metrics') answerMetrics(cmd.req);
  else if (cmd.type === 'test_pause_bus') {
    if (!init.testHooks) return;
    bus.pauseDraining(cmd.ms);
    post({ type: 'test_bus_paused', socketIdPrefix: init.socketIdPrefix });
  }
  else if (cmd.type === 'test_gc') {
    if (!init.testHooks) return;
    (globalThis as { gc?: () => void }).gc?.();
    post({ type: 'test_gc_done', heap: heapFigures() });
  }
  else failover.command(cmd);
});
