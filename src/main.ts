// Primary thread: config → rings → shards. It never touches a client socket.

import { randomInt } from 'node:crypto';
import type { Logger } from 'pino';
import { initialSlots } from './apps/registry';
import { createTopology, type BusTopology } from './bus/topology';
import { createDoorbell } from './bus/doorbell';
import { createRingBuffer } from './bus/ring';
import { Bus } from './bus/bus';
import { createTransport, type ClusterNode } from './adapter';
import { createPrimaryEndpoint, type Bridge } from './channels/bridge';
import type { ConsoleServer } from './console/server';
import type { ControlMsg } from './bus/messages';
import { CacheChannels } from './channels/cache';
import { checkSharedCache } from './channels/shared-cache';
import { ConnectionCounters } from './channels/counters';
import { allocateInterest, Interest } from './channels/interest';
import { deepFreeze } from './config/freeze';
import { assertSupported } from './config/support';
import type { Config } from './config/types';
import { createLogger } from './log';
import { startRedirectServer, type RedirectServer } from './listeners/redirect';
import { startupSummary } from './listeners/summary';
import { prepareUnixSocket, removeUnixSocket } from './listeners/unix';
import { allocateRateLimiterMemory, checkRateLimiter } from './ratelimit';
import { PromMetrics } from './metrics/registry';
import { startMetricsServer, type MetricsServer } from './metrics/server';
import { noMetrics } from './metrics/types';
import { heapFigures, type HeapFigures, type PrimaryCommand, type ShardEvent } from './shard/init';
import { askEvery, drainPlan, drainShards, freePort, spawnShard, stopShards, type ShardHandle } from './primary/spawn';
import { createReloader, type ReloadResult } from './reload/primary';
import { AppSync } from './apps/sync';
import { slotCapacity, type AppsApplied } from './reload/plan';
import { openConsole } from './primary/console';
import { startPrimaryCluster } from './primary/cluster';
import { StartedResources } from './primary/resources';
import { superviseShards, type ShardBase, type Started } from './primary/supervisor';
import { appsWithWebhooks, startWebhookService, type WebhookService } from './webhooks/service';
import { spawnSequencer } from './delta/spawn';
import { deltaRoute } from './delta/stage';
import { coordinated, withDeltaLocal, type DeltaLocal } from './delta/coord';
import type { DeltaShardInit } from './delta/init';
import { tracingSettings, type TracingSettings } from './tracing/settings';
import { startTracing, stopTracing } from './tracing/tracer';

// Ring size and spill bound: config bus.ring_bytes (unset: derived from the thread count so
// that the mesh stays ≤ 4 MiB × threads, bus/topology.ts) and bus.max_spill_bytes (64 MiB
// per thread, all its outgoing rings together, before the API answers 503; bus/spill.ts).

