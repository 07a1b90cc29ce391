// App part of the validation pass (validate.ts): gathers apps from `app_manager.array.apps`,
// top-level `apps` and the SERVICE_DEFAULT_APP_* env app, then checks each field with
// the app's own key path (`apps[1].max_connections`) or, for the env app, the env var name.

import type { AppConfig, ChannelDeltaSetting, WebhookConfig } from './types';
import { appDefaults, WEBHOOK_EVENT_TYPES, type AppLimitDefaults, type GlobalConfig } from './defaults';
import { isMapping, suggest, type Checker } from './checker';
import { HEADER_NAME } from './validate';
import { validateChannelHistory } from './validate-history';

/** The default app assembled by env.ts: raw field values plus which env var set each one. */
export interface EnvApp {
  value: Record<string, unknown>;
  /** field name → env var name, for messages. */
  keys: Record<string, string>;
}

const APP_FIELDS: readonly string[] = ['id', 'key', 'secret', ...Object.keys(appDefaults(dummyGlobal()))];
const DELTA_FIELDS = ['enabled', 'algorithm', 'conflation_key', 'max_messages_per_key', 'max_conflation_keys', 'enable_tags'];
const WEBHOOK_FIELDS = ['url', 'event_types', 'headers'];
/** Ids and keys appear in URL paths (/apps/{id}/…, /app/{key}). */
const IDENT = /^[^\s/?#]+$/;

interface Entry { path: string; raw: unknown; keyOf: (field: string) => string }

export function validateApps(c: Checker, tree: Record<string, unknown>, g: GlobalConfig, envApp: EnvApp | null): AppConfig[] {
  const entries: Entry[] = [];
  const am = tree.app_manager as Record<string, unknown>;
  // Apps come from the configuration (the array driver); the spec's other app stores are not in this build.
  if (c.oneOf('app_manager.driver', am.driver, ['array', 'memory'] as const) === 'memory') {
    c.fail('app_manager.driver', 'must be array: the memory app store is not in this build of ringcast (apps come from the configuration)', 'memory');
  }
  for (const path of ['app_manager.array.apps', 'apps']) {
    const list = path === 'apps' ? tree.apps : (am.array as Record<string, unknown>).apps;
    if (list === null || list === undefined) continue;
    if (!Array.isArray(list)) {
      c.fail(path, 'must be a list of apps', list);
      continue;
    }
    list.forEach((raw, i) => entries.push({ path: `${path}[${i}]`, raw, keyOf: (f) => `${path}[${i}].${f}` }));
  }
  if (envApp) {
    const envEntry: Entry = { path: 'SERVICE_DEFAULT_APP', raw: envApp.value, keyOf: (f) => envApp.keys[f] ?? `SERVICE_DEFAULT_APP (${f})` };
    const same = entries.findIndex((e) => isMapping(e.raw) && idString(e.raw.id) === envApp.value.id);
    if (same >= 0) entries[same] = envEntry; // the env app replaces a configured app with the same id
    else entries.push(envEntry);
  }
  if (entries.length === 0) {
    c.report('apps', 'no apps configured: set apps in config.yaml or SERVICE_DEFAULT_APP_ID/KEY/SECRET');
    return [];
  }

  const defaults = appDefaults(g);
  const apps: AppConfig[] = [];
  const seen = { id: new Map<string, string>(), key: new Map<string, string>() };
  for (const e of entries) {
    const app = validateApp(c, e, defaults);
    if (!app) continue;
    for (const f of ['id', 'key'] as const) {
      if (!c.ok(e.keyOf(f))) continue;
      const prev = seen[f].get(app[f]);
      if (prev !== undefined) c.fail(e.keyOf(f), `must be unique, but ${prev} has the same ${f} ${JSON.stringify(app[f])}`, undefined, false);
      else seen[f].set(app[f], e.path);
    }
    apps.push(app);
  }
  return apps;
}

function idString(v: unknown): unknown {
  return typeof v === 'number' && Number.isInteger(v) ? String(v) : v;
}

function validateApp(c: Checker, e: Entry, d: AppLimitDefaults): AppConfig | null {
  if (!isMapping(e.raw)) {
    c.fail(e.path, 'must be a mapping with id, key and secret', e.raw);
    return null;
  }
  const r = e.raw;
  for (const k of Object.keys(r)) {
    if (!APP_FIELDS.includes(k)) c.fail(e.keyOf(k), `is not a known app setting${suggest(k, APP_FIELDS)}`, undefined, false);
  }
  const k = e.keyOf;
  const has = (f: string) => r[f] !== undefined;
  const ident = (f: 'id' | 'key'): string => {
    const v = idString(r[f]);
    if (typeof v !== 'string' || !IDENT.test(v)) c.fail(k(f), "must be a non-empty string without spaces, '/', '?' or '#'", r[f]);
    return v as string;
  };
  const pos = (f: keyof AppLimitDefaults): number => (has(f) ? c.int(k(f), r[f], 1) : (d[f] as number));
  const bool = (f: keyof AppLimitDefaults): boolean => (has(f) ? c.bool(k(f), r[f]) : (d[f] as boolean));
  // null, -1 or absent = unlimited
  const unlimited = (f: keyof AppLimitDefaults): number | null =>
    !has(f) || r[f] === null || r[f] === -1 ? null : c.int(k(f), r[f], 1, { nullable: true });

  const secret = r.secret;
  if (typeof secret !== 'string' || secret === '') c.fail(k('secret'), 'must be a non-empty string (quote it in YAML)', secret);

  return {
    id: ident('id'),
    key: ident('key'),
    secret: secret as string,
    enabled: bool('enabled'),
    allowed_origins: has('allowed_origins') ? c.strList(k('allowed_origins'), r.allowed_origins) : [],
    max_connections: unlimited('max_connections'),
    max_client_events_per_second: pos('max_client_events_per_second'),
    max_backend_events_per_second: unlimited('max_backend_events_per_second'),
    max_event_payload_in_kb: pos('max_event_payload_in_kb'),
    max_event_channels_at_once: pos('max_event_channels_at_once'),
    max_event_batch_size: pos('max_event_batch_size'),
    max_event_name_length: pos('max_event_name_length'),
    max_channel_name_length: pos('max_channel_name_length'),
    max_message_size_kb: pos('max_message_size_kb'),
    max_presence_members_per_channel: pos('max_presence_members_per_channel'),
    max_presence_member_size_in_kb: pos('max_presence_member_size_in_kb'),
    enable_client_messages: bool('enable_client_messages'),
    subscription_count_events: bool('subscription_count_events'),
    enable_user_authentication: bool('enable_user_authentication'),
    enable_watchlist_events: bool('enable_watchlist_events'),
    // seconds; null or absent = connections need not authenticate
    user_authentication_timeout: !has('user_authentication_timeout') || r.user_authentication_timeout === null ? null
      : c.int(k('user_authentication_timeout'), r.user_authentication_timeout, 1, { nullable: true, rule: 'must be a positive integer (seconds) or null' }),
    webhooks: has('webhooks') ? webhooks(c, k('webhooks'), r.webhooks) : [],
    channel_delta_compression: has('channel_delta_compression')
      ? channelDelta(c, k('channel_delta_compression'), r.channel_delta_compression) : {},
    channel_history: validateChannelHistory(c, k('channel_history'), r.channel_history),
  };
}

function webhooks(c: Checker, key: string, v: unknown): WebhookConfig[] {
  if (!Array.isArray(v)) {
    c.fail(key, 'must be a list of {url, event_types, headers}', v);
    return [];
  }
  return v.map((w, i) => {
    const wk = `${key}[${i}]`;
    if (!isMapping(w)) {
      c.fail(wk, 'must be a mapping with url and event_types', w);
      return { url: '', event_types: [], headers: {} };
    }
    for (const f of Object.keys(w)) {
      if (!WEBHOOK_FIELDS.includes(f)) c.fail(`${wk}.${f}`, `is not a known webhook setting${suggest(f, WEBHOOK_FIELDS)}`, undefined, false);
    }
    if (typeof w.url !== 'string' || !validUrl(w.url)) c.fail(`${wk}.url`, 'must be an http://, https:// or lambda:// URL', w.url);
    const types = w.event_types;
    if (!Array.isArray(types) || types.length === 0) {
      c.fail(`${wk}.event_types`, `must be a non-empty list of: ${WEBHOOK_EVENT_TYPES.join(', ')}`, types);
    } else {
      types.forEach((t, j) => {
        if (!(WEBHOOK_EVENT_TYPES as readonly unknown[]).includes(t)) {
          c.fail(`${wk}.event_types[${j}]`, `must be one of ${WEBHOOK_EVENT_TYPES.join(', ')}`, t);
        }
      });
    }
    const headers = w.headers ?? {};
    if (!isMapping(headers) || Object.values(headers).some((h) => typeof h !== 'string')) {
      c.fail(`${wk}.headers`, 'must be a mapping of header name to string value', headers);
    } else {
      for (const [name, value] of Object.entries(headers)) {
        if (!HEADER_NAME.test(name)) c.fail(`${wk}.headers`, `has ${JSON.stringify(name)}, which is not an HTTP header name`, undefined, false);
        else if (/[\r\n\0]/.test(value as string)) c.fail(`${wk}.headers.${name}`, 'must not contain CR, LF or NUL', undefined, false);
      }
    }
    if (typeof w.url === 'string' && w.url.startsWith('lambda://') && !lambdaArn(w.url.slice('lambda://'.length))) {
      c.fail(`${wk}.url`, 'must be lambda://arn:<partition>:lambda:<region>:<account>:function:<name>[:<qualifier>]', w.url);
    }
    return { url: w.url as string, event_types: [...(types as string[])], headers: { ...(headers as Record<string, string>) } };
  });
}

/** A Lambda function ARN (region taken from it by webhooks/lambda.ts). */
function lambdaArn(s: string): boolean {
  return /^arn:[a-z-]+:lambda:[a-z0-9-]+:\d{12}:function:[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9$_-]+)?$/.test(s);
}

