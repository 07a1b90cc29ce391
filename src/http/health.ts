// GET /up/{appId}: whether this server can serve the app now. 200 {"status":"ok"}; 404
// for an app it does not serve (unknown, or disabled: the same status as its API
// requests, see router.ts); 503 when a backend every request of the app needs is down —
// the Redis rate limiter (every limited endpoint of every app asks it, and fails closed),
// in a cluster the adapter's backend (without it this node serves only its own clients),
// the Redis of cache.driver redis / redis-cluster (without it cache channels replay
// only what this node remembers), and for an app with history channels the Redis of
// history.driver redis / redis-cluster (without it their publishes answer 503). GET /up
// stays the process's own liveness: always 200 while it listens.

import type { ApiDeps } from './deps';
import { attempt, type MaybePromise } from './maybe';
import { jsonError, type ApiResponse } from './request';
import { RateLimiterUnavailable } from '../ratelimit/types';

const OK: ApiResponse = Object.freeze({ status: 200, body: Object.freeze({ status: 'ok' }) });

export function appHealth(deps: Pick<ApiDeps, 'apps' | 'limiter' | 'log' | 'clusterUp' | 'cacheUp' | 'historyUp' | 'config'>, id: string): MaybePromise<ApiResponse> {
  const app = deps.apps.byId(id);
  if (!app) return jsonError(404, `App ${id} not found`);
  if (!app.enabled) return jsonError(404, `App ${id} is disabled`);
  if (deps.clusterUp && !deps.clusterUp()) {
    return jsonError(503, `App ${id} is not available: the cluster backend (${deps.config.adapter.driver}) cannot be reached`);
  }
  if (deps.cacheUp && !deps.cacheUp()) {
    return jsonError(503, `App ${id} is not available: the cache driver's backend (${deps.config.cache.driver}) cannot be reached`);
  }
  if (deps.historyUp && Object.keys(app.channel_history).length > 0 && !deps.historyUp()) {
    return jsonError(503, `App ${id} is not available: the history store (history.driver ${deps.config.history.driver}) cannot be reached`);
  }
  const checked = attempt(() => deps.limiter.health());
  if (!(checked instanceof Promise)) return OK;
  return checked.then(() => OK, (err: unknown) => {
    if (!(err instanceof RateLimiterUnavailable)) throw err;
    // The address of the backend stays in the log: /up/{appId} is not authenticated.
    deps.log.debug({ err: err.message, app: id }, 'GET /up/{appId}: the rate limiter is unavailable');
    return jsonError(503, `App ${id} is not available: its rate limiter (${deps.limiter.driver}) cannot be reached`);
  });
}
