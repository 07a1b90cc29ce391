// Primary thread: config → rings → shards. It never touches a client socket.

import { randomInt } from 'node:crypto';
import type { Logger } from 'pino';
import { createTopology, type BusTopology } from './bus/topology';
import { createDoorbell } from './bus/doorbell';
import { createRingBuffer } from './bus/ring';
import { Bus } from './bus/bus';
import { createPrimaryEndpoint, type Bridge, type PrimaryEndpoint } from './channels/bridge';
import { ConnectionCounters } from './channels/counters';
import { allocateInterest, Interest } from './channels/interest';
import { assertSupported } from './config/support';
import type { Config } from './config/types';
import { createLogger } from './log';
import { allocateRateLimiterMemory, checkRateLimiter } from './ratelimit';
import { PromMetrics } from './metrics/registry';
import { startMetricsServer, type MetricsServer } from './metrics/server';
import { noMetrics, type MetricsSink } from './metrics/types';
import { heapFigures, type HeapFigures, type PrimaryCommand, type ShardEvent, type ShardInit } from './shard/init';
import { freePort, spawnShard, stopShards, type ShardHandle } from './shard/spawn';
import { spawnSequencer, type SequencerHandle } from './delta/spawn';
import type { DeltaShardInit } from './delta/init';

// Ring size and spill bound: config bus.ring_bytes (unset: derived from the thread count so
// that the mesh stays ≤ 4 MiB × threads, bus/topology.ts) and bus.max_spill_bytes (64 MiB
// per ring before the API answers 503).

export interface RunningServer {
  readonly port: number;
  /** Port of the /metrics listener (metrics.port 0 = ephemeral); null when metrics are off. */
  readonly metricsPort: number | null;
  readonly config: Config;
  /** Closes every client with 4200 and ends every shard. Idempotent. */
  stop(): Promise<void>;
  /**
   * Tests only (RINGCAST_TEST_HOOKS=1 when start() ran, else it rejects): shard `shard`
   * stops reading its rings for `ms` (Bus.pauseDraining). Resolves once the pause is in
   * force, with the socket_id prefix of that shard (to tell which clients it holds).
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
}

export interface StartOptions {
  /** Shards hand every local API and client event to the primary (RunningServer.bridge). */
  bridge?: boolean;
}

export class ListenError extends Error {
  readonly code = 'RC_ERR_LISTEN';
}

/** What every shard of this server shares; a replacement shard starts with the same (its rings renewed). */
type ShardBase = Omit<ShardInit, 'shardId' | 'socketIdPrefix' | 'restoreFrom'>;

interface Started {
  /** The primary's end of the mesh (thread index = shards). */
  bus: Bus;
  endpoint: PrimaryEndpoint;
  /** Current shard thread per index (a restart replaces its entry). */
  handles: ShardHandle[];
  port: number;
  base: ShardBase;
  /** Current socket_id prefix per index; `usedPrefixes` holds every one ever handed out. */
  prefixes: string[];
  usedPrefixes: Set<string>;
  /** The delta sequencer (thread shards + 1); null with delta_compression.enabled false. */
  sequencer: SequencerHandle | null;
}

