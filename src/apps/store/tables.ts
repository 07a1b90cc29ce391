// The three table shapes an app store reads, turned into ringcast app fields (the
// AppSchema names; config/apps.ts validates them as it does a configured app):
//   ringcast  id, key, secret, enabled, options (JSON of every other app option)
//   soketi    `apps`: flat limit columns with `*_per_sec` / `max_read_req_per_sec`,
//             webhooks JSON; in DynamoDB PascalCase attributes (AppId, AppKey, …)
//   sockudo   `applications`: the same limits named `*_per_second`, and JSON columns
//             webhooks, allowed_origins, channel_delta_compression, policy, …
// Names are matched in snake_case, camelCase or PascalCase alike. A value that means
// "unlimited" or "not set" in the peers (null, -1, 0 for a limit) takes ringcast's
// default; a column ringcast has no equivalent for is ignored.

import type { TableSchema } from './port';

/** snake_case of a column or attribute name: AppKey → app_key, maxConnections → max_connections. */
export function snake(name: string): string {
  return name.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();
}

/** The shape of a table from its column or attribute names (snake_cased); null when it is none of them. */
export function detectSchema(names: readonly string[]): TableSchema | null {
  const cols = new Set(names.map(snake));
  const has = (...c: string[]) => c.some((x) => cols.has(x));
  if (!(has('id', 'app_id') && has('key', 'app_key') && has('secret', 'app_secret'))) return null;
  if (has('options') && !has('max_connections')) return 'ringcast';
  if (has('max_backend_events_per_sec', 'max_client_events_per_sec', 'max_read_req_per_sec')) return 'soketi';
  if (has('max_backend_events_per_second', 'max_client_events_per_second', 'policy', 'allowed_origins', 'enable_watchlist_events')) return 'sockudo';
  return has('app_id') ? 'soketi' : null;
}

/** null, -1 or 0 = unlimited (ringcast null). */
const UNLIMITED = ['max_connections', 'max_backend_events_per_second'];
/** Positive limits: a value ≤ 0 or null takes ringcast's default. */
const LIMITS = [
  'max_client_events_per_second', 'max_presence_members_per_channel', 'max_presence_member_size_in_kb',
  'max_channel_name_length', 'max_event_channels_at_once', 'max_event_name_length', 'max_event_payload_in_kb',
  'max_event_batch_size',
];
const BOOLS = ['enabled', 'enable_client_messages', 'enable_user_authentication', 'enable_watchlist_events'];
/** The peers' names of ringcast's fields. */
const RENAMES: Record<string, string> = {
  app_id: 'id', app_key: 'key', app_secret: 'secret',
  max_backend_events_per_sec: 'max_backend_events_per_second', max_client_events_per_sec: 'max_client_events_per_second',
};
const JSON_FIELDS: Record<TableSchema, string[]> = {
  ringcast: [],
  soketi: ['webhooks'],
  sockudo: ['webhooks', 'allowed_origins', 'channel_delta_compression'],
};

function num(v: unknown): number | null {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  if (typeof v === 'string' && /^-?\d+$/.test(v.trim())) return Number(v);
  return null;
}

function boolOf(v: unknown): unknown {
  if (typeof v === 'boolean') return v;
  if (v instanceof Uint8Array) return v.length > 0 && v.some((b) => b !== 0 && b !== 0x30);
  const n = num(v);
  if (n !== null) return n !== 0;
  if (typeof v === 'string' && /^(true|false)$/i.test(v)) return v.toLowerCase() === 'true';
  return v;
}

function jsonOf(v: unknown): unknown {
  if (typeof v !== 'string') return v;
  try {
    return JSON.parse(v);
  } catch {
    return v; // validation names it
  }
}

/** A peer's webhook ({url, lambda_function, event_types, headers, filter}) as ringcast's {url, event_types, headers}. */
function webhook(w: unknown): unknown {
  if (w === null || typeof w !== 'object') return w;
  const o = Object.fromEntries(Object.entries(w).map(([k, v]) => [snake(k), v]));
  const out: Record<string, unknown> = { url: o.url, event_types: o.event_types };
  if (o.headers !== undefined && o.headers !== null) out.headers = o.headers;
  return out;
}

/** One row or item as ringcast app fields; undefined fields are left out. */
export function rowToApp(schema: TableSchema, row: Record<string, unknown>): Record<string, unknown> {
  const src: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(row)) {
    const s = snake(k);
    src[RENAMES[s] ?? s] = v;
  }
  const out: Record<string, unknown> = {};
  for (const f of ['id', 'key', 'secret']) {
    const v = src[f];
    out[f] = typeof v === 'number' || typeof v === 'bigint' ? String(v) : v;
  }
  if (src.enabled !== undefined && src.enabled !== null) out.enabled = boolOf(src.enabled);
  if (schema === 'ringcast') {
    const opts = jsonOf(src.options ?? '{}');
    if (opts !== null && typeof opts === 'object' && !Array.isArray(opts)) {
      for (const [k, v] of Object.entries(opts)) if (!(k in out)) out[k] = v;
    } else {
      out.options = opts; // named by validation as not an app setting
    }
    return out;
  }
  for (const f of UNLIMITED) {
    if (!(f in src)) continue;
    const n = num(src[f]);
    out[f] = n === null || n <= 0 ? null : n;
  }
  for (const f of LIMITS) {
    const n = num(src[f]);
    if (n !== null && n > 0) out[f] = n;
  }
  for (const f of BOOLS) if (f !== 'enabled' && src[f] !== undefined && src[f] !== null) out[f] = boolOf(src[f]);
  for (const f of JSON_FIELDS[schema]) {
    const v = jsonOf(src[f]);
    if (v === undefined || v === null) continue;
    out[f] = f === 'webhooks' && Array.isArray(v) ? v.map(webhook) : v;
  }
  return out;
}

/** The columns of ringcast's own table: an app split into its identity and the options JSON. */
export function appToRow(app: Record<string, unknown>): { id: string; key: string; secret: string; enabled: boolean; options: string } {
  const { id, key, secret, enabled, ...options } = app;
  return { id: String(id), key: String(key), secret: String(secret), enabled: enabled !== false, options: JSON.stringify(options) };
}
