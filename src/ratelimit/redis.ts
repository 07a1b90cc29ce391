// The `redis` driver: one Redis (or a Sentinel-managed master) shared by every node.
// The limiting itself is in scripted.ts; this file only builds the client.

import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { RedisConfig } from '../config/types';
import { redisTarget, redisWhere } from '../config/redis';
import { COMMAND_TIMEOUT_MS, CONNECT_TIMEOUT_MS, retryDelay, ScriptedRateLimiter } from './scripted';

export class RedisRateLimiter extends ScriptedRateLimiter {
  constructor(cfg: RedisConfig, log?: Logger) {
    const client = new Redis({
      ...redisTarget(cfg),
      enableOfflineQueue: false,
      commandTimeout: COMMAND_TIMEOUT_MS,
      connectTimeout: CONNECT_TIMEOUT_MS,
      maxRetriesPerRequest: 0,
      retryStrategy: retryDelay,
      connectionName: 'ringcast-ratelimit',
    });
    super('redis', client, cfg.key_prefix, redisWhere(cfg), log);
  }
}