export interface RunningServer {
  readonly port: number;
  /** Port of the /metrics listener (metrics.port 0 = ephemeral); null when metrics are off. */
  readonly metricsPort: number | null;
  /** Port of the live console (console.port 0 = ephemeral); null when console.enabled is false. */
  readonly consolePort: number | null;
  /** Port of the HTTP→HTTPS redirect listener (ssl.redirect_http; http_port 0 = ephemeral); null when off. */
  readonly redirectPort: number | null;
  /** The config in force (after a reload: with the reloaded apps). */
  readonly config: Config;
  /**
   * Applies the apps of `next` in every shard (SIGHUP, see cli.ts and src/reload/primary.ts): added,
   * removed (connections closed with 4001), disabled (4003), changed (connections stay).
   * Other settings are not reloaded (logged). Rejects, changing nothing, when `next` cannot be used.
   */
  reload(next: Config): Promise<ReloadResult>;
  /** The paced drain (shutdown_drain_window), then closes every client left with 4200 and ends every shard. Idempotent. */
  stop(): Promise<void>;
  /** Resolves once a stop finished, whoever asked for it (a signal, stop(), POST /drain on the metrics listener). */
  readonly stopped: Promise<void>;
  /**
   * Tests only (RINGCAST_TEST_HOOKS=1 when start() ran, else it rejects): shard `shard`
   * stops reading its rings for `ms` (Bus.pauseDraining). Resolves once the pause is in
   * force, with the socket_id prefix of that shard (to tell which clients it holds).
   * `shard` = the number of shards is the primary (its bus end; prefix ''), the number of
   * shards + 1 the delta sequencer (delta_compression.enabled; prefix '').
   */
  testPauseBus(shard: number, ms: number): Promise<{ socketIdPrefix: string }>;
  /**
   * Tests only (RINGCAST_TEST_HOOKS=1, node started with --expose-gc, else it rejects): a full
   * GC in the primary and every shard, so that RSS can be compared without the GC sawtooth.
   */
  /** Resolves with the live JS heap of the primary and of each shard after the GC (bytes). */
  testGc(): Promise<{ primary: HeapFigures; shards: HeapFigures[] }>;
  /**
   * Tests only, present when RINGCAST_TEST_HOOKS=1 at start: makes shard `shard` throw a
   * real uncaught exception (from a timer, or from the uWS callback of the next WebSocket
   * message it receives) and resolves when its replacement listens and has rebuilt its
   * channel records, with the replacement's socket_id prefix.
   */
  testCrashShard?(shard: number, how?: 'timer' | 'ws_message'): Promise<{ socketIdPrefix: string }>;
  /** Tests only (RINGCAST_TEST_HOOKS=1): the socket_id prefix of each shard index, now. */
  testShardPrefixes?(): string[];
  /**
   * The primary's end of the bus as a bridge to other processes (start()'s `bridge`
   * option; the cluster adapters use it): publish into this process's shards, receive the
   * local API and client events. null when not asked for.
   */
  readonly bridge: Bridge | null;
  /** The database app store (app_manager.driver postgres, mysql, dynamodb; apps/sync.ts); null with array. */
  readonly appStore: AppSync | null;
  /** This process as a node of a cluster (adapter.driver redis, redis-cluster, nats); null with `local`. */
  readonly cluster: Pick<ClusterNode, 'id' | 'nodes' | 'isUp' | 'buckets'> | null;
}

export interface StartOptions {
  /** Shards hand every local API and client event to the primary (RunningServer.bridge). */
  bridge?: boolean;
}

export class ListenError extends Error {
  readonly code = 'RC_ERR_LISTEN';
}

async function startOnce(config: Config, port: number, testHooks: boolean, bridge: boolean, log: Logger, webhooks: WebhookService | null, appStoreUp: SharedArrayBuffer, tracing: TracingSettings | null): Promise<Started | null> {
  const shards = config.workers;
  // Threads of the mesh: the shards, the primary (index shards), the delta sequencer (shards + 1).
  const deltaOn = config.delta_compression.enabled;
  const threads = shards + (deltaOn ? 2 : 1);
  const topology: BusTopology = createTopology(threads, config.bus.ring_bytes, config.bus.max_spill_bytes, createRingBuffer, createDoorbell, shards);
  const delta: DeltaShardInit | null = deltaOn
    ? { sequencer: shards + 1, interest: { fossil: allocateInterest(shards), xdelta3: allocateInterest(shards) } } : null;
  const sequencer = delta
    ? await spawnSequencer({ config, shards, index: delta.sequencer, topology, interest: delta.interest, testHooks }, log) : null;
  const counters = ConnectionCounters.allocate(slotCapacity(config.apps.length, config.app_manager.driver !== 'array'));
  const ratelimit = allocateRateLimiterMemory(config);
  const interest = allocateInterest(shards);
  const clusterUp = new SharedArrayBuffer(8);
  // the buckets the node subscribes (adapter/buckets.ts), read by the shards
  const buckets = config.adapter.driver === 'local' ? null : new SharedArrayBuffer(4 * config.adapter.buckets);
  // The primary is the last endpoint of the mesh: it publishes into the shards (by
  // interest) and receives what they hand it (channels/bridge.ts).
  const bus = new Bus(shards, topology);
  const endpoint = createPrimaryEndpoint({
    bus, interest, shards, log,
    cache: config.cache.driver === 'none' ? null : new CacheChannels(bus, shards, config.channel_limits.cache_ttl),
    // with cluster_coordination remote events reach the sequencer as records (delta/coord.ts)
    delta: delta && !coordinated(config) ? deltaRoute(delta.sequencer, {
      fossil: new Interest(delta.interest.fossil, shards, -1),
      xdelta3: new Interest(delta.interest.xdelta3, shards, -1),
    }) : null,
  });
  const control: Started['control'] = { handler: null, renewed: null };
  bus.start({
    onPublish: (f) => endpoint.received(f),
    onControl: (msg, from) => {
      if (msg.type === 'webhook' || msg.type === 'webhook_sync') return primaryControl(msg, webhooks, log);
      if (control.handler) control.handler(msg, from);
      else log.warn({ type: msg.type }, 'primary: unexpected control message from a shard');
    },
    onError: (err, type) => log.error({ err, frameType: type }, 'primary: bus frame handler failed'),
    // a crashed shard's webhook reports still in its ring to the primary
    onOrphanControl: (msg) => primaryControl(msg, webhooks, log),
  });
  const usedPrefixes = new Set<string>();
  while (usedPrefixes.size < shards) usedPrefixes.add(String(randomInt(100_000_000, 999_999_999)));
  const ids = [...usedPrefixes];
  const base: ShardBase = { config, apps: [...config.apps], appSlots: initialSlots(config.apps), shards, topology, counters, ratelimit, interest, buckets, clusterUp, appStoreUp, bridge, port, testHooks, delta, tracing };
  const handles: ShardHandle[] = [];
  const readies: Promise<ShardEvent>[] = [];
  for (let s = 0; s < shards; s++) {
    const { handle, ready } = spawnShard({ ...base, shardId: s, socketIdPrefix: ids[s], restoreFrom: null }, log);
    handles.push(handle);
    readies.push(ready);
  }
  const results = await Promise.all(readies);
  if (results.every((r) => r.type === 'ready')) return { bus, endpoint, handles, port, base, prefixes: ids, usedPrefixes, control, sequencer };
  await stopShards(handles, 2000, log);
  await sequencer?.stop(2000);
  bus.stop();
  return null;
}

