// Shard wiring: one uWS App on the shared port (SO_REUSEPORT), the bus end of this
// thread, the owner records of the channels hashed to this shard, and the handlers
// built with their dependencies.

import { parentPort, workerData } from 'node:worker_threads';
import uWS, { type TemplatedApp, type us_listen_socket } from 'uWebSockets.js';
import { AppRegistry } from '../apps/registry';
import { Bus } from '../bus/bus';
import type { ControlMsg } from '../bus/messages';
import { CacheChannels, CacheStore } from '../channels/cache';
import { createSharedCache } from '../channels/shared-cache';
import { ConnectionCounters } from '../channels/counters';
import { bridgeOut } from '../channels/bridge';
import { createClusterDirectory } from '../channels/cluster-directory';
import { createBusDirectory } from '../channels/directory';
import { createFilteredSubscriptions } from '../channels/filtered';
import { Interest } from '../channels/interest';
import { createOwnerService, isOwnerMsg } from '../channels/owner-service';
import { createPublisher } from '../channels/publisher';
import { createUserDirectory } from '../channels/user-directory';
import { createUserOwner, isUserMsg } from '../channels/users';
import { registerRoutes } from '../http/router';
import { deepFreeze } from '../config';
import { createShardLogger, moduleLogger } from '../log';
import { createRateLimiter, STARTUP_TIMEOUT_MS } from '../ratelimit';
import { metersFor } from '../metrics/meters';
import { PromMetrics } from '../metrics/registry';
import { noMetrics, type MetricsSink } from '../metrics/types';
import { outName } from '../protocol/events';
import { Backpressure } from '../ws/backpressure';
import { createWsBehavior } from '../ws/connection';
import { terminateUser } from '../ws/signin';
import { createWatchlists } from '../ws/watchlist';
import type { Socket } from '../ws/types';
import { createTap } from '../console/tap';
import { listenUnix } from '../listeners/unix';
import { appsWithWebhooks } from '../webhooks/service';
import { createShardWebhooks, ownedState } from '../webhooks/shard';
import { createDeltaShard } from '../delta/shard';
import { deltaRoute } from '../delta/stage';
import { coordinated, coordRoute } from '../delta/coord';
import type { CacheStates } from '../delta/streams';
import { createHistoryOwner, isHistoryOwnerMsg } from '../history/owner';
import { createHistoryShard } from '../history/shard';
import { createHistoryStore } from '../history';
import { HistorySettings } from '../history/settings';
import { createIdempotencyOwner, isIdemMsg, keyOwner } from '../history/idempotency';
import { ownerOf } from '../channels/owner';
import { createFailover } from './failover';
import { applyApps } from './reload';
import { createShutdown } from './shutdown';
import { heapFigures, type PrimaryCommand, type ShardEvent, type ShardInit } from './init';
import { nameThread } from '../thread-name';

