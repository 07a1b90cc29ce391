// Shard wiring: one uWS App on the shared port (SO_REUSEPORT), the bus end of this
// thread, the owner records of the channels hashed to this shard, and the handlers
// built with their dependencies.

import { parentPort, workerData } from 'node:worker_threads';
import type { TemplatedApp } from 'uWebSockets.js';
import { registerRoutes } from '../http/router';
import { createWsBehavior } from '../ws/connection';
import { createFallback } from '../fallback/service';
import { ownedState } from '../webhooks/shard';
import { nameThread } from '../thread-name';
import { startTracing, stopTracing, tracing } from '../tracing/tracer';
import { createShardHooks } from '../hooks';
import type { Socket, SocketData } from '../ws/types';
import { createCommandHandler } from './commands';
import { createShardContext } from './context';
import { createControlHandler } from './control';
import { createFailover, type Failover } from './failover';
import type { ShardEvent, ShardInit } from './init';
import { createListeners } from './listen';
import { createShutdown } from './shutdown';
import { createDrain } from './drain';
import { startReconciler } from './reconcile';

const init = workerData as ShardInit;
nameThread(`shard-${init.shardId}`);
// before the context: the publish pipeline it builds reads tracing()
if (init.tracing) startTracing(init.tracing, `shard-${init.shardId}`);
const ctx = createShardContext(init, (e) => parentPort!.postMessage(e));
const { shardId, config, log, logOf, post, uws, sockets, bus, promMetrics, limiter, sharedCache, webhooks, owner } = ctx;
const listeners = createListeners(ctx);

// Crash handling, rewiring to a restarted peer, the rebuild of a replacement (shard/failover.ts).
// Before bus.start: a replacement finds its `restore` messages already in its rings.
const onControl = createControlHandler(ctx, () => failover);
const failover: Failover = createFailover({
  init, bus, owner: owner.store, sockets, log, post, onControl, tally: ctx.tally,
  users: { owner: ctx.users, watchlists: ctx.watchlists },
  remote: owner.remote,
  stopping: () => ctx.stopping,
  closeEverything: () => {
    ctx.stopping = true; // closing sockets send no unsub / presence_leave: the rebuild accounts for them
    clearInterval(sweepTimer);
    reconciler.stop();
    listeners.close();
    for (const ws of [...sockets.values()]) ws.close();
    bus.stop();
    void limiter.close();
    void sharedCache?.close();
    void ctx.history.close();
  },
  endThread: () => parentPort!.close(),
  // the crash rule of webhooks (webhooks/ledger.ts): the rebuilt state, before anything changes
  // it. In a cluster the primary decides those webhooks for the cluster (adapter/transitions.ts).
  onRebuilt: webhooks && config.adapter.driver === 'local' ? () => webhooks.sync(shardId, ownedState(config.apps, owner.store)) : undefined,
});
ctx.shadows = failover.shadows;

/** Backend hooks (hooks/): the signed calls of every app's connect / subscribe / client_event / publish hooks. */
const hooks = createShardHooks<Socket, SocketData>({ config, metrics: ctx.metrics, tap: ctx.tap, out: ctx.out });

let socketSeq = 0;
const clusterUp = new Int32Array(init.clusterUp);
/** adapter.when_down refuse: the backend is down (index 0) or not taking publishes (index 1). */
const refuseWhenDown = config.adapter.driver !== 'local' && config.adapter.when_down === 'refuse';
const behavior = createWsBehavior({
  config, apps: ctx.apps, shardId, publisher: ctx.publisher, directory: ctx.directory, interest: ctx.interest, buckets: ctx.buckets,
  counters: ctx.counters, sockets, uws, log: logOf('ws'), metrics: ctx.metrics, limiter, out: ctx.out,
  backpressure: ctx.backpressure,
  shadows: failover.shadows,
  watchlists: ctx.watchlists,
  delta: ctx.delta,
  history: ctx.historySide,
  numbered: ctx.historyRedis?.subjects ?? null,
  cache: ctx.cache,
  tap: ctx.tap,
  filters: ctx.filters,
  webhooks,
  hooks: hooks.ws,
  stopping: () => ctx.stopping,
  clusterRefuses: refuseWhenDown ? () => {
    if (Atomics.load(clusterUp, 0) === 0) return 'the cluster backend is down';
    return Atomics.load(clusterUp, 1) === 1 ? 'the cluster backend is not taking publishes now' : null;
  } : undefined,
  nextSocketId: () => `${init.socketIdPrefix}.${++socketSeq}`,
});
if (init.testHooks) {
  // test_crash {how: 'ws_message'}: the next WebSocket message throws inside uWS's callback.
  const message = behavior.message;
  behavior.message = (ws, m, isBinary) => {
    failover.throwInWsMessage();
    return message(ws, m, isBinary);
  };
}
// A draining shard (shard/drain.ts) takes no new client: 503, which a balancer can retry elsewhere.
const upgrade = behavior.upgrade!;
behavior.upgrade = (res, req, context) => {
  if (!ctx.draining) return upgrade(res, req, context);
  res.writeStatus('503 Service Unavailable').writeHeader('Retry-After', '1').end('Server is draining: connect to another node', true);
};
uws.ws('/app/:key', behavior);
// HTTP fallback sessions (fallback/): the same connection handlers as the WebSockets.
ctx.fallback = ctx.topics && createFallback({
  config, apps: ctx.apps, shardId, shards: ctx.shards, handlers: behavior, counters: ctx.counters, hooks: hooks.ws, topics: ctx.topics, bus,
  nextSocketId: () => `${init.socketIdPrefix}.${++socketSeq}`, metrics: ctx.metrics, log: logOf('fallback'),
  draining: () => ctx.draining,
});
ctx.fallback?.register(uws);

