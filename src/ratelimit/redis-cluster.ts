// The `redis-cluster` driver: a Redis Cluster shared by every node. Each limiter key is
// hash-tagged (`<prefix>ratelimit:{api:<app>}`), and each script touches one key, so a
// script always runs on the one master owning that slot. The limiting itself is in
// scripted.ts; this file only builds the client (redis/client.ts).

import type { Logger } from 'pino';
import { redisClusterClient, redisClusterWhere, type RedisClusterConfig } from '../redis/client';
import { COMMAND_TIMEOUT_MS, ScriptedRateLimiter } from './scripted';

export class RedisClusterRateLimiter extends ScriptedRateLimiter {
  constructor(cfg: RedisClusterConfig, log?: Logger) {
    const client = redisClusterClient(cfg, { name: 'ratelimit', queue: false, commandTimeoutMs: COMMAND_TIMEOUT_MS });
    super('redis-cluster', client, cfg.key_prefix, redisClusterWhere(cfg), log);
  }
}
