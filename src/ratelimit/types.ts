// The rate-limiter seam: one interface, one file per backend (memory.ts, redis.ts,
// redis-cluster.ts, none.ts), one factory (index.ts). The HTTP API (http/ratelimit.ts)
// is its only caller; it names keys with `limitKey` so that every backend sees the same
// key for the same thing.

import type { RateLimiterDriver } from '../config/types';

/** The outcome of one consume/window call. Seconds are exact (fractional); callers round. */
export interface Decision {
  allowed: boolean;
  /** The bucket's capacity / the window's max. */
  limit: number;
  /** Whole tokens (requests) left after this call. */
  remaining: number;
  /** Seconds until the bucket is full again (window: until the window ends). */
  resetSeconds: number;
  /** Denied: seconds until this call would be allowed. Allowed: 0. */
  retryAfterSeconds: number;
}

export type MaybePromise<T> = T | Promise<T>;

export interface RateLimiter {
  readonly driver: RateLimiterDriver;
  /**
   * Token bucket `key`: `capacity` tokens, refilled continuously at `refillPerSec`;
   * takes `cost` tokens (default 1) when that many are there, else nothing.
   * Redis backends throw RateLimiterUnavailable (never answer "allowed") when Redis
   * cannot be asked.
   */
  consume(key: string, capacity: number, refillPerSec: number, cost?: number): MaybePromise<Decision>;
  /**
   * Fixed window `key`: at most `max` units per `windowSec` seconds, the window starting
   * at its first unit. Takes `cost` units (default 1) when they fit, else nothing.
   */
  window(key: string, max: number, windowSec: number, cost?: number): MaybePromise<Decision>;
  /** Resolves once the backend answers; rejects with RateLimiterUnavailable after timeoutMs. */
  ready(timeoutMs: number): Promise<void>;
  /**
   * Whether the backend can be asked now (GET /up/{appId}): returns when it can, throws
   * (or rejects with) RateLimiterUnavailable when not. Memory and none: always, at once.
   */
  health(): MaybePromise<void>;
  /** Releases connections and timers (a thread with an open socket does not exit). */
  close(): Promise<void>;
}

/** The backend cannot be asked (Redis down, timed out, refused). The API answers 503. */
export class RateLimiterUnavailable extends Error {
  readonly code = 'RC_ERR_RATE_LIMITER_DOWN';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RateLimiterUnavailable';
  }
}

/** Key names, the same for every backend (Redis adds its prefix and a hash tag). */
export const limitKey = {
  /** Per-app bucket of the HTTP API (max_client_events_per_second). */
  api: (appId: string) => `api:${appId}`,
  /** Per-app bucket of events published through the API (max_backend_events_per_second). */
  backend: (appId: string) => `backend:${appId}`,
  /** Per-client-IP window of the HTTP API (rate_limiter.api). */
  ip: (ip: string) => `ip:${ip}`,
} as const;
