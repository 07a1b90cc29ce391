// Picks the rate limiter from config (`rate_limiter.enabled: false` ⇒ none), allocates
// the memory driver's process-wide state (primary) and checks at startup that a
// configured Redis answers: it is a startup error if not, never a silent fallback.

import type { Logger } from 'pino';
import type { Config } from '../config/types';
import { allocateMemory, memoryLayout, MemoryRateLimiter } from './memory';
import { NoRateLimiter } from './none';
import { RedisClusterRateLimiter } from './redis-cluster';
import { RedisRateLimiter } from './redis';
import type { RateLimiter } from './types';

export { limitKey, RateLimiterUnavailable, type Decision, type RateLimiter } from './types';

/** ms the primary (and each shard) waits for a configured Redis at startup. */
export const STARTUP_TIMEOUT_MS = 3000;

export type LimiterConfig = Pick<Config, 'rate_limiter' | 'database' | 'apps'>;

/** The effective driver (`enabled: false` ⇒ none). */
export function limiterDriver(config: Pick<Config, 'rate_limiter'>): Config['rate_limiter']['driver'] {
  return config.rate_limiter.enabled ? config.rate_limiter.driver : 'none';
}

/** Primary: the SharedArrayBuffer every shard's memory limiter maps (null for other drivers). */
export function allocateRateLimiterMemory(config: LimiterConfig): SharedArrayBuffer | null {
  return limiterDriver(config) === 'memory' ? allocateMemory(memoryLayout(config)) : null;
}

/**
 * @param memory the primary's allocateRateLimiterMemory() buffer (memory driver; null =
 *   a private one, i.e. per thread)
 */
export function createRateLimiter(config: LimiterConfig, opts: { memory?: SharedArrayBuffer | null; log?: Logger } = {}): RateLimiter {
  switch (limiterDriver(config)) {
    case 'memory':
      return new MemoryRateLimiter(opts.memory ?? null, memoryLayout(config));
    case 'redis':
      return new RedisRateLimiter(config.database.redis, opts.log);
    case 'redis-cluster':
      return new RedisClusterRateLimiter(config.database.redis_cluster, opts.log);
    case 'none':
      return new NoRateLimiter();
  }
}

/**
 * Startup check (primary, before any shard starts): connects to the configured Redis and
 * throws RateLimiterUnavailable (code RC_ERR_RATE_LIMITER_DOWN) with the address and the
 * reason when it does not answer within timeoutMs.
 */
export async function checkRateLimiter(config: LimiterConfig, timeoutMs = STARTUP_TIMEOUT_MS): Promise<void> {
  const driver = limiterDriver(config);
  if (driver !== 'redis' && driver !== 'redis-cluster') return;
  const limiter = createRateLimiter(config);
  try {
    await limiter.ready(timeoutMs);
  } finally {
    await limiter.close();
  }
}