// After uws.ws(): uWS's publish segfaults on an App with no WebSocket route yet, and a
// replacement shard (failover.ts) finds member events and publishes already in its rings.
bus.start({
  onPublish: (f) => ctx.publisher.deliver(f),
  onControl,
  onError: (err, type) => log.error({ err, frameType: type }, 'bus frame handler failed'),
});

const appStoreUp = new Int32Array(init.appStoreUp);
if (config.app_manager.driver !== 'array') {
  const lookups = (result: string) => ctx.metrics.counter('app_store_lookups_total', { result });
  ctx.apps.countLookups({ hit: lookups('hit'), miss: lookups('miss'), stale: lookups('stale'), storeDown: () => Atomics.load(appStoreUp, 0) === 0 });
}
registerRoutes(uws, {
  config, apps: ctx.apps, publisher: ctx.publisher, directory: ctx.directory, log: logOf('http'), metrics: ctx.metrics, limiter, cache: ctx.cache,
  clusterUp: config.adapter.driver === 'local' ? undefined : () => Atomics.load(clusterUp, 0) === 1,
  clusterBusy: config.adapter.driver === 'local' ? undefined : () => Atomics.load(clusterUp, 1) === 1,
  clusterDown: refuseWhenDown ? () => Atomics.load(clusterUp, 0) === 0 : undefined,
  cacheUp: sharedCache ? () => sharedCache.isUp() : undefined,
  appStoreUp: config.app_manager.driver === 'array' ? undefined : () => Atomics.load(appStoreUp, 0) === 1,
  hooks: hooks.publish,
  ...ctx.history.api,
  tracing: tracing(),
  stopping: () => ctx.stopping,
  draining: () => ctx.draining,
});

const sweepTimer = setInterval(() => {
  const now = Date.now();
  behavior.sweep(now);
  ctx.delta?.sweep(now);
  ctx.history.sweep(now);
  ctx.fallback?.sweep(now);
}, 1000);

// Owner reconciliation (channels/reconcile.ts): timer work only, nothing on the hot path.
const reconciler = startReconciler({
  intervalMs: config.bus.owner_reconcile_interval_ms, shards: ctx.shards, bus, sockets, shadows: failover.shadows, tally: ctx.tally, owner,
  log: logOf('channels'), metrics: ctx.metrics,
  active: () => !ctx.stopping && !failover.crashed,
  // the webhook ledger's channels of this owner: re-decided from its records (webhooks/ledger.ts);
  // in a cluster the primary decides those webhooks for the cluster (adapter/transitions.ts)
  syncWebhooks: webhooks && config.adapter.driver === 'local' ? () => webhooks.sync(shardId, ownedState(config.apps, owner.store)) : null,
});

/** The stop, bounded by shutdown_grace_period (shard/shutdown.ts). */
const shutdown = createShutdown({
  sockets,
  closeListener: () => listeners.close(),
  // In the native binding, not in uWS's TypeScript types.
  closeAll: () => (uws as TemplatedApp & { close(): void }).close(),
  bus, post, log,
  // an open Redis socket would keep this thread alive
  // (and the spans still queued are exported before the thread ends)
  limiter: { close: () => Promise.all([limiter.close(), sharedCache?.close(), ctx.history.close(), stopTracing()]).then(() => undefined) },
  endThread: () => parentPort!.close(),
  graceMs: config.shutdown_grace_period,
  clock: { setTimeout },
});

const drain = createDrain({ sockets, clock: { now: Date.now, setTimeout }, done: () => post({ type: 'drained' }) });

function shutdownNow(final: ShardEvent): void {
  ctx.stopping = true;
  drain.cancel();
  clearInterval(sweepTimer);
  reconciler.stop();
  webhooks?.stop(); // what this turn reported goes to the primary before the bus stops
  hooks.close();
  ctx.fallback?.stop(); // requests relayed to other shards' sessions get their 4200 here
  shutdown.run(final, drain.startedAt === null ? 0 : Date.now() - drain.startedAt);
}

listeners.start(shutdownNow);

if (promMetrics) {
  promMetrics.onCollect(() => {
    promMetrics.set('bus_spill_bytes', undefined, bus.spilledBytes());
    let buffered = 0;
    for (const ws of sockets.values()) buffered += ws.getBufferedAmount();
    promMetrics.set('websocket_buffer_usage', undefined, buffered);
  });
}

parentPort!.on('message', createCommandHandler(ctx, failover, shutdownNow, (unreadyMs, windowMs) => {
  ctx.draining = true;
  drain.run(unreadyMs, windowMs);
}));