async function startOnce(config: Config, port: number, testHooks: boolean, bridge: boolean, log: Logger): Promise<Started | null> {
  const shards = config.workers;
  // Threads of the mesh: the shards, the primary (index shards), the delta sequencer (shards + 1).
  const deltaOn = config.delta_compression.enabled;
  const threads = shards + (deltaOn ? 2 : 1);
  const topology: BusTopology = createTopology(threads, config.bus.ring_bytes, config.bus.max_spill_bytes, createRingBuffer, createDoorbell, shards);
  const delta: DeltaShardInit | null = deltaOn
    ? { sequencer: shards + 1, interest: { fossil: allocateInterest(shards), xdelta3: allocateInterest(shards) } } : null;
  const sequencer = delta
    ? await spawnSequencer({ config, shards, index: delta.sequencer, topology, interest: delta.interest }, log) : null;
  const counters = ConnectionCounters.allocate(config.apps.length);
  const ratelimit = allocateRateLimiterMemory(config);
  const interest = allocateInterest(shards);
  // The primary is the last endpoint of the mesh: it publishes into the shards (by
  // interest) and receives what they hand it (channels/bridge.ts).
  const bus = new Bus(shards, topology);
  const endpoint = createPrimaryEndpoint({ bus, interest, shards, log });
  bus.start({
    onPublish: (f) => endpoint.received(f),
    onControl: (msg) => log.warn({ type: msg.type }, 'primary: unexpected control message from a shard'),
    onError: (err, type) => log.error({ err, frameType: type }, 'primary: bus frame handler failed'),
  });
  const usedPrefixes = new Set<string>();
  while (usedPrefixes.size < shards) usedPrefixes.add(String(randomInt(100_000_000, 999_999_999)));
  const ids = [...usedPrefixes];
  const base: ShardBase = { config, shards, topology, counters, ratelimit, interest, bridge, port, testHooks, delta };
  const handles: ShardHandle[] = [];
  const readies: Promise<ShardEvent>[] = [];
  for (let s = 0; s < shards; s++) {
    const { handle, ready } = spawnShard({ ...base, shardId: s, socketIdPrefix: ids[s], restoreFrom: null }, log);
    handles.push(handle);
    readies.push(ready);
  }
  const results = await Promise.all(readies);
  if (results.every((r) => r.type === 'ready')) return { bus, endpoint, handles, port, base, prefixes: ids, usedPrefixes, sequencer };
  await stopShards(handles, 2000, log);
  await sequencer?.stop(2000);
  bus.stop();
  return null;
}

// ── Shard restart (docs/architecture.md, "Shard failure") ──────────────────────
//
// A shard that throws closes its listener and its sockets and posts `crashed` (shard/
// failover.ts); it is never terminated (a thread holding uWS sockets must end by itself).
// The primary then, one restart at a time:
//  1. allocates fresh rings to and from that index and a fresh doorbell (the old ones may
//     hold half-read state); frames still in flight to the dead thread are dropped;
//  2. sends `rewire` to every surviving shard: it swaps its bus ends, drops the dead shard's
//     connections from the records it owns (member_removed / vacated once), re-announces
//     its subscriptions of the channels the dead shard owned, answers `rewired`;
//  3. starts the replacement with the same index on the same port (SO_REUSEPORT; the old
//     listener is already closed when `crashed` arrives) and a new socket_id prefix; it
//     rebuilds its records from the `restore` messages waiting in its rings and posts
//     `restored`.
// The primary's own bus end is rewired in step 2 as well, and the dead shard's interest
// bits are cleared (its replacement starts with no subscription).

/** How long a survivor may take to answer `rewire`, and a replacement to rebuild, before the restart goes on. */
const REWIRE_TIMEOUT_MS = 2000;
const RESTORE_TIMEOUT_MS = 5000;
/** A replacement that cannot listen is retried this many times, 1 s apart; then the index stays down. */
const RESTART_ATTEMPTS = 5;