function validUrl(s: string): boolean {
  if (/^lambda:\/\/\S+$/.test(s)) return true;
  if (!/^https?:\/\//i.test(s)) return false;
  try {
    return new URL(s).hostname !== '';
  } catch {
    return false;
  }
}

const DELTA_STRINGS = ['Fossil', 'Xdelta3', 'disabled', 'inherit'] as const;

function channelDelta(c: Checker, key: string, v: unknown): Record<string, ChannelDeltaSetting> {
  if (!isMapping(v)) {
    c.fail(key, 'must be a mapping of channel pattern to setting', v);
    return {};
  }
  const out: Record<string, ChannelDeltaSetting> = {};
  for (const [pattern, s] of Object.entries(v)) {
    const pk = `${key}.${pattern}`;
    if (!/^(\*|\*?[^*\s]+|[^*\s]+\*)$/.test(pattern)) {
      c.fail(pk, "has an invalid pattern: use an exact channel name, 'prefix-*', '*-suffix' or '*'", undefined, false);
    }
    if (typeof s === 'string') {
      out[pattern] = c.oneOf(pk, s, DELTA_STRINGS);
      continue;
    }
    if (!isMapping(s)) {
      c.fail(pk, `must be one of ${DELTA_STRINGS.join(', ')} or a mapping {${DELTA_FIELDS.join(', ')}}`, s);
      continue;
    }
    for (const f of Object.keys(s)) {
      if (!DELTA_FIELDS.includes(f)) c.fail(`${pk}.${f}`, `is not a known delta setting${suggest(f, DELTA_FIELDS)}`, undefined, false);
    }
    const optPos = (f: string) => (s[f] == null ? null : c.int(`${pk}.${f}`, s[f], 1, { nullable: true }));
    out[pattern] = {
      enabled: s.enabled === undefined ? true : c.bool(`${pk}.enabled`, s.enabled),
      algorithm: s.algorithm == null ? null : c.oneOf(`${pk}.algorithm`, s.algorithm, ['Fossil', 'Xdelta3'] as const),
      conflation_key: s.conflation_key == null ? null : c.str(`${pk}.conflation_key`, s.conflation_key),
      max_messages_per_key: optPos('max_messages_per_key'),
      max_conflation_keys: optPos('max_conflation_keys'),
      enable_tags: s.enable_tags === undefined ? false : c.bool(`${pk}.enable_tags`, s.enable_tags),
    };
  }
  return out;
}

function dummyGlobal(): GlobalConfig {
  const n = 0;
  return {
    event_limits: { max_channels_at_once: n, max_name_length: n, max_payload_in_kb: n, max_batch_size: n },
    channel_limits: { max_name_length: n, cache_ttl: n },
    websocket: { max_payload_kb: n },
    presence: { max_members_per_channel: n, max_member_size_in_kb: n },
  } as GlobalConfig;
}
