// HTTP routes of the main listener: the signed Pusher REST API, health checks, CORS.

import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import type { AppConfig, Config } from '../config/types';
import { BusFullError, BusTimeoutError } from '../bus/bus';
import { metersFor } from '../metrics/meters';
import { checkBody, verifyApiQuery } from '../protocol/api-auth';
import { createBodyBudget } from '../limits/body-budget';
import { openBody, type BodyOutcome, type BodyReader } from './body';
import { getChannel, getChannelHistory, getChannels, getUsers } from './channels';
import { appHealth } from './health';
import { terminateConnections } from './users';
import type { ApiDeps } from './deps';
import { postBatchEvents, postEvents } from './events';
import { attempt, then, type MaybePromise } from './maybe';
import { ipLimited, limitApp, limitIp } from './ratelimit';
import { RateLimiterUnavailable } from '../ratelimit/types';
import { HistoryUnavailableError } from '../history/types';
import { Attr } from '../tracing/tracer';
import { captureRequest, jsonError, keepBody, writeResponse, type ApiRequest, type ApiResponse } from './request';

type ApiHandler = (deps: ApiDeps, app: AppConfig, req: ApiRequest, params: ReadonlyMap<string, string>) => MaybePromise<ApiResponse>;

/** A request whose line and headers passed: its app, its parameters, what its body must match, the bucket's headers. */
interface Admitted {
  app: AppConfig;
  params: ReadonlyMap<string, string>;
  bodyMd5: string | undefined;
  headers: Record<string, string> | null;
}

const isAnswer = (a: ApiResponse | Admitted): a is ApiResponse => 'status' in a;

function corsHeaders(cors: Config['cors'], origin: string | null): Record<string, string> {
  const h: Record<string, string> = {};
  if (cors.origin.includes('*')) h['Access-Control-Allow-Origin'] = '*';
  else if (origin && cors.origin.includes(origin)) {
    h['Access-Control-Allow-Origin'] = origin;
    h['Vary'] = 'Origin';
  }
  if (cors.credentials && h['Access-Control-Allow-Origin']) h['Access-Control-Allow-Credentials'] = 'true';
  return h;
}

