// The `none` driver (also `rate_limiter.enabled: false`): everything is allowed.

import type { Decision, RateLimiter } from './types';

export class NoRateLimiter implements RateLimiter {
  readonly driver = 'none' as const;

  consume(_key: string, capacity: number, _refillPerSec: number, _cost = 1): Decision {
    return { allowed: true, limit: capacity, remaining: capacity, resetSeconds: 0, retryAfterSeconds: 0 };
  }

  window(_key: string, max: number, _windowSec: number, _cost = 1): Decision {
    return { allowed: true, limit: max, remaining: max, resetSeconds: 0, retryAfterSeconds: 0 };
  }

  ready(): Promise<void> {
    return Promise.resolve();
  }

  health(): void {}

  close(): Promise<void> {
    return Promise.resolve();
  }
}