const init = workerData as ShardInit;
const { shardId, shards } = init;
nameThread(`shard-${shardId}`);
// Frozen again: structured cloning to this thread drops the primary's freeze, and
// frozen arrays let protocol/origin.ts cache compiled origin matchers.
const config = deepFreeze(init.config);
const rootLog = createShardLogger(config.log, init.logPort!, shardId);
/** `module` on each line when log.include_target is on (log.ts). */
const logOf = (module: string) => moduleLogger(rootLog, config.log, module);
const log = logOf('shard');
const apps = new AppRegistry(deepFreeze(init.apps), init.appSlots);
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
const backpressure = new Backpressure({
  maxBytes: config.websocket.max_bytes,
  maxMessages: config.websocket.max_messages,
  action: config.websocket.on_backpressure,
  metrics,
  sockets,
});
const counters = new ConnectionCounters(init.counters);
/** memory driver: maps the primary's buffer, so its limits are per process (ratelimit/memory.ts). */
const limiter = createRateLimiter(config, { memory: init.ratelimit, log: logOf('ratelimit') });
/** Cache channels (channels/cache.ts): the entries of the channels this shard owns; off with cache.driver `none`. */
const cacheStore = config.cache.driver === 'none' ? null : new CacheStore();
/** cache.driver redis / redis-cluster: those entries written through to Redis (channels/shared-cache.ts). */
const sharedCache = createSharedCache(config, cacheStore, { metrics, log: logOf('cache') });
const cache = cacheStore ? new CacheChannels(bus, shards, config.channel_limits.cache_ttl) : null;
cacheStore?.startSweep(30_000);
/** Which shards have subscribers of a channel: this shard keeps its own bit (channels/interest.ts). */
const interest = new Interest(init.interest, shards, shardId);
/** The live console's event tap (console/tap.ts): a pipeline stage only when the console is on. */
const tap = config.console.enabled ? createTap(shardId, post) : null;
/** Tag filtering (channels/filtered.ts): the filter visitor stage; null when disabled. */
const filters = config.tag_filtering.enabled ? createFilteredSubscriptions<Socket>({ uws, sockets, meters: metersFor(metrics) }) : null;
/** Delta compression (delta/): this shard's delta sockets and the route to the sequencer (thread shards + 1). */
const deltaInit = init.delta;
const deltaInterest = deltaInit && {
  fossil: new Interest(deltaInit.interest.fossil, shards, shardId),
  xdelta3: new Interest(deltaInit.interest.xdelta3, shards, shardId),
};
const delta = deltaInit && deltaInterest ? createDeltaShard({
  config, uws, sockets, interest: deltaInterest, out, log, metrics, guard: backpressure,
  states: (app, channel) => bus.request<CacheStates & { conflation_key: string | null }>(deltaInit.sequencer, { type: 'delta_states', app, channel }),
}) : null;
backpressure.attach({ filters, delta });
/** History channels (history/): numbered and kept by their owner shard; the stage sends their events there. */
const historySettings = new HistorySettings(apps);
const history = createHistoryShard({
  settings: historySettings, shards, uws, sockets, out, log: logOf('history'), metrics,
  control: (to, msg) => bus.control(to, msg),
  request: (to, body) => bus.request(to, body),
  publisher: () => publisher,
});
const publisher = createPublisher({
  bus, interest, shards, uws, sockets, cache, guard: backpressure, metrics, log: logOf('publisher'), out,
  onMember: (m) => failover.shadows.apply(m.app, m.channel, m.op, m.userId),
  // the primary is thread `shards` of the mesh (bus/topology.ts)
  stages: {
    // cluster_coordination: the primary gets the event's position first (delta/coord.ts)
    delta: deltaInit && deltaInterest ? [coordinated(config) ? coordRoute(bus, shards) : deltaRoute(bus, deltaInit.sequencer, deltaInterest)] : [],
    // history last: the adapter and the console tap see a history channel's event first
    adapter: [...(init.bridge ? [bridgeOut(bus, shards)] : []), ...(tap ? [tap.stage] : []), history.stage],
    filter: [...(filters ? [filters] : []), ...(delta ? [delta.inbound] : [])],
  },
});
const localDirectory = createBusDirectory({ bus, shards, log: logOf('bus'), metrics });
// In a cluster the channel questions also go to every other node, through the primary
// (thread `shards`; adapter/, channels/cluster-directory.ts).
const directory = config.adapter.driver === 'local'
  ? localDirectory
  : createClusterDirectory(localDirectory, (question) => bus.request<unknown[]>(shards, { type: 'cluster_ask', question }));
/** Webhook reports to the primary (webhooks/shard.ts); null when no app has webhooks. */
const webhooks = appsWithWebhooks(config) ? createShardWebhooks({
  apps, log, metrics,
  toPrimary: (msg) => bus.control(shards, msg), // the primary is thread `shards`
  count: (app, channel) => owner.store.info(app, channel).subscription_count,
}) : null;
const owner = createOwnerService({
  shards, apps, cacheStore, sharedCache,
  publisher: tap ? { publishOne: (m) => publisher.publishOne(m), member: (m) => { tap.member(m); publisher.member(m); } } : publisher, log: logOf('channels'), metrics, out,
  defaultMaxMembers: config.presence.max_members_per_channel,
  reply: (to, req, body) => bus.reply(to, req, body),
  // in a cluster, node-local presence transitions go to the other nodes through the primary
  cluster: config.adapter.driver === 'local' ? null : {
    memberChanged: (m) => {
      try {
        bus.control(shards, { type: 'cluster_member', ...m });
      } catch (err) {
        log.error({ err, channel: m.channel }, 'could not tell the primary about a presence change: the other nodes miss it');
      }
    },
    countChanged: (c) => {
      try {
        bus.control(shards, { type: 'cluster_count', ...c });
      } catch (err) {
        log.error({ err, channel: c.channel }, 'could not tell the primary about a subscription count: the other nodes miss it');
      }
    },
  },
  hooks: webhooks ? {
    occupied: (app, channel) => webhooks.occupied(app, channel),
    vacated: (app, channel) => webhooks.vacated(app, channel),
    memberAdded: (app, channel, userId) => webhooks.memberAdded(app, channel, userId),
    memberRemoved: (app, channel, userId) => webhooks.memberRemoved(app, channel, userId),
    countChanged: (app, channel) => webhooks.countChanged(app, channel),
  } : undefined,
});

