// What the `redis` and `redis-cluster` drivers share: the two Lua scripts (atomic on the
// Redis side, so every node sharing the Redis shares the limit exactly), EVALSHA with a
// fallback to EVAL, key naming, readiness and failing CLOSED. redis.ts and
// redis-cluster.ts only build the ioredis client.
//
// Failing closed: any error talking to Redis (down, refused, timed out, script error)
// becomes RateLimiterUnavailable and the API answers 503; it is never read as "allowed".
// The clients are built with enableOfflineQueue: false (a command while disconnected
// fails at once instead of queueing) and a short commandTimeout (a hung Redis cannot
// hang requests); ioredis reconnects by itself, so the limiter recovers with Redis.

import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import { redisUnreachable, whenReady } from '../redis/client';
import type { RateLimiterDriver } from '../config/types';
import { RateLimiterUnavailable, type Decision, type RateLimiter } from './types';

/** ms a Redis command may take before the request gets 503. */
export const COMMAND_TIMEOUT_MS = 1000;

interface Script { text: string; sha: string }

function script(text: string): Script {
  return { text, sha: createHash('sha1').update(text).digest('hex') };
}

/**
 * Token bucket in GCRA form (see memory.ts): the key holds the theoretical arrival time
 * in µs on Redis's own clock (TIME), so the nodes' clocks do not matter.
 * ARGV: capacity, µs per token, cost. Returns {allowed, remaining, µs until full, µs to wait}.
 */
export const BUCKET = script(`
if redis.replicate_commands then redis.replicate_commands() end
local capacity = tonumber(ARGV[1])
local per = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local span = capacity * per
local nxt = tat + cost * per
if nxt - now > span then
  return {0, math.floor((span - (tat - now)) / per), tat - now, nxt - now - span}
end
redis.call('SET', KEYS[1], string.format('%.0f', nxt), 'PX', math.ceil((nxt - now) / 1000) + 1)
return {1, math.floor((span - (nxt - now)) / per), nxt - now, 0}
`);

/**
 * Fixed window starting at its first unit: the key holds the count and expires with
 * the window. ARGV: max, window ms, cost. Returns {allowed, remaining, ms until the end}.
 */
export const WINDOW = script(`
local max = tonumber(ARGV[1])
local win = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  count = 0
  ttl = win
end
if count + cost > max then return {0, max - count, ttl} end
if count == 0 then
  redis.call('SET', KEYS[1], cost, 'PX', win)
else
  redis.call('INCRBY', KEYS[1], cost)
end
return {1, max - count - cost, ttl}
`);

export abstract class ScriptedRateLimiter implements RateLimiter {
  private lastError: string | null = null;
  private down = false;

  /**
   * @param prefix database.redis(.cluster).key_prefix; keys are `<prefix>ratelimit:{<key>}`
   *   (the hash tag keeps each key's slot stable whatever the prefix)
   * @param where  human description of the server(s), for messages
   */
  protected constructor(
    readonly driver: RateLimiterDriver,
    protected readonly client: Redis | Cluster,
    private readonly prefix: string,
    private readonly where: string,
    private readonly log?: Logger,
  ) {
    client.on('error', (err: Error) => {
      this.lastError = err.message;
      if (!this.down) log?.warn({ err: err.message, redis: where }, 'rate limiter: Redis unreachable; limited API requests answer 503');
      this.down = true;
    });
    client.on('ready', () => {
      if (this.down) log?.info({ redis: where }, 'rate limiter: Redis reachable again');
      this.down = false;
      this.lastError = null;
    });
  }

  key(k: string): string {
    return `${this.prefix}ratelimit:{${k}}`;
  }

  private async run(s: Script, key: string, args: (string | number)[]): Promise<number[]> {
    const full = this.key(key);
    try {
      try {
        return (await this.client.evalsha(s.sha, 1, full, ...args)) as number[];
      } catch (err) {
        if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
        return (await this.client.eval(s.text, 1, full, ...args)) as number[];
      }
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      throw new RateLimiterUnavailable(`rate limiter: ${this.where} did not answer (${why})`, { cause: err });
    }
  }

  async consume(key: string, capacity: number, refillPerSec: number, cost = 1): Promise<Decision> {
    const per = Math.max(1, Math.round(1e6 / refillPerSec));
    const [ok, remaining, fullUs, waitUs] = await this.run(BUCKET, key, [capacity, per, cost]);
    return {
      allowed: ok === 1,
      limit: capacity,
      remaining: Math.max(0, remaining),
      resetSeconds: fullUs / 1e6,
      retryAfterSeconds: waitUs / 1e6,
    };
  }

  async window(key: string, max: number, windowSec: number, cost = 1): Promise<Decision> {
    const [ok, remaining, ttlMs] = await this.run(WINDOW, key, [max, Math.max(1, Math.round(windowSec * 1000)), cost]);
    return {
      allowed: ok === 1,
      limit: max,
      remaining: Math.max(0, remaining),
      resetSeconds: ttlMs / 1000,
      retryAfterSeconds: ok === 1 ? 0 : ttlMs / 1000,
    };
  }

  ready(timeoutMs: number): Promise<void> {
    return whenReady(this.client, timeoutMs, () => new RateLimiterUnavailable(
      `rate_limiter.driver ${this.driver}: ${redisUnreachable(this.client, this.where, timeoutMs)}`));
  }

  /**
   * Not connected: unavailable at once. Connected: a PING must come back within
   * COMMAND_TIMEOUT_MS (a hung Redis keeps its connection while answering nothing).
   */
  health(): Promise<void> {
    if (this.client.status !== 'ready') {
      return Promise.reject(new RateLimiterUnavailable(
        `rate limiter: ${this.where} is not connected (${this.lastError ?? this.client.status})`));
    }
    return this.client.ping().then(() => undefined, (err: unknown) => {
      const why = err instanceof Error ? err.message : String(err);
      throw new RateLimiterUnavailable(`rate limiter: ${this.where} did not answer PING (${why})`, { cause: err });
    });
  }

  close(): Promise<void> {
    this.client.disconnect();
    return Promise.resolve();
  }
}