interface Supervisor {
  /** No more restarts; resolves when a restart under way has ended. */
  stop(): Promise<void>;
  /** Resolves when every crashed shard thread has ended. */
  drained(): Promise<void>;
  /** Test hook: see RunningServer.testCrashShard. */
  testCrash(shard: number, how: 'timer' | 'ws_message'): Promise<{ socketIdPrefix: string }>;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The first event of `h` matching pred, or null after ms or when the thread ends. */
function eventOf(h: ShardHandle, pred: (e: ShardEvent) => boolean, ms: number): Promise<ShardEvent | null> {
  return new Promise((resolve) => {
    const on = (e: ShardEvent) => {
      if (pred(e)) done(e);
    };
    const done = (v: ShardEvent | null) => {
      clearTimeout(timer);
      h.worker.off('message', on);
      resolve(v);
    };
    const timer = setTimeout(() => done(null), ms);
    h.worker.on('message', on);
    void h.exited.then(() => done(null));
  });
}

/** Fresh rings to and from thread `i` (every peer, the primary included) and a fresh doorbell. */
function renewRings(topo: BusTopology, i: number, ringBytes: number): void {
  for (let j = 0; j < topo.threads; j++) {
    if (j === i) continue;
    topo.rings[i][j] = createRingBuffer(ringBytes);
    topo.rings[j][i] = createRingBuffer(ringBytes);
  }
  topo.doorbells[i] = createDoorbell();
}

function superviseShards(started: Started, log: Logger, metrics: MetricsSink): Supervisor {
  const { handles, base } = started;
  const topo = base.topology;
  let stopping = false;
  let chain: Promise<void> = Promise.resolve();
  const dying = new Set<ShardHandle>();
  const waiters = new Map<number, { resolve(r: { socketIdPrefix: string }): void; reject(err: Error): void }[]>();
  let recent: number[] = [];

  function settle(i: number, prefix: string | null): void {
    for (const w of waiters.get(i)?.splice(0) ?? []) {
      if (prefix) w.resolve({ socketIdPrefix: prefix });
      else w.reject(new Error(`shard ${i} could not be restarted`));
    }
  }

  function watch(i: number, h: ShardHandle): void {
    let down = false;
    const onDown = (why: string) => {
      if (down || stopping || handles[i] !== h) return;
      down = true;
      dying.add(h);
      void h.exited.then(() => dying.delete(h));
      log.error({ shard: i, why }, 'shard crashed; restarting it');
      chain = chain.then(() => restart(i)).catch((err: unknown) => {
        log.error({ err, shard: i }, 'shard restart failed');
        settle(i, null);
      });
    };
    h.worker.on('message', (e: ShardEvent) => {
      if (e.type === 'crashed') onDown(e.error);
    });
    // A thread that ended without `crashed` (it could not run its handler) has no listener left either.
    void h.exited.then((code) => onDown(`thread exited (code ${code})`));
  }

  async function restart(i: number): Promise<void> {
    // shard_restarts_total: the primary's registry when metrics are on (noMetrics otherwise: the log line is the record).
    metrics.inc('shard_restarts_total');
    const now = Date.now();
    recent = recent.filter((t) => now - t < 60_000);
    recent.push(now);
    if (recent.length > 3) await sleep(Math.min(5000, 250 * 2 ** (recent.length - 4))); // a crash loop: back off
    for (let attempt = 1; attempt <= RESTART_ATTEMPTS && !stopping; attempt++) {
      const t0 = Date.now();
      renewRings(topo, i, topo.ringBytes);
      const primary = base.shards; // the primary's thread index
      started.bus.rewire(i, topo.rings[primary][i]!, topo.rings[i][primary]!, topo.doorbells[i]);
      new Interest(base.interest, base.shards, -1).clearShard(i);
      if (base.delta && started.sequencer) {
        for (const t of Object.values(base.delta.interest)) new Interest(t, base.shards, -1).clearShard(i);
        const s = base.delta.sequencer;
        const ok = await started.sequencer.rewire({ type: 'rewire', shard: i, toPeer: topo.rings[s][i]!, fromPeer: topo.rings[i][s]!, doorbell: topo.doorbells[i] }, REWIRE_TIMEOUT_MS);
        if (!ok) log.warn({ shard: i }, 'the delta sequencer did not answer rewire in time');
      }
      const survivors: number[] = [];
      handles.forEach((h, j) => { if (j !== i && !dying.has(h)) survivors.push(j); });
      const acks = await Promise.all(survivors.map((j) => {
        const cmd: PrimaryCommand = { type: 'rewire', shard: i, toPeer: topo.rings[j][i]!, fromPeer: topo.rings[i][j]!, doorbell: topo.doorbells[i] };
        const ack = eventOf(handles[j], (e) => e.type === 'rewired' && e.shard === i, REWIRE_TIMEOUT_MS);
        handles[j].worker.postMessage(cmd);
        return ack;
      }));
      if (acks.some((a) => a === null)) log.warn({ shard: i }, 'a surviving shard did not answer rewire in time; starting the replacement anyway');
      if (stopping) return;
      let prefix: string;
      do prefix = String(randomInt(100_000_000, 999_999_999)); while (started.usedPrefixes.has(prefix));
      started.usedPrefixes.add(prefix);
      const { handle, ready } = spawnShard({ ...base, shardId: i, socketIdPrefix: prefix, restoreFrom: survivors }, log);
      const restored = eventOf(handle, (e) => e.type === 'restored', RESTORE_TIMEOUT_MS);
      const r = await ready;
      if (r.type === 'ready') {
        handles[i] = handle;
        started.prefixes[i] = prefix;
        watch(i, handle);
        const done = await restored;
        log.warn({ shard: i, socketIdPrefix: prefix, ms: Date.now() - t0, rebuild: done }, 'shard restarted');
        settle(i, prefix);
        return;
      }
      log.error({ shard: i, attempt }, 'replacement shard could not listen');
      await handle.exited;
      await sleep(1000);
    }
    if (!stopping) log.fatal({ shard: i }, 'shard could not be restarted: its channels are unavailable until the server restarts');
    settle(i, null);
  }

  handles.forEach((h, i) => watch(i, h));
  return {
    stop() {
      stopping = true;
      return chain;
    },
    async drained() {
      await Promise.all([...dying].map((h) => h.exited));
    },
    testCrash(shard, how) {
      const h = handles[shard];
      if (!h) return Promise.reject(new RangeError(`no shard ${shard}`));
      return new Promise((resolve, reject) => {
        const list = waiters.get(shard) ?? [];
        list.push({ resolve, reject });
        waiters.set(shard, list);
        const cmd: PrimaryCommand = { type: 'test_crash', how };
        h.worker.postMessage(cmd);
      });
    },
  };
}

/** Starts every shard on the configured port (0: a free one is picked) and resolves when all listen. */
export async function start(config: Config, log: Logger = createLogger(config.log, { thread: 'primary' }), opts: StartOptions = {}): Promise<RunningServer> {
  assertSupported(config);
  // A configured Redis for the rate limiter must answer now (RateLimiterUnavailable if not).
  await checkRateLimiter(config);
  /** The primary's own metrics (e.g. shard_restarts_total); null when metrics are off. */
  const primaryMetrics = config.metrics.enabled ? new PromMetrics(config.metrics.prefix) : null;
  const attempts = config.port === 0 ? 5 : 1;
  // Test hooks (e.g. crashing a shard on demand) exist only when the environment asks at start.
  const testHooks = process.env.RINGCAST_TEST_HOOKS === '1';
  for (let i = 0; i < attempts; i++) {
    const port = config.port === 0 ? await freePort(config.host) : config.port;
    const started = await startOnce(config, port, testHooks, opts.bridge === true, log);
    if (!started) continue;
    let metricsServer: MetricsServer | null = null;
    if (primaryMetrics) {
      const m = config.metrics;
      try {
        metricsServer = await startMetricsServer({
          host: m.host, port: m.port, prefix: m.prefix, log,
          primary: primaryMetrics,
          shards: () => started.handles.map((h) => h.worker),
        });
      } catch (err) {
        await stopShards(started.handles, config.shutdown_grace_period, log);
        started.bus.stop();
        throw new ListenError(`could not listen on ${m.host}:${m.port} for metrics: ${(err as Error).message}`);
      }
      log.info({ host: m.host, port: metricsServer.port }, 'metrics listening on /metrics');
    }
    log.info({ host: config.host, port, shards: config.workers }, 'ringcast listening');
    const supervisor = superviseShards(started, log, primaryMetrics ?? noMetrics);
    let stopping: Promise<void> | null = null;
    const server: RunningServer = {
      port,
      metricsPort: metricsServer?.port ?? null,
      config,
      bridge: opts.bridge ? started.endpoint : null,
      testPauseBus(shard: number, ms: number) {
        const h = started.handles[shard];
        if (!testHooks || !h) {
          return Promise.reject(new Error(h ? 'test hooks are off: set RINGCAST_TEST_HOOKS=1 before start()' : `no shard ${shard}`));
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
        stopping ??= Promise.resolve(metricsServer?.close())
          .then(() => supervisor.stop()) // no restart from here on
          .then(() => stopShards(started.handles, config.shutdown_grace_period, log))
          .then(() => supervisor.drained()) // crashed shards still closing their last sockets
          .then(() => started.sequencer?.stop(config.shutdown_grace_period))
          .then(() => {
          started.bus.stop();
          log.info('ringcast stopped');
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
  throw new ListenError(`could not listen on ${config.host}:${config.port}`);
}
