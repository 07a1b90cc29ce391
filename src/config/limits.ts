// `limits`: what one client (a socket, an HTTP request) can make one process hold or do.
// Kept apart from the rest of the config on purpose (one type, one default, one
// validation), so that it moves as one block. Every default is far above what a real
// Pusher app does, and each bound answers with the error named in README.md ("Limits and
// hostile clients") and docs/security.md.

import { totalmem } from 'node:os';
import type { Checker } from './checker';

export interface LimitsConfig {
  /** Channels one connection may be subscribed to at once; beyond: subscription_error LimitReached. */
  max_subscriptions_per_connection: number;
  /** `in` / `nin` values in one tag filter (all its nodes together); beyond: subscription_error InvalidFilter. */
  max_filter_values: number;
  /** `in` / `nin` values over all the tag filters of one connection; beyond: subscription_error LimitReached. */
  max_filter_values_per_connection: number;
  /** Frames per second a connection may send on average (its budget refills at this rate). */
  frames_per_second: number;
  /**
   * Frames a connection may send at once above that rate. Past it frames are dropped
   * (pusher:error 4301, once); a connection that goes on sending another `frame_burst`
   * frames is closed with 4100.
   */
  frame_burst: number;
  /** WebSocket connections this process accepts (all apps, all shards); beyond: 4100 "Over capacity". null: derived from memory. */
  max_connections: number;
  /** Request-body bytes one shard reads at once (all API requests together); beyond: 503. */
  http_body_bytes_in_flight: number;
}

/** Memory per connection the derived default of limits.max_connections reserves. */
export const BYTES_PER_CONNECTION = 32 * 1024;

export function defaultLimits(): LimitsConfig {
  return {
    max_subscriptions_per_connection: 1000,
    max_filter_values: 1000,
    max_filter_values_per_connection: 10_000,
    frames_per_second: 1000,
    frame_burst: 4000,
    max_connections: Math.max(1024, Math.floor(totalmem() / BYTES_PER_CONNECTION)),
    http_body_bytes_in_flight: 64 * 1024 * 1024,
  };
}

/** Validates the `limits` block of the merged raw tree. */
export function validateLimits(c: Checker, get: (path: string) => unknown): LimitsConfig {
  const pos = (k: keyof LimitsConfig, max?: number) => c.int(`limits.${k}`, get(`limits.${k}`), 1, max === undefined ? {} : { max });
  return {
    max_subscriptions_per_connection: pos('max_subscriptions_per_connection', 10_000_000),
    max_filter_values: pos('max_filter_values', 10_000_000),
    max_filter_values_per_connection: pos('max_filter_values_per_connection', 100_000_000),
    frames_per_second: pos('frames_per_second', 1_000_000),
    frame_burst: pos('frame_burst', 100_000_000),
    max_connections: pos('max_connections', 2 ** 31 - 1),
    http_body_bytes_in_flight: c.int('limits.http_body_bytes_in_flight', get('limits.http_body_bytes_in_flight'), 1024, { max: 2 ** 40 }),
  };
}

/** Rules between `limits` and the rest of the config. */
export function checkLimits(c: Checker, cfg: { limits: LimitsConfig; http: { request_limit_in_mb: number } }): void {
  const bodyMax = cfg.http.request_limit_in_mb * 1024 * 1024;
  if (c.ok('limits.http_body_bytes_in_flight', 'http.request_limit_in_mb') && cfg.limits.http_body_bytes_in_flight < bodyMax) {
    c.fail('limits.http_body_bytes_in_flight', `must be ≥ http.request_limit_in_mb MiB (${bodyMax}) so that the largest request can be read`, cfg.limits.http_body_bytes_in_flight);
  }
}
