import type { MessagePort } from 'node:worker_threads';
import { getHeapSpaceStatistics, getHeapStatistics } from 'node:v8';
import type { BusTopology } from '../bus/topology';
import type { AppConfig, Config } from '../config/types';
import type { TapCommand, TapReport } from '../console/tap';
import type { MetricsJson } from '../metrics/registry';
import type { AppsApplied, AppsCommand } from '../reload/plan';
import type { DeltaShardInit } from '../delta/init';
import type { TracingSettings } from '../tracing/settings';

/** workerData of a shard thread. */
export interface ShardInit {
  /**
   * The config the process started with. Its `apps` fix the memory rate limiter's layout
   * (ratelimit/memory.ts) for the life of the process; the apps in force are `apps`.
   */
  config: Config;
  /** The apps in force (config.apps until a reload changes them: reload/plan.ts) and their counter slots. */
  apps: AppConfig[];
  appSlots: Record<string, number>;
  shardId: number;
  shards: number;
  topology: BusTopology;
  /** ConnectionCounters memory (per app: this process's connections, and the other nodes'). */
  counters: SharedArrayBuffer;
  /**
   * Int32[2], written by the primary (adapter.driver not local): [0] 1 while the cluster
   * adapter's backend is reachable; [1] 1 while its publisher's backlog is past half its cap
   * (API publishes are answered 503 then: primary/cluster.ts).
   */
  clusterUp: SharedArrayBuffer;
  /** Int32[1], written by the primary (apps/sync.ts): 1 while the database app store's last read succeeded (unused with app_manager.driver array). */
  appStoreUp: SharedArrayBuffer;
  /** Interest routing table (channels/interest.ts): which shards have subscribers of a channel. */
  interest: SharedArrayBuffer;
  /** Int32[adapter.buckets], written by the primary: 1 while the node subscribes the bucket (adapter/buckets.ts); null without a cluster adapter. */
  buckets: SharedArrayBuffer | null;
  /**
   * The primary bridges this process to others (a cluster adapter, or start()'s `bridge`
   * option): local API and client events are also written to the primary (thread index
   * `shards`) by the pipeline's adapter-out stage (channels/bridge.ts).
   */
  bridge: boolean;
  /** The memory rate limiter's process-wide state (ratelimit/memory.ts); null for other drivers. */
  ratelimit: SharedArrayBuffer | null;
  port: number;
  /** OpenTelemetry traces (tracing/settings.ts): each shard exports its own spans; null: off. */
  tracing: TracingSettings | null;
  /** Digits that start every socket_id of this shard (unique per shard). */
  socketIdPrefix: string;
  /**
   * null at the first start. For the replacement of a crashed shard: the surviving shards
   * whose `restore` messages rebuild this shard's channel records (channels/rebuild.ts).
   */
  restoreFrom: number[] | null;
  /** Delta compression: the sequencer's thread index and the delta interest tables; null when off. */
  delta: DeltaShardInit | null;
  /** RINGCAST_TEST_HOOKS=1 at start: the `test_crash` command is honoured. */
  testHooks: boolean;
  /** Where this shard's log lines go (the primary writes them: log.ts); set by spawnShard. */
  logPort?: MessagePort;
}

/** Shard → primary lifecycle messages (postMessage; rare, so not on the rings). */
export type ShardEvent =
  | { type: 'ready'; port: number }
  | { type: 'listen_failed'; port: number }
  | { type: 'stopped' }
  /** Answer to `drain`: every client got its 4200 (shard/drain.ts). */
  | { type: 'drained' }
  /**
   * The shard threw (uncaught exception / unhandled rejection): its listener and every
   * client socket are closed, its bus is stopped and it ends by itself. The primary
   * starts a replacement (main.ts).
   */
  | { type: 'crashed'; error: string }
  /** Answer to `rewire`: this shard now talks to the replacement and has sent its `restore` messages. */
  | { type: 'rewired'; shard: number }
  /** A replacement shard has rebuilt the records of the channels it owns. */
  | { type: 'restored'; channels: number; members: number; removed: number; added: number; timedOut: boolean }
  /** Answer to a `metrics` command: this shard's registry (PromMetrics.json(); [] when metrics are off). */
  | { type: 'metrics'; req: number; metrics: MetricsJson }
  /** Answer to `apps` (reload/plan.ts). */
  | AppsApplied
  /** Live console: events of the watched apps (console/tap.ts). */
  | TapReport
  /** Answer to `test_pause_bus`: the pause is in force. */
  | { type: 'test_bus_paused'; socketIdPrefix: string }
  /** Answer to `test_gc`. */
  | { type: 'test_gc_done'; heap: HeapFigures };

/** Primary → shard lifecycle messages. */
export type PrimaryCommand =
  | { type: 'shutdown' }
  /** The paced drain before a shutdown (shard/drain.ts): 503 on /up, then the clients' 4200 over windowMs; answer `drained`. */
  | { type: 'drain'; unreadyMs: number; windowMs: number }
  /** Config reload (reload/shard.ts applies it); answer `apps_applied`. */
  | AppsCommand
  /** Live console: the app ids watched now (console/tap.ts). */
  | TapCommand
  /** A /metrics scrape: answer with a `metrics` event carrying the same req. */
  | { type: 'metrics'; req: number }
  /**
   * Shard `shard` crashed: talk to its replacement over these fresh rings (toPeer: this
   * shard → it, fromPeer: it → this shard) and doorbell, drop its records, re-announce the
   * local subscriptions of the channels it owns, answer `rewired`.
   */
  | { type: 'rewire'; shard: number; toPeer: SharedArrayBuffer; fromPeer: SharedArrayBuffer; doorbell: SharedArrayBuffer }
  /**
   * Tests only (honoured when ShardInit.testHooks): throw a real uncaught exception from a
   * timer, or from the uWS callback of the next WebSocket message this shard receives.
   */
  | { type: 'test_crash'; how: 'timer' | 'ws_message' }
  /** Tests only (honoured when ShardInit.testHooks): stop reading the rings for ms (Bus.pauseDraining). */
  | { type: 'test_pause_bus'; ms: number }
  /** Tests only (honoured when ShardInit.testHooks and node runs with --expose-gc): a full GC now (soak RSS checks). */
  | { type: 'test_gc' };

/**
 * A thread's V8 heap after a full GC (test hook `testGc`): live, committed (all spaces),
 * the new space's committed size, malloc'd by V8, external.
 */
export interface HeapFigures { used: number; committed: number; newSpace: number; malloced: number; external: number }

/** This thread's heap figures, now. */
export function heapFigures(): HeapFigures {
  const s = getHeapStatistics();
  const newSpace = getHeapSpaceStatistics().find((x) => x.space_name === 'new_space')?.space_size ?? 0;
  return { used: s.used_heap_size, committed: s.total_heap_size, newSpace, malloced: s.malloced_memory, external: s.external_memory };
}
