// The live console (console.enabled): a small web page on its own listener
// (console.host:console.port, never the public port) showing, per app, its connections,
// occupied channels with subscriber counts, presence members, a live log of its events
// (console/hub.ts, console/tap.ts), a history channel's stored messages, and a form that
// publishes a test event.
//
//   GET  /                         the page (static/index.html, console.js, console-apps.js, console.css)
//   GET  /api/session              the apps this login may see        ┐
//   GET  /api/apps/:id             connections, channels, members     │ Authorization:
//   GET  /api/apps/:id/events      live log (text/event-stream)       │ Bearer <token>
//   GET  /api/apps/:id/history     ?channel=…&limit&direction&        │ (console/auth.ts)
//                                  after_serial&before_serial&cursor  │
//   POST /api/apps/:id/publish     {channel, event, data}             │
//        /api/app-store/apps/…     the app API (console/app-api.ts)   ┘ console.token only
//
// The page itself holds no data; every /api answer needs the token (401 naming what was
// wrong without it, 404 for an app the login may not see). Failed logins are throttled per
// client address (console/throttle.ts: 429 + Retry-After). Plain HTML and JavaScript from
// the package, no build.

import type { ClientAddress } from '../limits/client-address';
import { readFileSync } from 'node:fs';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import path from 'node:path';
import type { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { ChannelDirectory } from '../channels/directory';
import type { AppConfig, Config } from '../config/types';
import type { AppSync } from '../apps/sync';
import { appApi } from './app-api';
import { listenHttp } from '../listeners/http';
import { isPresence, validateChannelName, validateEventName } from '../protocol/channels';
import { frame } from '../protocol/frames';
import type { MetricsSink } from '../metrics/types';
import type { WebhookOutcome } from '../webhooks/deliver';
import { login, visible, type Grant, type LoginPolicy } from './auth';
import { createHub } from './hub';
import { createLoginThrottle } from './throttle';

export interface ConsoleDeps {
  host: string;
  /** 0: an ephemeral port (tests). */
  port: number;
  login: LoginPolicy;
  /** console.login_max_failures, login_window (s), login_max_addresses. */
  throttle: { maxFailures: number; windowSeconds: number; maxAddresses: number };
  /** console.max_streams */
  maxStreams: number;
  /** The client address of a request (http.trusted_proxies: limits/client-address.ts); the throttle counts per client address. */
  clientAddress?: ClientAddress;
  /** console.stream_max_buffered_kb in bytes. */
  streamMaxBufferedBytes: number;
  metrics: MetricsSink;
  log: Logger;
  /** The apps in force (a reload changes them). */
  apps(): readonly AppConfig[];
  /** Open connections of an app, process-wide. */
  connections(appId: string): number;
  directory: Pick<ChannelDirectory, 'list' | 'info' | 'members'>;
  /** An API event to the app's subscribers of the channel, numbered and kept on a history channel (throws when the bus is full). */
  publish(app: string, channel: string, message: string): void;
  /** One page of a history channel's stored messages, answered as GET …/channels/{name}/history is (history/rest.ts). */
  history(app: AppConfig, channel: string, params: ReadonlyMap<string, string>): Promise<{ status: number; body: unknown }>;
  /** The webhook service (null: no app has webhooks): its delivery outcomes go to the live log. */
  webhooks: { observe(fn: ((o: WebhookOutcome) => void) | null): void } | null;
  /** The shard threads of this moment. */
  shards(): readonly Worker[];
  /** The app API (console/app-api.ts): the config its apps are checked with, and the database app store (null: array). */
  appStore: { config: Config; store: AppSync | null };
}

export interface ConsoleServer {
  readonly port: number;
  close(): Promise<void>;
}

/** Channels listed with their counts (a bus request each); more are cut, and said so. */
const MAX_CHANNELS = 200;
/** Presence channels whose members are listed. */
const MAX_PRESENCE = 20;
const MAX_BODY = 256 * 1024;

const STATIC_DIR = path.resolve(__dirname, '..', '..', '..', 'src', 'console', 'static');
const TYPES: Record<string, string> = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };
const SECURITY_HEADERS = {
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

function loadStatic(): Map<string, { type: string; body: Buffer }> {
  const files = new Map<string, { type: string; body: Buffer }>();
  for (const name of ['index.html', 'console.js', 'console-apps.js', 'console.css']) {
    const body = readFileSync(path.join(STATIC_DIR, name)); // missing: the package is incomplete, fail at start
    files.set(name === 'index.html' ? '/' : `/${name}`, { type: TYPES[path.extname(name)], body });
  }
  return files;
}

function json(res: ServerResponse, status: number, body: unknown, extra: Record<string, string> = {}): void {
  res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': 'application/json; charset=utf-8', ...extra }).end(JSON.stringify(body));
}

function readBody(req: IncomingMessage): Promise<string | null> {
  return new Promise((resolve, reject) => {
    let size = 0;
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        resolve(null);
        req.destroy();
      } else parts.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}

function tooMany(req: IncomingMessage, res: ServerResponse, seconds: number): void {
  req.resume();
  json(res, 429, { error: `too many failed console logins from this address: try again in ${seconds} s` }, { 'retry-after': String(seconds) });
}

export function startConsole(deps: ConsoleDeps): Promise<ConsoleServer> {
  const files = loadStatic();
  const m = deps.metrics;
  const hub = createHub(() => deps.shards(), deps.streamMaxBufferedBytes, {
    dropped: (n) => m.inc('console_stream_dropped_total', undefined, n),
    buffered: (bytes) => m.set('console_stream_buffered_bytes', undefined, bytes),
  });
  deps.webhooks?.observe((o) => hub.emit({
    t: Date.now(), app: o.app, kind: 'webhook', shard: -1, event: o.events.join(','), op: o.op,
    data: o.endpoint + (o.status !== undefined ? ` ${o.status}` : '') + (o.reason !== undefined && o.reason !== 'status' ? ` ${o.reason}` : ''),
  }));
  const throttle = createLoginThrottle({
    maxFailures: deps.throttle.maxFailures, windowMs: deps.throttle.windowSeconds * 1000, maxAddresses: deps.throttle.maxAddresses,
    events: { throttled: () => m.inc('console_login_throttled_total'), evicted: () => m.inc('console_login_evictions_total') },
  });

  async function state(app: AppConfig): Promise<unknown> {
    const all = (await deps.directory.list(app.id, '')).map(([name]) => name).sort();
    const names = all.slice(0, MAX_CHANNELS);
    const infos = await Promise.all(names.map((name) => deps.directory.info(app.id, name)));
    const channels = names.map((name, i) => ({ name, subscription_count: infos[i].subscription_count, user_count: infos[i].user_count }))
      .filter((c) => c.subscription_count > 0 || (c.user_count ?? 0) > 0);
    const presence: Record<string, { user_id: unknown; user_info: unknown }[]> = {};
    for (const name of names.filter(isPresence).slice(0, MAX_PRESENCE)) {
      presence[name] = (await deps.directory.members(app.id, name)).map(([user_id, user_info]) => ({ user_id, user_info }));
    }
    return { id: app.id, key: app.key, enabled: app.enabled, connections: deps.connections(app.id), channels, truncated: all.length > names.length, presence };
  }

  async function publish(app: AppConfig, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const text = await readBody(req);
    if (text === null) return json(res, 413, { error: `body larger than ${MAX_BODY} bytes` });
    let body: { channel?: unknown; event?: unknown; data?: unknown };
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      return json(res, 400, { error: 'body must be JSON: {"channel", "event", "data"}' });
    }
    if (body === null || typeof body !== 'object') return json(res, 400, { error: 'body must be a JSON object' });
    const bad = validateChannelName(body.channel, app.max_channel_name_length) ?? validateEventName(body.event, app.max_event_name_length);
    if (bad) return json(res, 400, { error: bad });
    const data = typeof body.data === 'string' ? body.data : JSON.stringify(body.data ?? {});
    if (Buffer.byteLength(data) > app.max_event_payload_in_kb * 1024) {
      return json(res, 413, { error: `data is larger than the app's max_event_payload_in_kb (${app.max_event_payload_in_kb})` });
    }
    const channel = body.channel as string;
    const event = body.event as string;
    try {
      deps.publish(app.id, channel, frame(event, data, channel));
    } catch (err) {
      deps.log.warn({ err, app: app.id }, 'console publish refused');
      return json(res, 503, { error: 'the server could not take the event now; try again' });
    }
    hub.emit({ t: Date.now(), app: app.id, kind: 'api', shard: -1, channel, event, data: data.slice(0, 1024), op: 'console' });
    json(res, 200, { ok: true });
  }

  async function history(app: AppConfig, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const params = new URL(req.url ?? '/', 'http://console').searchParams;
    const channel = params.get('channel');
    if (channel === null || channel === '') return json(res, 400, { error: 'channel is missing: /api/apps/{id}/history?channel=<name>' });
    const bad = validateChannelName(channel, app.max_channel_name_length);
    if (bad) return json(res, 400, { error: bad });
    const rest = new Map([...params].filter(([k]) => k !== 'channel'));
    try {
      const a = await deps.history(app, channel, rest);
      return json(res, a.status, a.body);
    } catch (err) {
      deps.log.warn({ err, app: app.id }, 'console: could not read the channel history');
      return json(res, 503, { error: 'the channel\'s owner did not answer; try again' });
    }
  }

  async function api(req: IncomingMessage, res: ServerResponse, url: string, grant: Grant): Promise<void> {
    if (url.startsWith('/api/app-store/')) {
      if (!grant.all) return json(res, 403, { error: 'the app API needs the console token (an app secret does not open it)' });
      return appApi({ ...deps.appStore, json, readBody }, req, res, url);
    }
    const apps = visible(grant, deps.apps());
    if (url === '/api/session') {
      if (req.method !== 'GET') return json(res, 405, { error: 'method not allowed' }, { allow: 'GET' });
      return json(res, 200, { apps: apps.map((a) => ({ id: a.id, key: a.key, enabled: a.enabled })) });
    }
    const route = /^\/api\/apps\/([^/]+)(\/events|\/publish|\/history)?$/.exec(url);
    if (!route) return json(res, 404, { error: 'not found' });
    let id: string;
    try {
      id = decodeURIComponent(route[1]);
    } catch {
      return json(res, 404, { error: 'not found' });
    }
    const app = apps.find((a) => a.id === id);
    if (!app) return json(res, 404, { error: `no app ${JSON.stringify(id)}` });
    const want = route[2] === '/publish' ? 'POST' : 'GET';
    if (req.method !== want) return json(res, 405, { error: 'method not allowed' }, { allow: want });
    if (route[2] === '/events') {
      if (hub.streams >= deps.maxStreams) return json(res, 503, { error: `too many live log streams open (console.max_streams: ${deps.maxStreams}); close another console tab` });
      return hub.watch(app.id, res);
    }
    if (route[2] === '/publish') return publish(app, req, res);
    if (route[2] === '/history') return history(app, req, res);
    try {
      return json(res, 200, await state(app));
    } catch (err) {
      deps.log.warn({ err, app: app.id }, 'console: could not collect the app state');
      return json(res, 503, { error: 'a shard did not answer; try again' });
    }
  }

  const server = http.createServer((req, res) => {
    const url = (req.url ?? '/').split('?', 1)[0];
    if (!url.startsWith('/api/')) {
      const f = files.get(url);
      if (!f || (req.method !== 'GET' && req.method !== 'HEAD')) return json(res, 404, { error: 'not found' });
      res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': f.type }).end(req.method === 'HEAD' ? undefined : f.body);
      return;
    }
    const peer = req.socket.remoteAddress ?? '';
    const header = (h: string | string[] | undefined) => (Array.isArray(h) ? h.join(',') : h ?? null);
    const addr = deps.clientAddress ? deps.clientAddress(peer, { forwardedFor: header(req.headers['x-forwarded-for']), forwarded: header(req.headers.forwarded) }) : peer;
    const wait = throttle.blocked(addr);
    if (wait > 0) return tooMany(req, res, wait);
    const r = login(req, deps.login, deps.apps());
    if (!r.ok) {
      if (r.attempt) {
        m.inc('console_login_failures_total');
        const blocked = throttle.failed(addr);
        if (blocked > 0) {
          deps.log.warn({ addr, failures: deps.throttle.maxFailures }, 'console: too many failed logins from one address; refused for the rest of the window');
          return tooMany(req, res, blocked);
        }
      }
      req.resume();
      return json(res, 401, { error: r.error }, { 'www-authenticate': 'Bearer realm="ringcast console"' });
    }
    throttle.succeeded(addr);
    api(req, res, url, r.grant).catch((err: unknown) => {
      deps.log.error({ err }, 'console request failed');
      if (!res.headersSent) json(res, 500, { error: 'internal error' });
      else res.end();
    });
  });

  return listenHttp(server, deps.port, deps.host, {
    onError: (err) => deps.log.error({ err }, 'console listener error'),
    beforeClose: () => {
      deps.webhooks?.observe(null);
      hub.close();
    },
  });
}
