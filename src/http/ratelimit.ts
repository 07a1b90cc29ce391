// Rate limits of the HTTP API (spec "Rate limiting"), applied by router.ts to the limited
// endpoints (events, batch_events, channels, channel, users; not /up, not /metrics):
//
//   1. per-client-IP window (rate_limiter.api.max_requests per window_seconds), once the
//      app of the path is known, BEFORE authentication: it throttles one source whatever
//      it sends, and only ever hurts that source;
//   2. per-app token bucket (capacity and refill max_client_events_per_second, one token
//      per request), AFTER authentication, so that unsigned garbage cannot drain an app's
//      bucket and lock its real backend out;
//   3. (events, batch_events) max_backend_events_per_second, after validation: one token
//      per event × channel (what the server delivers), all or nothing per request.
//
// Over a limit: 429 {"error"}, Retry-After (whole seconds, ≥ 1) and the X-RateLimit-*
// headers of the limit that refused. Authenticated responses of limited endpoints carry
// the app bucket's X-RateLimit-Limit / -Remaining / -Reset (seconds until full). Driver
// `none` (or enabled: false) adds no headers. A limiter that cannot answer (Redis down)
// throws RateLimiterUnavailable, which router.ts turns into 503.

import type { AppConfig } from '../config/types';
import { clientAddressOf } from '../limits/client-address';
import { limitKey, type Decision } from '../ratelimit/types';
import type { ApiDeps } from './deps';
import { then, type MaybePromise } from './maybe';
import type { ApiRequest, ApiResponse } from './request';

export type LimitType = 'api' | 'ip' | 'backend_events';

type LimitDeps = Pick<ApiDeps, 'config' | 'limiter' | 'metrics'>;

/**
 * The client address (limits/client-address.ts): the socket's, or, from a peer in
 * http.trusted_proxies, the rightmost untrusted X-Forwarded-For / Forwarded hop; with
 * trusted_proxies empty, the deprecated rate_limiter.api.trust_hops = N still takes the Nth
 * X-Forwarded-For entry from the right.
 */
export function clientIp(req: Pick<ApiRequest, 'ip' | 'headers'>, config: Parameters<typeof clientAddressOf>[0]): string {
  return clientAddressOf(config)(req.ip, req.headers);
}

export function rateLimitHeaders(d: Decision): Record<string, string> {
  return {
    'X-RateLimit-Limit': String(d.limit),
    'X-RateLimit-Remaining': String(Math.max(0, d.remaining)),
    'X-RateLimit-Reset': String(Math.ceil(d.resetSeconds - 1e-9)),
  };
}

function tooMany(deps: LimitDeps, app: AppConfig, type: LimitType, d: Decision, error: string): ApiResponse {
  deps.metrics.inc('rate_limit_exceeded_total', { app_id: app.id, limit_type: type });
  return {
    status: 429,
    body: { error },
    headers: { ...rateLimitHeaders(d), 'Retry-After': String(Math.max(1, Math.ceil(d.retryAfterSeconds - 1e-9))) },
  };
}

/** Step 1: the per-IP window; a 429 or null (allowed, or not configured). */
export function limitIp(deps: LimitDeps, app: AppConfig, req: ApiRequest): MaybePromise<ApiResponse | null> {
  const { max_requests: max, window_seconds: win } = deps.config.rate_limiter.api;
  if (max === null || deps.limiter.driver === 'none') return null;
  return then(deps.limiter.window(limitKey.ip(clientIp(req, deps.config)), max, win), (d) =>
    d.allowed ? null : tooMany(deps, app, 'ip', d, `Too many requests from this address: at most ${max} per ${win} s`));
}

/** Whether limitIp needs the client's address (captured only then: http/request.ts). */
export function ipLimited(deps: LimitDeps): boolean {
  return deps.config.rate_limiter.api.max_requests !== null && deps.limiter.driver !== 'none';
}

/** Step 2: the app's bucket: a 429, or the headers for the response. */
export function limitApp(deps: LimitDeps, app: AppConfig): MaybePromise<{ denied: ApiResponse | null; headers: Record<string, string> }> {
  if (deps.limiter.driver === 'none') return { denied: null, headers: {} };
  const rate = app.max_client_events_per_second;
  return then(deps.limiter.consume(limitKey.api(app.id), rate, rate), (d) => d.allowed
    ? { denied: null, headers: rateLimitHeaders(d) }
    : { denied: tooMany(deps, app, 'api', d, `Rate limit exceeded: at most ${rate} API requests per second for app ${app.id}`), headers: {} });
}

/** Step 3: `count` backend events (event × channel); a 429 or null. */
export function limitBackendEvents(deps: LimitDeps, app: AppConfig, count: number): MaybePromise<ApiResponse | null> {
  const rate = app.max_backend_events_per_second;
  if (rate === null || deps.limiter.driver === 'none') return null;
  return then(deps.limiter.consume(limitKey.backend(app.id), rate, rate, count), (d) => backendDenied(deps, app, count, rate, d));
}

function backendDenied(deps: LimitDeps, app: AppConfig, count: number, rate: number, d: Decision): ApiResponse | null {
  if (d.allowed) return null;
  const why = count > rate
    ? `this request publishes ${count} events (event × channel), more than max_backend_events_per_second (${rate}) allows at once`
    : `Backend event rate limit exceeded: at most ${rate} events (event × channel) per second for app ${app.id}`;
  return tooMany(deps, app, 'backend_events', d, why);
}
