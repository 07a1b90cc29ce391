// The apps: gathered from `app_manager.array.apps`, top-level `apps` and the
// SERVICE_DEFAULT_APP_* env app, each checked against AppSchema with its own key path
// (`apps[1].max_connections`) or, for the env app, the env var name; then the rules the
// schema cannot state (unique ids and keys, header names, Lambda ARNs) and the limits an
// app leaves out resolved from the global config (`x-default-from`).

import { AppSchema, HEADER_NAME, type AppConfig, type GlobalConfig } from './schema';
import { Checker, isMapping } from './checker';
import { check, decode, keyOf } from './issues';
import { appDefaults } from './defaults';
import { appHooks } from './hooks';

/** The default app assembled by env.ts: raw field values plus which env var set each one. */
export interface EnvApp {
  value: Record<string, unknown>;
  /** field name → env var name, for messages. */
  keys: Record<string, string>;
}

interface Entry { path: string; raw: unknown; keyOf: (path: (string | number)[]) => string }

export function validateApps(c: Checker, tree: Record<string, unknown>, g: GlobalConfig, envApp: EnvApp | null): AppConfig[] {
  const entries: Entry[] = [];
  const am = tree.app_manager as Record<string, unknown>;
  // Apps come from the configuration (the array driver) and, with a database driver, from its table too (apps/store/).
  if (am.driver === 'memory') {
    c.fail('app_manager.driver', 'must be array: the memory app store is not in this build of ringcast (apps come from the configuration)', 'memory');
  }
  for (const path of ['app_manager.array.apps', 'apps']) {
    const list = path === 'apps' ? tree.apps : (am.array as Record<string, unknown>).apps;
    if (list === null || list === undefined) continue;
    if (!Array.isArray(list)) {
      c.fail(path, 'must be a list of apps', list);
      continue;
    }
    list.forEach((raw, i) => entries.push({ path: `${path}[${i}]`, raw, keyOf: (p) => keyOf(`${path}[${i}]`, p) }));
  }
  if (envApp) {
    const envEntry: Entry = {
      path: 'SERVICE_DEFAULT_APP', raw: envApp.value,
      keyOf: (p) => (p.length === 0 ? 'SERVICE_DEFAULT_APP' : envApp.keys[p[0]] ?? `SERVICE_DEFAULT_APP (${keyOf('', p)})`),
    };
    const same = entries.findIndex((e) => isMapping(e.raw) && idString(e.raw.id) === envApp.value.id);
    if (same >= 0) entries[same] = envEntry; // the env app replaces a configured app with the same id
    else entries.push(envEntry);
  }
  if (entries.length === 0) {
    if (am.driver !== 'array') return []; // the apps are in the database
    c.report('apps', 'no apps configured: set apps in config.yaml or SERVICE_DEFAULT_APP_ID/KEY/SECRET');
    return [];
  }

  const apps: AppConfig[] = [];
  const seen = { id: new Map<string, string>(), key: new Map<string, string>() };
  for (const e of entries) {
    check(c, AppSchema, e.raw, e.keyOf);
    if (!isMapping(e.raw)) continue;
    const app = resolve(decode(AppSchema, e.raw) as Record<string, unknown>, g);
    app.hooks = e.raw.hooks === undefined || e.raw.hooks === null ? null : appHooks(c, e.keyOf(['hooks']), e.raw.hooks);
    appRules(c, e, app);
    for (const f of ['id', 'key'] as const) {
      const k = e.keyOf([f]);
      if (!c.ok(k)) continue;
      const prev = seen[f].get(app[f]);
      if (prev !== undefined) c.fail(k, `must be unique, but ${prev} has the same ${f} ${JSON.stringify(app[f])}`, undefined, false);
      else seen[f].set(app[f], e.path);
    }
    apps.push(app);
  }
  return apps;
}

function idString(v: unknown): unknown {
  return typeof v === 'number' && Number.isInteger(v) ? String(v) : v;
}

/** The app in schema order, every field set: its own value, else the default or the global key's value. */
function resolve(a: Record<string, unknown>, g: GlobalConfig): AppConfig {
  const out: Record<string, unknown> = { id: a.id, key: a.key, secret: a.secret, ...appDefaults(g) };
  for (const f of Object.keys(out)) if (a[f] !== undefined && a[f] !== null) out[f] = a[f];
  return out as AppConfig;
}

/** Header names and values, and the Lambda ARN of a lambda:// URL. */
function appRules(c: Checker, e: Entry, app: AppConfig): void {
  if (isMapping(app.channel_history)) {
    for (const [pattern, h] of Object.entries(app.channel_history)) {
      const k = e.keyOf(['channel_history', pattern, 'rewind']);
      if (c.ok(k, e.keyOf(['channel_history', pattern, 'size'])) && h.rewind > h.size) c.fail(k, `must be ≤ size (${h.size})`, h.rewind);
    }
  }
  if (!Array.isArray(app.webhooks)) return;
  app.webhooks.forEach((w, i) => {
    const wk = (...p: (string | number)[]) => e.keyOf(['webhooks', i, ...p]);
    if (c.ok(wk('headers')) && isMapping(w.headers)) {
      for (const [name, value] of Object.entries(w.headers)) {
        if (!HEADER_NAME.test(name)) c.fail(wk('headers'), `has ${JSON.stringify(name)}, which is not an HTTP header name`, undefined, false);
        else if (typeof value === 'string' && /[\r\n\0]/.test(value)) c.fail(wk('headers', name), 'must not contain CR, LF or NUL', undefined, false);
      }
    }
    if (c.ok(wk('url')) && typeof w.url === 'string' && w.url.startsWith('lambda://') && !lambdaArn(w.url.slice('lambda://'.length))) {
      c.fail(wk('url'), 'must be lambda://arn:<partition>:lambda:<region>:<account>:function:<name>[:<qualifier>]', w.url);
    }
  });
}

/** A Lambda function ARN (region taken from it by webhooks/lambda.ts). */
function lambdaArn(s: string): boolean {
  return /^arn:[a-z-]+:lambda:[a-z0-9-]+:\d{12}:function:[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9$_-]+)?$/.test(s);
}

/**
 * One app read from a database app store (apps/store/), checked with the same schema and
 * rules as a configured one; `label` names it in messages (`postgres apps row id=7`).
 * Returns the app, or the messages of what is wrong with it.
 */
export function validateStoredApp(raw: Record<string, unknown>, g: GlobalConfig, label: string): { app: AppConfig | null; issues: string[] } {
  const c = new Checker();
  const e: Entry = { path: label, raw, keyOf: (p) => (p.length === 0 ? label : `${label}: ${keyOf('', p)}`) };
  check(c, AppSchema, raw, e.keyOf);
  if (c.issues.length > 0) return { app: null, issues: c.issues.map((i) => i.message) };
  const app = resolve(decode(AppSchema, raw) as Record<string, unknown>, g);
  app.hooks = raw.hooks === undefined || raw.hooks === null ? null : appHooks(c, e.keyOf(['hooks']), raw.hooks);
  appRules(c, e, app);
  return c.issues.length > 0 ? { app: null, issues: c.issues.map((i) => i.message) } : { app, issues: [] };
}
