// The app API on the console listener, for operators (the console token only; an app's own
// secret does not open it): the apps of a database app store (app_manager.driver postgres,
// mysql, dynamodb; apps/sync.ts), in whichever table shape the store reads (ringcast's own,
// soketi's or sockudo's: a field the shape cannot hold is answered 422, naming the field and
// the shape, with nothing written). JSON in and out; every app is
// checked with the schema of the configuration file's apps. A secret is answered only when
// the app is created and when it is rotated. A write is read back at once (the store's
// apps in force in every shard when the answer comes).
//
//   GET    /api/app-store/apps?page=1&per_page=50   one page of the store's apps
//   POST   /api/app-store/apps                      {id, key, secret?, …options}: 201, with its secret
//   GET    /api/app-store/apps/:id                  the app
//   PUT    /api/app-store/apps/:id                  {key, …options}: replaces it (the secret is kept)
//   DELETE /api/app-store/apps/:id                  204
//   POST   /api/app-store/apps/:id/rotate-secret    a new secret, answered once
//
// With app_manager.driver array every route answers 409: the configuration file is the
// source of truth.

import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AppSync } from '../apps/sync';
import type { AppConfig, Config } from '../config/types';
import { validateStoredApp } from '../config/apps';
import { AppStoreRefused } from '../apps/store';

export interface AppApiDeps {
  config: Config;
  store: AppSync | null;
  json: (res: ServerResponse, status: number, body: unknown) => void;
  readBody: (req: IncomingMessage) => Promise<string | null>;
}

const MAX_PER_PAGE = 500;

function publicApp(a: AppConfig): Omit<AppConfig, 'secret'> {
  const { secret: _secret, ...rest } = a;
  return rest;
}

function newSecret(): string {
  return randomBytes(24).toString('base64url');
}

/** Answers a request under /api/app-store/ (a console-token login). */
export async function appApi(d: AppApiDeps, req: IncomingMessage, res: ServerResponse, url: string): Promise<void> {
  const { json } = d;
  if (!d.store) {
    req.resume();
    return json(res, 409, { error: 'apps come from the configuration file (app_manager.driver array): it is the source of truth; edit it and send SIGHUP' });
  }
  const sync: AppSync = d.store;
  const route = /^\/api\/app-store\/apps(?:\/([^/]+)(\/rotate-secret)?)?$/.exec(url);
  if (!route) return json(res, 404, { error: 'not found' });
  let id: string | null = null;
  try {
    id = route[1] === undefined ? null : decodeURIComponent(route[1]);
  } catch {
    return json(res, 404, { error: 'not found' });
  }
  const method = req.method ?? 'GET';
  const stored = () => sync.storedApps();
  const find = (i: string) => stored().find((a) => a.id === i);

  async function body(): Promise<Record<string, unknown> | string> {
    const text = await d.readBody(req);
    if (text === null) return 'body too large';
    try {
      const v = JSON.parse(text) as unknown;
      return v !== null && typeof v === 'object' && !Array.isArray(v) ? v as Record<string, unknown> : 'body must be a JSON object of app settings';
    } catch {
      return 'body must be JSON: an object of app settings';
    }
  }

  /** Validates, writes and reads the store back; the error answer, or null. */
  async function write(raw: Record<string, unknown>): Promise<{ status: number; error: string } | null> {
    const { app, issues } = validateStoredApp(raw, d.config, 'app');
    if (!app) return { status: 400, error: issues.join('; ') };
    const taken = d.config.apps.concat(stored()).find((a) => a.id !== app.id && a.key === app.key);
    if (taken) return { status: 409, error: `key ${JSON.stringify(app.key)} is taken by app ${JSON.stringify(taken.id)}` };
    try {
      await sync.store.put(raw);
    } catch (err) {
      if (err instanceof AppStoreRefused) return { status: 422, error: err.message };
      throw err;
    }
    await sync.changed();
    return null;
  }

  if (id === null) {
    if (method === 'GET') {
      const q = new URL(req.url ?? '/', 'http://console').searchParams;
      const page = Number(q.get('page') ?? '1');
      const per = Number(q.get('per_page') ?? '50');
      if (!Number.isInteger(page) || page < 1) return json(res, 400, { error: 'page must be a positive integer' });
      if (!Number.isInteger(per) || per < 1 || per > MAX_PER_PAGE) return json(res, 400, { error: `per_page must be an integer from 1 to ${MAX_PER_PAGE}` });
      const all = [...stored()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      return json(res, 200, { apps: all.slice((page - 1) * per, page * per).map(publicApp), page, per_page: per, total: all.length });
    }
    if (method !== 'POST') return json(res, 405, { error: 'method not allowed' });
    const b = await body();
    if (typeof b === 'string') return json(res, 400, { error: b });
    if (typeof b.id !== 'string' && typeof b.id !== 'number') return json(res, 400, { error: 'id is missing' });
    if (d.config.apps.some((a) => a.id === String(b.id)) || find(String(b.id))) return json(res, 409, { error: `app ${JSON.stringify(String(b.id))} exists` });
    const raw = { ...b, id: String(b.id), secret: b.secret ?? newSecret() };
    const bad = await write(raw);
    if (bad) return json(res, bad.status, { error: bad.error });
    return json(res, 201, { ...publicApp(find(raw.id) ?? (raw as unknown as AppConfig)), secret: raw.secret });
  }

  const app = find(id);
  if (!app) {
    req.resume();
    return json(res, 404, { error: `no app ${JSON.stringify(id)} in the app store` });
  }
  if (route[2] === '/rotate-secret') {
    if (method !== 'POST') return json(res, 405, { error: 'method not allowed' });
    const current = await sync.store.list().then((rows) => rows.find((r) => String(r.raw.id) === id)?.raw);
    const secret = newSecret();
    const bad = await write({ ...(current ?? { id, key: app.key }), secret });
    if (bad) return json(res, bad.status, { error: bad.error });
    return json(res, 200, { id, secret });
  }
  if (method === 'GET') return json(res, 200, publicApp(app));
  if (method === 'DELETE') {
    await sync.store.remove(id);
    await sync.changed();
    res.writeHead(204).end();
    return;
  }
  if (method !== 'PUT') return json(res, 405, { error: 'method not allowed' });
  const b = await body();
  if (typeof b === 'string') return json(res, 400, { error: b });
  if (b.id !== undefined && !((typeof b.id === 'string' || typeof b.id === 'number') && String(b.id) === id)) return json(res, 400, { error: 'id cannot change (it is in the path)' });
  if (b.secret !== undefined) return json(res, 400, { error: 'secret cannot be set here: POST …/rotate-secret' });
  const bad = await write({ ...b, id, secret: app.secret });
  if (bad) return json(res, bad.status, { error: bad.error });
  return json(res, 200, publicApp(find(id)!));
}
