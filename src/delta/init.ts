// What the primary and the delta sequencer thread tell each other (delta/thread.ts).
import type { BusTopology } from '../bus/topology';
import type { Config } from '../config/types';
import type { MetricsJson } from '../metrics/registry';
import type { Algo } from './settings';

export interface SequencerInit {
  config: Config;
  shards: number;
  /** Its thread index in the mesh: shards + 1. */
  index: number;
  topology: BusTopology;
  /** Delta interest tables (channels/interest.ts layout), one per algorithm. */
  interest: Record<Algo, SharedArrayBuffer>;
  /** RINGCAST_TEST_HOOKS=1 at start: the `test_pause_bus` command is honoured. */
  testHooks: boolean;
}

/** What a shard needs to route to the sequencer and keep its delta interest bits. */
export interface DeltaShardInit {
  sequencer: number;
  interest: Record<Algo, SharedArrayBuffer>;
}

export type SequencerCommand =
  | { type: 'shutdown' }
  /** A /metrics scrape: answered by a `metrics` event with the same req. */
  | { type: 'metrics'; req: number }
  /** Shard `shard` was replaced: talk to it over these fresh rings (as a shard's `rewire`). */
  | { type: 'rewire'; shard: number; toPeer: SharedArrayBuffer; fromPeer: SharedArrayBuffer; doorbell: SharedArrayBuffer }
  /** Tests only (honoured when SequencerInit.testHooks): stop reading the rings for ms (Bus.pauseDraining). */
  | { type: 'test_pause_bus'; ms: number };

export type SequencerEvent =
  | { type: 'ready' }
  | { type: 'failed'; error: string }
  | { type: 'rewired'; shard: number }
  | { type: 'stopped' }
  /** Answer to `test_pause_bus`: the pause is in force. */
  | { type: 'test_bus_paused' }
  | { type: 'metrics'; req: number; metrics: MetricsJson };
