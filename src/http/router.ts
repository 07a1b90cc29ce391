// HTTP routes of the main listener: the signed Pusher REST API, health checks, CORS.

import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import type { AppConfig, Config } from '../config/types';
import { BusTimeoutError } from '../bus/bus';
import { verifyApiRequest } from '../protocol/api-auth';
import { getChannel, getChannels, getUsers } from './channels';
import type { ApiDeps } from './deps';
import { postBatchEvents, postEvents } from './events';
import { captureRequest, jsonError, readBody, writeResponse, type ApiRequest, type ApiResponse } from './request';

type ApiHandler = (deps: ApiDeps, app: AppConfig, req: ApiRequest, params: Map<string, string>) => Promise<ApiResponse>;

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
  /** A body over the limit but below this is read (and dropped) before the 413 (see readBody). */
  const drainLimit = 4 * bodyLimit;

  /** Runs an async handler with the uWS contract (abort tracking, corked writes, no stack traces). */
  function serve(res: HttpResponse, req: ApiRequest, state: { aborted: boolean }, work: () => Promise<ApiResponse>) {
    const cors = corsHeaders(config.cors, req.headers.origin);
    work().catch((err: unknown) => {
      if (err instanceof BusTimeoutError) return jsonError(503, 'server busy: a shard did not answer in time');
      log.error({ err, path: req.path }, 'API request failed');
      return jsonError(500, 'internal server error');
    }).then((r) => {
      if (!state.aborted) writeResponse(res, r, cors, deps.stopping());
    });
  }

  function api(method: 'get' | 'post', pattern: string, paramCount: number, handler: ApiHandler) {
    uws[method](pattern, (res: HttpResponse, hreq: HttpRequest) => {
      // onAborted first: uWS aborts the process if a handler returns (or throws) without
      // having answered or registered it.
      const state = { aborted: false };
      res.onAborted(() => { state.aborted = true; });
      let req: ApiRequest;
      try {
        req = captureRequest(res, hreq, paramCount);
      } catch (err) {
        log.error({ err }, 'could not read an API request');
        writeResponse(res, jsonError(400, 'unreadable request'), {}, true);
        return;
      }
      serve(res, req, state, async () => {
        if (method === 'post') {
          if (req.headers.contentLength !== null && req.headers.contentLength > drainLimit) {
            return tooLarge();
          }
          const body = await readBody(res, bodyLimit, drainLimit, state, () => {
            state.aborted = true; // we answer now and drop the rest of the upload
            writeResponse(res, tooLarge(), corsHeaders(config.cors, req.headers.origin), true);
          });
          if (body === null) return tooLarge();
          req.body = body;
        }
        const app = apps.byId(decodeURIComponentSafe(req.params[0]));
        if (!app) return jsonError(404, `App ${req.params[0]} not found`);
        const auth = verifyApiRequest(
          { method: req.method, path: req.path, query: req.query, authorization: req.headers.authorization, body: req.body, nowSeconds: Math.floor(Date.now() / 1000) },
          (key) => apps.byKey(key)?.secret ?? null,
        );
        if (!auth.ok) return jsonError(auth.status, auth.error);
        if (auth.authKey !== app.key) return jsonError(401, `auth_key ${auth.authKey} does not belong to app ${app.id}`);
        if (!app.enabled) return jsonError(403, `App ${app.id} is disabled`);
        return handler(deps, app, req, auth.params);
      });
    });
  }

  function tooLarge(): ApiResponse {
    return jsonError(413, `request body is larger than ${config.http.request_limit_in_mb} MB`);
  }

  api('post', '/apps/:appId/events', 1, (d, app, req) => postEvents(d, app, req.body));
  api('post', '/apps/:appId/batch_events', 1, (d, app, req) => postBatchEvents(d, app, req.body));
  api('get', '/apps/:appId/channels', 1, (d, app, _req, params) => getChannels(d, app, params));
  api('get', '/apps/:appId/channels/:channel', 2, (d, app, req, params) => getChannel(d, app, req.params[1], params));
  api('get', '/apps/:appId/channels/:channel/users', 2, (d, app, req) => getUsers(d, app, req.params[1]));

  uws.get('/up', (res, req) => {
    const cors = corsHeaders(config.cors, req.getHeader('origin') || null);
    writeResponse(res, { status: 200, body: { status: 'ok', timestamp: Math.floor(Date.now() / 1000) } }, cors);
  });
  uws.get('/up/:appId', (res, req) => {
    const cors = corsHeaders(config.cors, req.getHeader('origin') || null);
    const id = decodeURIComponentSafe(req.getParameter(0) ?? '');
    const app = apps.byId(id);
    const r: ApiResponse = !app ? jsonError(404, `App ${id} not found`)
      : !app.enabled ? jsonError(503, `App ${id} is disabled`)
      : { status: 200, body: { status: 'ok' } };
    writeResponse(res, r, cors);
  });
  uws.options('/*', (res, req) => {
    const h = corsHeaders(config.cors, req.getHeader('origin') || null);
    h['Access-Control-Allow-Methods'] = config.cors.methods.join(', ');
    h['Access-Control-Allow-Headers'] = config.cors.allowed_headers.join(', ');
    h['Access-Control-Max-Age'] = '86400';
    writeResponse(res, { status: 204, body: null }, h);
  });
  uws.any('/*', (res, req) => {
    const cors = corsHeaders(config.cors, req.getHeader('origin') || null);
    writeResponse(res, jsonError(404, `No route for ${req.getCaseSensitiveMethod().toUpperCase()} ${req.getUrl()}`), cors);
  });
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
