// Where a Redis client connects, from `database.redis`: one server, or the master a set of
// Sentinels names. The part of ioredis' options every Redis user of ringcast shares (the
// cluster transport, the rate limiter, the webhook queue); each adds its own timeouts,
// retries and queueing.

import type { RedisConfig } from './types';

export interface RedisTarget {
  host?: string;
  port?: number;
  sentinels?: { host: string; port: number }[];
  name?: string;
  sentinelPassword?: string;
  username?: string;
  password?: string;
  db: number;
}

export function redisTarget(cfg: RedisConfig): RedisTarget {
  return {
    ...(cfg.sentinels.length > 0
      ? { sentinels: cfg.sentinels, name: cfg.name, sentinelPassword: cfg.sentinel_password ?? undefined }
      : { host: cfg.host, port: cfg.port }),
    username: cfg.username ?? undefined,
    password: cfg.password ?? undefined,
    db: cfg.db,
  };
}

/** Where it connects, for logs and errors (never a password). */
export function redisWhere(cfg: RedisConfig): string {
  return cfg.sentinels.length > 0
    ? `sentinel master ${cfg.name} (${cfg.sentinels.map((s) => `${s.host}:${s.port}`).join(', ')})`
    : `${cfg.host}:${cfg.port}`;
}