const historyOwner = createHistoryOwner({
  store: createHistoryStore(config, shards, metrics),
  settings: historySettings,
  maxRecover: config.history.max_recover,
  targets: (app, channel) => interest.targets(app, channel, []),
  send: (targets, msg) => {
    const batch = bus.batch();
    for (const to of targets) batch.control(to, msg);
    batch.commit();
  },
  plain: (m) => publisher.publishOne({ kind: 'api', app: m.app, channel: m.channel, except: m.except, message: m.message, tags: m.tags }),
  reply: (to, req, body) => bus.reply(to, req, body),
  subscribed: (app, channel) => owner.store.info(app, channel).subscription_count > 0,
  log: logOf('history'),
  metrics,
});

/** Idempotent publish: the keys hashed to this shard (history/idempotency.ts). */
const idempotency = createIdempotencyOwner({
  windowMs: config.idempotency.window_seconds * 1000,
  maxKeys: Math.max(1, Math.floor(config.idempotency.max_keys / shards)),
  reply: (to, req, body) => bus.reply(to, req, body),
});
function tellKeyOwner(msg: Extract<ControlMsg, { type: 'idem_done' | 'idem_release' }>): void {
  try {
    bus.control(keyOwner(msg.app, msg.key, shards), msg);
  } catch (err) {
    // done lost: a retry publishes again; release lost: the claim lapses (PENDING_MS)
    log.error({ err }, 'could not tell an idempotency key\'s owner how its publish ended');
  }
}

/** A control message to the primary (thread `shards`) that nobody waits for: logged when the queue is full. */
function toPrimary(msg: ControlMsg, what: string): void {
  try {
    bus.control(shards, msg);
  } catch (err) {
    log.error({ err }, `could not tell the primary about ${what}: the other nodes miss it`);
  }
}

/** Watchlists: the online state of the users hashed to this shard, and this shard's watchers. */
const users = createUserOwner({
  control: (to, msg) => bus.control(to, msg),
  reply: (to, req, body) => bus.reply(to, req, body),
  log,
  rebuilding: init.restoreFrom !== null,
  // in a cluster, node-local online / offline go to the other nodes through the primary
  cluster: config.adapter.driver === 'local' ? null : {
    changed: (op, app, userId) => toPrimary({ type: 'cluster_user', op, app, userId }, 'a user\'s online state'),
    state: (list) => toPrimary({ type: 'cluster_users', shard: shardId, users: list }, 'the rebuilt online users'),
  },
});
const watchlists = createWatchlists({ users: createUserDirectory({ bus, shards, log, metrics }), log, metrics, out });

function onControl(msg: ControlMsg, from: number): void {
  if (failover.defer(msg, from)) return; // a replacement shard still rebuilding its records
  if (msg.type === 'remote_node_gone') users.nodeGone(msg.node); // and the owner's presence below
  if (isOwnerMsg(msg)) return owner.handle(msg, from);
  if (isHistoryOwnerMsg(msg)) return historyOwner.handle(msg, from);
  if (isIdemMsg(msg)) return idempotency.handle(msg, from);
  if (isUserMsg(msg)) return users.handle(msg, from);
  switch (msg.type) {
    case 'watchlist':
      return watchlists.deliver(msg.app, msg.op, msg.userIds, from);
    case 'terminate_user':
      terminateUser(sockets.values(), msg.app, msg.userId, out);
      return;
    case 'member':
      return publisher.deliverMember(msg);
    case 'restore':
      return failover.restore(msg, from);
    case 'delta':
      return delta?.deliver(msg);
    case 'hist':
      return history.deliver(msg);
    case 'reply':
      return; // settled by the bus itself
  }
}

// Crash handling, rewiring to a restarted peer, the rebuild of a replacement (shard/failover.ts).
// Before bus.start: a replacement finds its `restore` messages already in its rings.
const failover = createFailover({
  init, bus, owner: owner.store, sockets, log, post, onControl,
  users: { owner: users, watchlists },
  remote: owner.remote,
  stopping: () => stopping,
  closeEverything: () => {
    stopping = true; // closing sockets send no unsub / presence_leave: the rebuild accounts for them
    clearInterval(sweepTimer);
    closeListeners();
    for (const ws of [...sockets.values()]) ws.close();
    bus.stop();
    void limiter.close();
    void sharedCache?.close();
  },
  endThread: () => parentPort!.close(),
  // the crash rule of webhooks (webhooks/ledger.ts): the rebuilt state, before anything changes
  // it. In a cluster the primary decides those webhooks for the cluster (adapter/transitions.ts).
  onRebuilt: webhooks && config.adapter.driver === 'local' ? () => webhooks.sync(shardId, ownedState(config.apps, owner.store)) : undefined,
});

