import type { BusTopology } from '../bus/bus';
import type { Config } from '../config/types';

/** workerData of a shard thread. */
export interface ShardInit {
  config: Config;
  shardId: number;
  shards: number;
  topology: BusTopology;
  /** ConnectionCounters memory (one Int32 per app). */
  counters: SharedArrayBuffer;
  port: number;
  /** Digits that start every socket_id of this shard (unique per shard). */
  socketIdPrefix: string;
}

/** Shard → primary lifecycle messages (postMessage; rare, so not on the rings). */
export type ShardEvent =
  | { type: 'ready'; port: number }
  | { type: 'listen_failed'; port: number }
  | { type: 'stopped' };

/** Primary → shard lifecycle messages. */
export type PrimaryCommand = { type: 'shutdown' };