export function registerRoutes(uws: TemplatedApp, deps: ApiDeps): void {
  const { config, apps, log } = deps;
  const bodyLimit = config.http.request_limit_in_mb * 1024 * 1024;
  /** A body over the limit but below this is read (and dropped) before the 413 (see http/body.ts). */
  const drainLimit = 4 * bodyLimit;
  /** This shard's request-body bytes in flight (limits.http_body_bytes_in_flight). */
  const bodyBudget = createBodyBudget(config.limits.http_body_bytes_in_flight);
  const metricsOn = metersFor(deps.metrics).enabled;
  const tracer = deps.tracing ?? null;
  /** CORS headers of answers, read-only and shared when they do not depend on the request's Origin. */
  const anyOrigin = config.cors.origin.includes('*') ? Object.freeze(corsHeaders(config.cors, null)) : null;
  const noOrigin = Object.freeze(corsHeaders(config.cors, null));
  const corsFor = (origin: string | null): Readonly<Record<string, string>> =>
    anyOrigin ?? (origin === null ? noOrigin : corsHeaders(config.cors, origin));

  /** HTTP metrics of one answered request; `route` is the route pattern, never the URL (cardinality). */
  function observeHttp(method: string, route: string, status: number, startedAt: number) {
    if (!metricsOn) return;
    const m = KNOWN_METHODS.has(method) ? method : 'OTHER';
    deps.metrics.inc('http_requests_total', { method: m, path: route, status: String(status) });
    deps.metrics.observe('http_request_duration_seconds', { method: m, path: route }, (performance.now() - startedAt) / 1000);
    if (status >= 500) deps.metrics.inc('http_errors_total');
  }

  function failure(err: unknown, req: ApiRequest): ApiResponse {
    if (err instanceof BusTimeoutError) return jsonError(503, 'server busy: a shard did not answer in time');
    // a question to a shard whose queue is full, or asked by a shard going down after a crash
    if (err instanceof BusFullError) return jsonError(503, 'server busy: internal queues are full, retry later');
    // history.driver redis / redis-cluster without Redis: nothing was delivered or stored (history/redis.ts)
    if (err instanceof HistoryUnavailableError) return { status: 503, body: { error: err.message }, headers: { 'Retry-After': '1' } };
    if (err instanceof RateLimiterUnavailable) {
      // Fail closed: no limiter answer, no request (ratelimit/scripted.ts logs the outage once).
      deps.metrics.inc('rate_limiter_errors_total');
      return { status: 503, body: { error: 'rate limiter unavailable' }, headers: { 'Retry-After': '1' } };
    }
    log.error({ err, path: req.path }, 'API request failed');
    return jsonError(500, 'internal server error');
  }

  /**
   * Runs a handler with the uWS contract (abort tracking, corked writes, no stack traces).
   * When no step has to wait the answer is written now, inside the uWS callback.
   */
  function serve(res: HttpResponse, req: ApiRequest, state: { aborted: boolean }, route: string, startedAt: number, work: () => MaybePromise<ApiResponse>) {
    const r = attempt(work);
    if (r instanceof Promise) {
      // The rest runs after this callback: the body must not stay in readBody's reused
      // buffer. Every later step reads req.body when it runs, so it gets the copy.
      keepBody(req);
      r.catch((err: unknown) => failure(err, req)).then((later) => finish(res, req, state, route, startedAt, later, false))
        // finish() writes to a socket uWS may have closed meanwhile: log, never an unhandled rejection (a shard crash)
        .catch((err: unknown) => log.error({ err, path: req.path }, 'could not write an API answer'));
      return;
    }
    // Still inside the uWS callback (route handler or onData), where uWS has the socket
    // corked: the answer goes out in one send without a cork() of its own.
    finish(res, req, state, route, startedAt, r, true);
  }

  function finish(res: HttpResponse, req: ApiRequest, state: { aborted: boolean }, route: string, startedAt: number, r: ApiResponse, inCallback: boolean) {
    observeHttp(req.method, route, r.status, startedAt);
    if (!state.aborted) writeResponse(res, r, corsFor(req.headers.origin), deps.stopping(), inCallback);
  }

  /**
   * A publish route's handler in a server span (tracing on): it continues the request's
   * `traceparent`, and the publish's deliveries on every shard are its children.
   */
  function traced(route: string, handler: ApiHandler): ApiHandler {
    if (tracer === null) return handler;
    const t = tracer;
    const name = `POST ${route.replace(':appId', '{app_id}')}`;
    return (d, app, req, params) => t.serve(name, req.headers.traceparent ?? null, req.headers.tracestate ?? null,
      { [Attr.Method]: 'POST', [Attr.Route]: route, [Attr.AppId]: app.id }, () => handler(d, app, req, params), (r) => r.status);
  }

  function api(method: 'get' | 'post', pattern: string, paramCount: number, handler: ApiHandler) {
    const limited = LIMITED_ROUTES.has(pattern);
    const withIp = limited && ipLimited(deps);
    const withTrace = tracer !== null && TRACED_ROUTES.has(pattern);

    /**
     * What the request line and headers decide, before any of the body is read: the app,
     * the per-IP window (before auth, http/ratelimit.ts says why), the signature over the
     * query (which commits to body_md5), the app's bucket (after auth).
     */
    function admit(req: ApiRequest): MaybePromise<ApiResponse | Admitted> {
      const app = apps.lookupId(decodeURIComponentSafe(req.params[0]));
      if (!app) return jsonError(404, `App ${req.params[0]} not found`);
      if (!limited) return authorized(req, app);
      return then(limitIp(deps, app, req), (ipDenied) => ipDenied ?? authorized(req, app));
    }

    function authorized(req: ApiRequest, app: AppConfig): MaybePromise<ApiResponse | Admitted> {
      const auth = verifyApiQuery(
        { method: req.method, path: req.path, query: req.query, authorization: req.headers.authorization, bodyLength: req.headers.contentLength, nowSeconds: Math.floor(Date.now() / 1000) },
        (key) => apps.byKey(key)?.secret ?? null,
      );
      if (!auth.ok) return jsonError(auth.status, auth.error);
      if (auth.authKey !== app.key) return jsonError(401, `auth_key ${auth.authKey} does not belong to app ${app.id}`);
      // Spec statuses (no 403 there): a disabled app is one this server does not serve
      // now, 404 as for an unknown app, but only once authenticated (README, HTTP API).
      if (!app.enabled) return jsonError(404, `App ${app.id} is disabled`);
      const admitted: Admitted = { app, params: auth.params, bodyMd5: auth.bodyMd5, headers: null };
      if (!limited) return admitted;
      return then(limitApp(deps, app), (bucket) => bucket.denied ?? { ...admitted, headers: bucket.headers });
    }

    /** The body (read now) against body_md5, then the handler. */
    function run(req: ApiRequest, a: Admitted): MaybePromise<ApiResponse> {
      const bad = checkBody(req.body, a.bodyMd5);
      if (bad !== null) return jsonError(bad.status, bad.error);
      const r = handler(deps, a.app, req, a.params);
      const headers = a.headers;
      if (headers === null) return r;
      return then(r, (x) => ({ status: x.status, body: x.body, headers: x.headers ? { ...headers, ...x.headers } : headers }));
    }

    uws[method](pattern, (res: HttpResponse, hreq: HttpRequest) => {
      const startedAt = metricsOn ? performance.now() : 0;
      // onAborted first: uWS aborts the process if a handler returns (or throws) without
      // having answered or registered it.
      const state = { aborted: false };
      let body: BodyReader | null = null;
      res.onAborted(() => {
        state.aborted = true;
        body?.abort();
      });
      let req: ApiRequest;
      try {
        req = captureRequest(res, hreq, method === 'post' ? 'POST' : 'GET', paramCount, withIp, withTrace);
      } catch (err) {
        log.error({ err }, 'could not read an API request');
        writeResponse(res, jsonError(400, 'unreadable request'), {}, true);
        observeHttp(method.toUpperCase(), pattern, 400, startedAt);
        return;
      }
      if (method === 'get') {
        serve(res, req, state, pattern, startedAt, () => then(admit(req), (a) => (isAnswer(a) ? a : run(req, a))));
        return;
      }
      if (req.headers.contentLength !== null && req.headers.contentLength > drainLimit) {
        serve(res, req, state, pattern, startedAt, tooLarge);
        return;
      }
      const reader = body = openBody(res, { limit: bodyLimit, answerEarly: !req.headers.connectionClose, contentLength: req.headers.contentLength, budget: bodyBudget });
      const proceed = (a: ApiResponse | Admitted) => {
        if (isAnswer(a)) return reader.drain(() => serve(res, req, state, pattern, startedAt, () => a));
        reader.keep((b: BodyOutcome) => serve(res, req, state, pattern, startedAt, () => {
          if (b === 'too_large') return tooLarge();
          if (b === 'busy') return busy();
          req.body = b;
          return run(req, a);
        }));
      };
      const decided = attempt(() => admit(req));
      if (!(decided instanceof Promise)) return proceed(decided);
      reader.hold();
      decided.catch((err: unknown) => failure(err, req)).then((a) => {
        if (!state.aborted) res.cork(() => proceed(a));
      }).catch((err: unknown) => log.error({ err, path: req.path }, 'could not answer an API request'));
    });
  }

  function busy(): ApiResponse {
    return {
      status: 503,
      body: { error: `server busy: more than ${config.limits.http_body_bytes_in_flight} bytes of request bodies are being read on this thread (limits.http_body_bytes_in_flight); retry later` },
      headers: { 'Retry-After': '1' },
    };
  }

  function tooLarge(): ApiResponse {
    return jsonError(413, `request body is larger than ${config.http.request_limit_in_mb} MB`);
  }

  api('post', '/apps/:appId/events', 1, traced('/apps/:appId/events', (d, app, req) => postEvents(d, app, req.body)));
  api('post', '/apps/:appId/batch_events', 1, traced('/apps/:appId/batch_events', (d, app, req) => postBatchEvents(d, app, req.body)));
  api('get', '/apps/:appId/channels', 1, (d, app, _req, params) => getChannels(d, app, params));
  api('get', '/apps/:appId/channels/:channel', 2, (d, app, req, params) => getChannel(d, app, req.params[1], params));
  api('get', '/apps/:appId/channels/:channel/users', 2, (d, app, req) => getUsers(d, app, req.params[1]));
  api('get', '/apps/:appId/channels/:channel/history', 2, (d, app, req, params) => getChannelHistory(d, app, req.params[1], params));
  api('post', '/apps/:appId/users/:userId/terminate_connections', 2, (d, app, req) => terminateConnections(d, app, req.params[1]));

  uws.get('/up', (res, req) => {
    const startedAt = performance.now();
    const cors = corsHeaders(config.cors, req.getHeader('origin') || null);
    // a database app store that does not answer: the apps read before are served (still up), and said so
    const store = deps.appStoreUp ? { app_store: deps.appStoreUp() ? 'ok' : 'stale' } : {};
    // draining (shard/drain.ts): 503, so a balancer's health check takes the node out of its pool
    const status = deps.draining?.() === true ? 503 : 200;
    writeResponse(res, { status, body: { status: status === 200 ? 'ok' : 'draining', timestamp: Math.floor(Date.now() / 1000), ...store } }, cors);
    observeHttp('GET', '/up', status, startedAt);
  });
  uws.get('/up/:appId', (res, req) => {
    const startedAt = performance.now();
    const cors = corsHeaders(config.cors, req.getHeader('origin') || null);
    const id = decodeURIComponentSafe(req.getParameter(0) ?? '');
    const state = { aborted: false };
    res.onAborted(() => { state.aborted = true; }); // the Redis check answers later
    const answer = (r: ApiResponse, inCallback: boolean) => {
      observeHttp('GET', '/up/:appId', r.status, startedAt);
      if (!state.aborted) writeResponse(res, r, cors, deps.stopping(), inCallback);
    };
    const r = attempt(() => appHealth(deps, id));
    if (r instanceof Promise) {
      void r.catch((err: unknown) => {
        log.error({ err }, 'GET /up/{appId} failed');
        return jsonError(500, 'internal server error');
      }).then((later) => answer(later, false));
    } else {
      answer(r, true);
    }
  });
  uws.options('/*', (res, req) => {
    const h = corsHeaders(config.cors, req.getHeader('origin') || null);
    h['Access-Control-Allow-Methods'] = config.cors.methods.join(', ');
    h['Access-Control-Allow-Headers'] = config.cors.allowed_headers.join(', ');
    h['Access-Control-Max-Age'] = '86400';
    writeResponse(res, { status: 204, body: null }, h);
    observeHttp('OPTIONS', '/*', 204, performance.now());
  });
  uws.any('/*', (res, req) => {
    const method = req.getCaseSensitiveMethod().toUpperCase();
    const cors = corsHeaders(config.cors, req.getHeader('origin') || null);
    if (method === 'HEAD') {
      // A HEAD answer has no body (one would corrupt the next answer on a kept-alive connection).
      res.cork(() => {
        res.writeStatus('404 Not Found');
        for (const k in cors) res.writeHeader(k, cors[k]);
        res.endWithoutBody(0);
      });
      observeHttp(method, '/*', 404, performance.now());
      return;
    }
    writeResponse(res, jsonError(404, `No route for ${method} ${req.getUrl()}`), cors);
    observeHttp(method, '/*', 404, performance.now());
  });
}

/** Routes under the rate limits (spec "Endpoints", column "Rate limited"). */
/** The routes whose requests get a server span (tracing on). */
const TRACED_ROUTES: ReadonlySet<string> = new Set(['/apps/:appId/events', '/apps/:appId/batch_events']);

const LIMITED_ROUTES: ReadonlySet<string> = new Set([
  '/apps/:appId/events', '/apps/:appId/batch_events', '/apps/:appId/channels',
  '/apps/:appId/channels/:channel', '/apps/:appId/channels/:channel/users', '/apps/:appId/channels/:channel/history',
]);

/** `method` label values; anything else is 'OTHER' (a client must not invent label values). */
const KNOWN_METHODS: ReadonlySet<string> = new Set(['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS']);

function decodeURIComponentSafe(s: string): string {
  if (!s.includes('%')) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
