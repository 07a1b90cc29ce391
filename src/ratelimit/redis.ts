// The `redis` driver: one Redis (or a Sentinel-managed master) shared by every node.
// The limiting itself is in scripted.ts; this file only builds the client.

import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { RedisConfig } from '../config/types';
import { COMMAND_TIMEOUT_MS, CONNECT_TIMEOUT_MS, retryDelay, ScriptedRateLimiter } from './scripted';

export class RedisRateLimiter extends ScriptedRateLimiter {
  constructor(cfg: RedisConfig, log?: Logger) {
    const sentinel = cfg.sentinels.length > 0;
    const client = new Redis({
      ...(sentinel
        ? { sentinels: cfg.sentinels, name: cfg.name, sentinelPassword: cfg.sentinel_password ?? undefined }
        : { host: cfg.host, port: cfg.port }),
      username: cfg.username ?? undefined,
      password: cfg.password ?? undefined,
      db: cfg.db,
      enableOfflineQueue: false,
      commandTimeout: COMMAND_TIMEOUT_MS,
      connectTimeout: CONNECT_TIMEOUT_MS,
      maxRetriesPerRequest: 0,
      retryStrategy: retryDelay,
      connectionName: 'ringcast-ratelimit',
    });
    const where = sentinel
      ? `sentinel master ${cfg.name} (${cfg.sentinels.map((s) => `${s.host}:${s.port}`).join(', ')})`
      : `${cfg.host}:${cfg.port}`;
    super('redis', client, cfg.key_prefix, where, log);
  }
}