let socketSeq = 0;
const behavior = createWsBehavior({
  config, apps, shardId, publisher, directory, interest, counters, sockets, uws, log: logOf('ws'), metrics, limiter, out, backpressure,
  shadows: failover.shadows,
  watchlists,
  delta,
  history,
  cache,
  tap,
  filters,
  webhooks,
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
  onPublish: (f) => publisher.deliver(f),
  onControl,
  onError: (err, type) => log.error({ err, frameType: type }, 'bus frame handler failed'),
});

const clusterUp = new Int32Array(init.clusterUp);
registerRoutes(uws, {
  config, apps, publisher, directory, log: logOf('http'), metrics, limiter, cache,
  clusterUp: config.adapter.driver === 'local' ? undefined : () => Atomics.load(clusterUp, 0) === 1,
  cacheUp: sharedCache ? () => sharedCache.isUp() : undefined,
  idempotency: {
    claim: (app, key) => bus.request(keyOwner(app, key, shards), { type: 'idem_claim', app, key }),
    done: (app, key, status, body) => tellKeyOwner({ type: 'idem_done', app, key, status, body }),
    release: (app, key) => tellKeyOwner({ type: 'idem_release', app, key }),
  },
  history: {
    settings: historySettings,
    page: (app, channel, q) => bus.request(ownerOf(app, channel, shards), { type: 'hist_page', app, channel, ...q }),
  },
  stopping: () => stopping,
});

/** Expired history messages go at this pace (reads drop them lazily meanwhile). */
const HISTORY_SWEEP_MS = 5000;
let historySweptAt = Date.now();
const sweepTimer = setInterval(() => {
  const now = Date.now();
  behavior.sweep(now);
  delta?.sweep(now);
  if (now - historySweptAt >= HISTORY_SWEEP_MS) {
    historySweptAt = now;
    historyOwner.sweep();
    history.sweep();
    idempotency.sweep();
  }
}, 1000);

let listenSocket: us_listen_socket | null = null;
/** Shard 0 also listens on unix_socket.path when enabled (listeners/unix.ts says why only it). */
let unixSocket: us_listen_socket | null = null;
function closeListeners(): void {
  for (const ls of [listenSocket, unixSocket]) if (ls) uWS.us_listen_socket_close(ls);
  listenSocket = null;
  unixSocket = null;
}
// A Redis rate limiter connects before the shard listens (the primary has checked that it
// answers). Should it still not be ready in time, listen anyway: limited API requests
// answer 503 until Redis is reachable (fail closed), the rest works.
// So does the Redis of cache.driver redis: a subscriber must not miss an entry for want
// of a connection. Not ready in time: cache channels answer from memory until it is.
void Promise.all([
  limiter.ready(STARTUP_TIMEOUT_MS).catch((err: unknown) => {
    log.error({ err }, 'rate limiter not ready; limited API requests answer 503 until it is');
  }),
  sharedCache?.ready(STARTUP_TIMEOUT_MS).catch((err: unknown) => {
    log.error({ err }, 'cache Redis not ready; cache channels replay only this node\'s memory until it is');
  }),
]).then(() => {
  if (stopping) return;
  uws.listen(config.host, init.port, (ls) => {
    if (!ls) {
      shutdownNow({ type: 'listen_failed', port: init.port });
      return;
    }
    listenSocket = ls;
    if (config.unix_socket.enabled && shardId === 0) {
      const unix = listenUnix(uws, config.unix_socket);
      if (typeof unix === 'string') {
        log.error({ path: config.unix_socket.path }, unix);
        shutdownNow({ type: 'listen_failed', port: init.port });
        return;
      }
      unixSocket = unix;
    }
    post({ type: 'ready', port: uWS.us_socket_local_port(ls) });
  });
});

let stopping = false;

/** The stop, bounded by shutdown_grace_period (shard/shutdown.ts). */
const shutdown = createShutdown({
  sockets,
  closeListener: closeListeners,
  // In the native binding, not in uWS's TypeScript types.
  closeAll: () => (uws as TemplatedApp & { close(): void }).close(),
  bus, post, log,
  // an open Redis socket would keep this thread alive
  limiter: { close: () => Promise.all([limiter.close(), sharedCache?.close()]).then(() => undefined) },
  endThread: () => parentPort!.close(),
  graceMs: config.shutdown_grace_period,
  clock: { setTimeout },
});

function shutdownNow(final: ShardEvent): void {
  stopping = true;
  clearInterval(sweepTimer);
  webhooks?.stop(); // what this turn reported goes to the primary before the bus stops
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
  else if (cmd.type === 'tap') tap?.watch(cmd.apps);
  else if (cmd.type === 'apps') {
    try {
      const closed = applyApps({ apps, sockets, metrics, out }, deepFreeze(cmd.apps), cmd.slots);
      post({ type: 'apps_applied', closed, error: null });
    } catch (err) {
      post({ type: 'apps_applied', closed: 0, error: (err as Error).message });
    }
  }
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
