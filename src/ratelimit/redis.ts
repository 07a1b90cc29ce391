// The `redis` driver: one Redis (or a Sentinel-managed master) shared by every node.
// The limiting itself is in scripted.ts; this file only builds the client (redis/client.ts).

import type { Logger } from 'pino';
import type { RedisConfig } from '../config/types';
import { redisClient, redisWhere } from '../redis/client';
import { COMMAND_TIMEOUT_MS, ScriptedRateLimiter } from './scripted';

export class RedisRateLimiter extends ScriptedRateLimiter {
  constructor(cfg: RedisConfig, log?: Logger) {
    const client = redisClient(cfg, { name: 'ratelimit', queue: false, commandTimeoutMs: COMMAND_TIMEOUT_MS });
    super('redis', client, cfg.key_prefix, redisWhere(cfg), log);
  }
}
