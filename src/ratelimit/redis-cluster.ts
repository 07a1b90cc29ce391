// The `redis-cluster` driver: a Redis Cluster shared by every node. Each limiter key is
// hash-tagged (`<prefix>ratelimit:{api:<app>}`), and each script touches one key, so a
// script always runs on the one master owning that slot. The limiting itself is in
// scripted.ts; this file only builds the client.

import { Cluster } from 'ioredis';
import type { Logger } from 'pino';
import type { Config } from '../config/types';
import { COMMAND_TIMEOUT_MS, CONNECT_TIMEOUT_MS, retryDelay, ScriptedRateLimiter } from './scripted';

export class RedisClusterRateLimiter extends ScriptedRateLimiter {
  constructor(cfg: Config['database']['redis_cluster'], log?: Logger) {
    const client = new Cluster(cfg.nodes, {
      enableOfflineQueue: false,
      clusterRetryStrategy: retryDelay,
      // Without this a restarted master is only found again through MOVED/slot refresh.
      clusterNodeRetryStrategy: retryDelay,
      slotsRefreshTimeout: CONNECT_TIMEOUT_MS,
      redisOptions: {
        username: cfg.username ?? undefined,
        password: cfg.password ?? undefined,
        commandTimeout: COMMAND_TIMEOUT_MS,
        connectTimeout: CONNECT_TIMEOUT_MS,
        maxRetriesPerRequest: 0,
        connectionName: 'ringcast-ratelimit',
      },
    });
    super('redis-cluster', client, cfg.key_prefix, `cluster ${cfg.nodes.map((n) => `${n.host}:${n.port}`).join(', ')}`, log);
  }
}
