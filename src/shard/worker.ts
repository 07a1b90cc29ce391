// Shard wiring: one uWS App on the shared port (SO_REUSEPORT), the bus end of this
// thread, the owner records of the channels hashed to this shard, and the handlers
// built with their dependencies.

import { parentPort, workerData } from 'node:worker_threads';
import uWS, { type TemplatedApp, type us_listen_socket } from 'uWebSockets.js';
import { AppRegistry } from '../apps/registry';
import { Bus } from '../bus/bus';
import type { ControlMsg } from '../bus/messages';
import { CacheChannels, CacheStore } from '../channels/cache';
import { ConnectionCounters } from '../channels/counters';
import { bridgeOut } from '../channels/bridge';
import { createBusDirectory } from '../channels/directory';
import { Interest } from '../channels/interest';
import { createOwnerService, isOwnerMsg } from '../channels/owner-service';
import { createPublisher } from '../channels/publisher';
import { registerRoutes } from '../http/router';
import { deepFreeze } from '../config';
import { createLogger } from '../log';
import { createRateLimiter, STARTUP_TIMEOUT_MS } from '../ratelimit';
import { PromMetrics } from '../metrics/registry';
import { noMetrics, type MetricsSink } from '../metrics/types';
import { outName } from '../protocol/events';
import { Backpressure } from '../ws/backpressure';
import { createWsBehavior } from '../ws/connection';
import { terminateUser } from '../ws/signin';
import type { Socket } from '../ws/types';
import { createDeltaShard } from '../delta/shard';
import { deltaRoute } from '../delta/stage';
import type { CacheStates } from '../delta/streams';
import { createFailover } from './failover';
import { createShutdown } from './shutdown';
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
const backpressure = new Backpressure({
  maxBytes: config.websocket.max_bytes,
  maxMessages: config.websocket.max_messages,
  action: config.websocket.on_backpressure,
  metrics,
  sockets,
});
const counters = new ConnectionCounters(init.counters);
/** memory driver: maps the primary's buffer, so its limits are per process (ratelimit/memory.ts). */
const limiter = createRateLimiter(config, { memory: init.ratelimit, log });
/** Cache channels (channels/cache.ts): the entries of the channels this shard owns; off with cache.driver `none`. */
const cacheStore = config.cache.driver === 'memory' ? new CacheStore() : null;
const cache = cacheStore ? new CacheChannels(bus, shards, config.channel_limits.cache_ttl) : null;
cacheStore?.startSweep(30_000);
/** Which shards have subscribers of a channel: this shard keeps its own bit (channels/interest.ts). */
const interest = new Interest(init.interest, shards, shardId);
/** Delta compression (delta/): this shard's delta sockets and the route to the sequencer (thread shards + 1). */
const deltaInit = init.delta;
const deltaInterest = deltaInit && {
  fossil: new Interest(deltaInit.interest.fossil, shards, shardId),
  xdelta3: new Interest(deltaInit.interest.xdelta3, shards, shardId),
};
const delta = deltaInit && deltaInterest ? createDeltaShard({
  config, uws, sockets, interest: deltaInterest, out, log,
  states: (app, channel) => bus.request<CacheStates & { conflation_key: string | null }>(deltaInit.sequencer, { type: 'delta_states', app, channel }),
}) : null;
const publisher = createPublisher({
  bus, interest, shards, uws, sockets, cache, guard: backpressure, metrics, log, out,
  onMember: (m) => failover.shadows.apply(m.app, m.channel, m.op, m.userId),
  // the primary is thread `shards` of the mesh (bus/topology.ts)
  stages: {
    delta: deltaInit && deltaInterest ? [deltaRoute(bus, deltaInit.sequencer, deltaInterest)] : [],
    adapter: init.bridge ? [bridgeOut(bus, shards)] : [],
    filter: delta ? [delta.inbound] : [],
  },
});
const directory = createBusDirectory({ bus, shards, log, metrics });
const owner = createOwnerService({
  shards, apps, publisher, cacheStore, log, metrics, out,
  defaultMaxMembers: config.presence.max_members_per_channel,
  reply: (to, req, body) => bus.reply(to, req, body),
});

function onControl(msg: ControlMsg, from: number): void {
  if (failover.defer(msg, from)) return; // a replacement shard still rebuilding its records
  if (isOwnerMsg(msg)) return owner.handle(msg, from);
  switch (msg.type) {
    case 'terminate_user':
      terminateUser(sockets.values(), msg.app, msg.userId, out);
      return;
    case 'member':
      return publisher.deliverMember(msg);
    case 'restore':
      return failover.restore(msg, from);
    case 'delta':
      return delta?.deliver(msg);
    case 'reply':
      return; // settled by the bus itself
  }
}

// Crash handling, rewiring to a restarted peer, the rebuild of a replacement (shard/failover.ts).
// Before bus.start: a replacement finds its `restore` messages already in its rings.
const failover = createFailover({
  init, bus, owner: owner.store, sockets, log, post, onControl,
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
  config, apps, shardId, publisher, directory, interest, counters, sockets, uws, log, metrics, limiter, out, backpressure,
  shadows: failover.shadows,
  delta,
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
  onPublish: (f) => publisher.deliver(f),
  onControl,
  onError: (err, type) => log.error({ err, frameType: type }, 'bus frame handler failed'),
});

registerRoutes(uws, {
  config, apps, publisher, directory, log, metrics, limiter, cache,
  stopping: () => stopping,
});

const sweepTimer = setInterval(() => {
  const now = Date.now();
  behavior.sweep(now);
  delta?.sweep(now);
}, 1000);

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