/** A shard that does not confirm a reload's apps within this is logged; the reload goes on without it. */
const RELOAD_APPLY_TIMEOUT_MS = 5000;
const isApplied = (e: ShardEvent): e is AppsApplied => e.type === 'apps_applied';

/** What shards send the primary over the bus: webhook reports (webhooks/shard.ts). */
function primaryControl(msg: ControlMsg, webhooks: WebhookService | null, log: Logger): void {
  if ((msg.type === 'webhook' || msg.type === 'webhook_sync') && webhooks) return webhooks.handle(msg);
  log.warn({ type: msg.type }, 'primary: unexpected control message from a shard');
}

/** Starts every shard on the configured port (0: a free one is picked) and resolves when all listen. */
export async function start(config: Config, log: Logger = createLogger(config.log), opts: StartOptions = {}): Promise<RunningServer> {
  assertSupported(config);
  // OpenTelemetry traces: the tracing keys and the OTEL_* variables (a ConfigError on a bad one)
  const tracingOn = tracingSettings(config.tracing, process.env);
  // A configured Redis for the rate limiter must answer now (RateLimiterUnavailable if not).
  await checkRateLimiter(config);
  // So must the Redis of cache.driver redis / redis-cluster (CacheUnavailable if not).
  await checkSharedCache(config);
  /** The primary's own metrics (e.g. shard_restarts_total); null when metrics are off. */
  const primaryMetrics = config.metrics.enabled ? new PromMetrics(config.metrics.prefix) : null;
  // A database app store must answer now (AppStoreUnavailable naming it if not); its apps join the configured ones.
  const appSync = await AppSync.open(config, log, primaryMetrics ?? noMetrics);
  if (appSync) config = deepFreeze({ ...config, apps: appSync.apps() });
  // Webhooks are sent from this thread; a redis queue must answer now (WebhookQueueUnavailable if not).
  const resources = new StartedResources(log);
  if (appSync) resources.add('app store', () => appSync.stop());
  if (tracingOn) {
    startTracing(tracingOn, 'primary');
    resources.add('tracing', stopTracing);
  }
  const webhooks = appsWithWebhooks(config) || appSync !== null ? await startWebhookService(config, log, primaryMetrics ?? noMetrics) : null;
  if (webhooks) resources.add('webhook service', () => webhooks.stop(0));
  /** A step that failed: everything started before it stops, then the error goes up. */
  const rollback = async (err: unknown): Promise<never> => {
    await resources.closeAll();
    throw err;
  };
  const attempts = config.port === 0 ? 5 : 1;
  // Test hooks (e.g. crashing a shard on demand) exist only when the environment asks at start.
  const testHooks = process.env.RINGCAST_TEST_HOOKS === '1';
  // uWS's listen_unix would unlink a live socket of another server: check the path first.
  const unixProblem = config.unix_socket.enabled ? await prepareUnixSocket(config.unix_socket) : null;
  if (unixProblem) return rollback(new ListenError(unixProblem));
  for (let i = 0; i < attempts; i++) {
    const port = config.port === 0 ? await freePort(config.host) : config.port;
    // A cluster adapter needs every local publish on the primary (channels/bridge.ts).
    const transport = createTransport(config);
    const started = await startOnce(config, port, testHooks, opts.bridge === true || transport !== null, log, webhooks, appSync?.up ?? new SharedArrayBuffer(4), tracingOn)
      .catch(async (err: unknown) => {
        await transport?.close().catch(() => undefined);
        return rollback(err);
      });
    if (!started) {
      await transport?.close().catch(() => undefined);
      continue;
    }
    resources.add('shards', async () => {
      await stopShards(started.handles, config.shutdown_grace_period, log);
      await started.sequencer?.stop(config.shutdown_grace_period);
      started.bus.stop();
    });
    let cluster: ClusterNode | null = null;
    let deltaLocal: DeltaLocal | null = null; // cluster_coordination (delta/coord.ts)
    if (transport) {
      resources.add('cluster transport', () => transport.close());
      const pc = await startPrimaryCluster({
        config, transport, bus: started.bus, bridge: started.endpoint, base: started.base, log, metrics: primaryMetrics ?? noMetrics, webhooks,
      }).catch(rollback);
      cluster = pc.node;
      if (appSync) {
        const node = pc.node;
        // an app changed through this node's app API: every other node reads the store now, not after its TTL
        appSync.announce = () => void node.broadcast({ t: 'apps', node: node.id });
        node.onPeerMsg((msg) => {
          if (msg.t === 'apps') void appSync.refresh();
        });
      }
      resources.add('cluster node', () => pc.node.stop());
      started.control.handler = pc.control;
      started.control.renewed = pc.renewed;
      deltaLocal = pc.deltaLocal;
    }
    let metricsServer: MetricsServer | null = null;
    if (primaryMetrics) {
      const m = config.metrics;
      metricsServer = await startMetricsServer({
        host: m.host, port: m.port, prefix: m.prefix, log, token: m.token,
        onDrain: () => void server.stop(), // POST /drain: as on SIGTERM
        primary: primaryMetrics,
        // the shards, then the delta sequencer (delta_pool_refused_total)
        shards: () => [...started.handles.map((h) => h.worker), ...(started.sequencer ? [started.sequencer.worker] : [])],
      }).catch((err: unknown) => rollback(new ListenError(`could not listen on ${m.host}:${m.port} for metrics: ${(err as Error).message}`)));
      resources.add('metrics listener', () => metricsServer?.close());
      log.info({ host: m.host, port: metricsServer.port }, 'metrics listening on /metrics');
    }
    const reloader = createReloader(config, started.base, (cmd) => askEvery(started.handles, cmd, isApplied, RELOAD_APPLY_TIMEOUT_MS), slotCapacity(config.apps.length, appSync !== null), log);
    appSync?.start((apps) => reloader.reload({ ...reloader.current(), apps }));
    let consoleServer: ConsoleServer | null = null;
    if (config.console.enabled) {
      const cc = config.console;
      consoleServer = await openConsole({ config, base: started.base, bus: started.bus, handles: () => started.handles, reloader, log, metrics: primaryMetrics ?? noMetrics, webhooks, appStore: appSync, endpoint: withDeltaLocal(started.endpoint, deltaLocal) })
        .catch((err: unknown) => rollback(new ListenError(`could not start the console on ${cc.host}:${cc.port}: ${(err as Error).message}`)));
      resources.add('console', () => consoleServer?.close());
      log.info({ host: cc.host, port: consoleServer.port }, 'live console listening');
    }
    let redirect: RedirectServer | null = null;
    if (config.ssl.redirect_http) {
      redirect = await startRedirectServer(config, port)
        .catch((err: unknown) => rollback(new ListenError(`could not listen on ${config.host}:${config.ssl.http_port} for the HTTP→HTTPS redirect: ${(err as Error).message}`)));
    }
    log.info({ ...startupSummary(config, { port, metricsPort: metricsServer?.port ?? null, redirectPort: redirect?.port ?? null }), node: cluster?.id }, 'ringcast listening');
    const supervisor = superviseShards(started, log, primaryMetrics ?? noMetrics);
    let stopping: Promise<void> | null = null;
    let markStopped!: () => void;
    const stopped = new Promise<void>((resolve) => { markStopped = resolve; });
    const server: RunningServer = {
      port,
      metricsPort: metricsServer?.port ?? null,
      consolePort: consoleServer?.port ?? null,
      redirectPort: redirect?.port ?? null,
      get config() { return reloader.current(); },
      reload: (next) => reloader.reload(appSync ? appSync.withStored(next) : next),
      appStore: appSync,
      bridge: opts.bridge ? started.endpoint : null,
      cluster,
      stopped,
      testPauseBus(shard: number, ms: number) {
        if (testHooks && shard === started.handles.length) {
          started.bus.pauseDraining(ms);
          return Promise.resolve({ socketIdPrefix: '' });
        }
        const seq = started.sequencer;
        if (testHooks && seq && shard === seq.index) {
          return seq.testPauseBus(ms, 10_000).then((ok) => {
            if (!ok) throw new Error('the delta sequencer did not pause its bus');
            return { socketIdPrefix: '' };
          });
        }
        const h = started.handles[shard];
        if (!testHooks || !h) {
          return Promise.reject(new Error(!testHooks ? 'test hooks are off: set RINGCAST_TEST_HOOKS=1 before start()' : `no shard ${shard}`));
        }
        return new Promise<{ socketIdPrefix: string }>((resolve) => {
          const onMessage = (e: ShardEvent) => {
            if (e.type !== 'test_bus_paused') return;
            h.worker.off('message', onMessage);
            resolve({ socketIdPrefix: e.socketIdPrefix });
          };
          h.worker.on('message', onMessage);
          const cmd: PrimaryCommand = { type: 'test_pause_bus', ms };
          h.worker.postMessage(cmd);
        });
      },
      testGc() {
        const gc = (globalThis as { gc?: () => void }).gc;
        if (!testHooks || !gc) return Promise.reject(new Error('testGc needs RINGCAST_TEST_HOOKS=1 and node --expose-gc'));
        gc();
        const primary = heapFigures();
        return Promise.all(started.handles.map((h) => new Promise<HeapFigures>((resolve) => {
          const onMessage = (e: ShardEvent) => {
            if (e.type !== 'test_gc_done') return;
            h.worker.off('message', onMessage);
            resolve(e.heap);
          };
          h.worker.on('message', onMessage);
          const cmd: PrimaryCommand = { type: 'test_gc' };
          h.worker.postMessage(cmd);
        }))).then((shards) => ({ primary, shards }));
      },
      stop() {
        const until = Date.now() + config.shutdown_grace_period;
        // the paced drain first, while this node is still in the cluster: each client that
        // leaves is seen leaving by the other nodes, once (shard/drain.ts)
        stopping ??= drainShards(started.handles, drainPlan(config.shutdown_grace_period, config.shutdown_unready_delay, config.shutdown_drain_window))
          .then(() => Promise.all([metricsServer?.close(), consoleServer?.close(), redirect?.close()]))
          .then(() => cluster?.stop()) // other nodes forget this one now (`bye`)
          .then(() => supervisor.stop()) // no restart from here on
          .then(() => stopShards(started.handles, config.shutdown_grace_period, log))
          .then(() => supervisor.drained()) // crashed shards still closing their last sockets
          .then(() => started.sequencer?.stop(config.shutdown_grace_period))
          .then(() => {
            started.bus.stop();
            if (config.unix_socket.enabled) removeUnixSocket(config.unix_socket);
            // the shards' last reports are in: send what is queued within what is left of the grace period
            return webhooks?.stop(Math.max(0, until - Date.now()));
          })
          .then(() => stopTracing()) // the primary's spans (webhooks, adapter) still queued
          .then(() => {
            log.info('ringcast stopped');
            markStopped();
          });
        return stopping;
      },
    };
    if (testHooks) {
      server.testCrashShard = (shard, how = 'timer') => supervisor.testCrash(shard, how);
      server.testShardPrefixes = () => [...started.prefixes];
    }
    return server;
  }
  return rollback(new ListenError(`could not listen on ${config.host}:${config.port}`));
}
