// Picks the cluster transport from config (adapter.driver) and the subject prefix its
// nodes share. `local` has none: the process is the whole server.

import type { Config } from '../config/types';
import { createNatsTransport } from './nats';
import { createRedisClusterTransport, createRedisTransport } from './redis';
import type { Transport } from './transport';

export { newNodeId, startClusterNode, type ClusterNode } from './cluster';
export { AdapterUnavailable, type Transport } from './transport';

/** ms the primary waits for the backend at startup before it refuses to start. */
export const ADAPTER_CONNECT_TIMEOUT_MS = 5000;

export type AdapterConfig = Pick<Config, 'adapter' | 'database'>;

/** null for the local adapter. */
export function createTransport(config: AdapterConfig): Transport | null {
  switch (config.adapter.driver) {
    case 'local':
      return null;
    case 'redis':
      return createRedisTransport(config.database.redis);
    case 'redis-cluster':
      return createRedisClusterTransport(config.database.redis_cluster);
    case 'nats':
      return createNatsTransport(config.adapter.nats);
  }
}

/** Subjects are `<prefix>.pub`, `<prefix>.ctl`, `<prefix>.node.<id>`: nodes sharing a prefix form one cluster. */
export function subjectPrefix(config: AdapterConfig): string {
  switch (config.adapter.driver) {
    case 'nats':
      return config.adapter.nats.prefix;
    case 'redis-cluster':
      // one hash tag: every subject in one slot, so sharded pub/sub keeps one order
      return `{${config.database.redis_cluster.key_prefix}ringcast}`;
    default:
      return `${config.database.redis.key_prefix}ringcast`;
  }
}

/**
 * The subject of bucket b (buckets.ts): `<prefix>.b.<b>`; with Redis Cluster each bucket
 * has a hash tag of its own, `{<key_prefix>ringcast.b.<b>}`, so the buckets spread over
 * the slots and their masters share the publishes (each bucket in one slot: one order).
 */
export function bucketSubject(config: AdapterConfig): (b: number) => string {
  if (config.adapter.driver === 'redis-cluster') {
    const tag = `${config.database.redis_cluster.key_prefix}ringcast.b.`;
    return (b) => `{${tag}${b}}`;
  }
  const prefix = subjectPrefix(config);
  return (b) => `${prefix}.b.${b}`;
}
