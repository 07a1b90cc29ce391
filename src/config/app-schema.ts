// The per-app schema: an app's identity, limits and switches, and its per-app maps
// (webhooks, channel_delta_compression, channel_history, hooks), then the app list and
// app_manager. A per-app setting goes in AppSchema (Type.Optional, with a `default` or an
// `x-default-from` global key); composed into ConfigFileSchema in schema.ts.

import { Type, type StaticDecode } from '@sinclair/typebox';
import { bool, choice, int, intOrNull, meta, oneOf, section, strList } from './schema-kit';
import { DELTA_ALGORITHMS, MAX_HISTORY_SIZE, WEBHOOK_EVENT_TYPES, type DeltaAlgorithm } from './constants';
import type { AppHooks } from './hooks';

/** An app limit whose default is a global key's value. */
function limit(from: string, doc: string, env?: string) {
  return Type.Optional(Type.Integer({ minimum: 1, 'x-default-from': from, ...meta({ doc, env }) }));
}

/** Ids and keys appear in URL paths (/apps/{id}/…, /app/{key}); a YAML number is taken as its digits. */
function ident(doc: string, env: string) {
  return Type.Transform(Type.Union([Type.String({ pattern: '^[^\\s/?#]+$' }), Type.Integer()],
    { 'x-env-kind': 'str', ...meta({ doc, env, rule: "must be a non-empty string without spaces, '/', '?' or '#'" }) }))
    .Decode((v) => String(v)).Encode((v) => v);
}

/** null, -1 or absent = unlimited. */
function unlimited(doc: string, env?: string) {
  return Type.Optional(Type.Transform(Type.Union([Type.Integer({ minimum: 1 }), Type.Literal(-1), Type.Null()],
    { default: null, ...meta({ doc, env, rule: 'must be a positive integer or null' }) }))
    .Decode((v) => (v === -1 ? null : v)).Encode((v) => v));
}

const optBool = (def: boolean, doc: string) => Type.Optional(bool(def, { doc }));

export const WebhookSchema = Type.Transform(Type.Object({
  url: Type.String({ format: 'ringcast-webhook-url', ...meta({
    doc: 'http(s):// endpoint, or lambda://arn:<partition>:lambda:<region>:<account>:function:<name>[:<qualifier>].',
    rule: 'must be an http://, https:// or lambda:// URL',
  }) }),
  event_types: Type.Array(choice<string>(WEBHOOK_EVENT_TYPES), {
    minItems: 1, ...meta({ doc: 'Events sent to it.', rule: `must be a non-empty list of: ${WEBHOOK_EVENT_TYPES.join(', ')}` }),
  }),
  headers: Type.Optional(Type.Record(Type.String(), Type.String({ 'x-rule': 'must be a mapping of header name to string value', 'x-at-parent': true }), {
    default: {}, ...meta({ doc: 'Extra request headers (name: value).', rule: 'must be a mapping of header name to string value' }),
  })),
}, { additionalProperties: false, 'x-unknown': 'is not a known webhook setting', 'x-rule': 'must be a mapping with url and event_types' }))
  .Decode((w) => ({ url: w.url, event_types: [...w.event_types], headers: { ...(w.headers ?? {}) } }))
  .Encode((w) => w);

export const ChannelHistoryValue = Type.Transform(Type.Object({
  size: int(1, 1, { max: MAX_HISTORY_SIZE, doc: 'Messages kept per channel.' }),
  ttl: Type.Integer({ minimum: 1, ...meta({ doc: 'Seconds a message is kept.', rule: 'must be a positive integer (seconds)' }) }),
  rewind: Type.Optional(int(0, 0, { max: MAX_HISTORY_SIZE, doc: 'Last messages a new subscription gets (≤ size).' })),
}, { additionalProperties: false, 'x-unknown': 'is not a known history setting', 'x-rule': 'must be a mapping {size, ttl, rewind}' }))
  .Decode((h) => ({ size: h.size, ttl: h.ttl, rewind: h.rewind ?? 0 }))
  .Encode((h) => h);

const DELTA_STRINGS = ['Fossil', 'Xdelta3', 'disabled', 'inherit'] as const;
const DeltaObject = Type.Transform(Type.Object({
  enabled: Type.Optional(bool(true, { doc: 'Deltas on this channel.' })),
  algorithm: Type.Optional(choice<DeltaAlgorithm, null>(DELTA_ALGORITHMS, [Type.Null()], { default: null, description: 'Algorithm; null = the global one.' })),
  conflation_key: Type.Optional(Type.Union([Type.String({ pattern: '\\S' }), Type.Null()],
    { default: null, ...meta({ doc: 'Dotted path into the event data: a separate delta stream per value.', rule: 'must be a non-empty string' }) })),
  max_messages_per_key: Type.Optional(intOrNull(null, 1, { doc: 'Base messages kept per conflation key.' })),
  max_conflation_keys: Type.Optional(intOrNull(null, 1, { doc: 'Conflation keys kept per channel.' })),
  enable_tags: Type.Optional(bool(false, { doc: 'Tags on this channel\'s messages.' })),
}, { additionalProperties: false, 'x-unknown': 'is not a known delta setting' }))
  .Decode((s) => ({
    enabled: s.enabled ?? true, algorithm: s.algorithm ?? null, conflation_key: s.conflation_key ?? null,
    max_messages_per_key: s.max_messages_per_key ?? null, max_conflation_keys: s.max_conflation_keys ?? null, enable_tags: s.enable_tags ?? false,
  }))
  .Encode((s) => s);

export const ChannelDeltaValue = choice<typeof DELTA_STRINGS[number], StaticDecode<typeof DeltaObject>>(DELTA_STRINGS, [DeltaObject], {
  'x-rule': `must be one of ${DELTA_STRINGS.join(', ')} or a mapping {enabled, algorithm, conflation_key, max_messages_per_key, max_conflation_keys, enable_tags}`,
});

export const AppSchema = Type.Object({
  id: ident('App id (in /apps/<id>/… API paths); unique.', 'SERVICE_DEFAULT_APP_ID'),
  key: ident('App key (clients connect to /app/<key>); unique.', 'SERVICE_DEFAULT_APP_KEY'),
  secret: Type.String({ minLength: 1, ...meta({ doc: 'Signs API requests and channel auth; quote it in YAML.', env: 'SERVICE_DEFAULT_APP_SECRET', rule: 'must be a non-empty string (quote it in YAML)' }) }),
  enabled: optBool(true, 'false: connections and API requests for the app are refused.'),
  allowed_origins: Type.Optional(strList([], { doc: 'Origins allowed to connect: "example.com", "https://*.example.com", "*"; [] = any.', env: 'SERVICE_DEFAULT_APP_ALLOWED_ORIGINS' })),
  max_connections: unlimited('Connections at once; null or -1 = unlimited.', 'SERVICE_DEFAULT_APP_MAX_CONNECTIONS'),
  max_client_events_per_second: Type.Optional(int(1000, 1, { doc: 'Client events per second per connection; also the per-app HTTP API token bucket.' })),
  max_backend_events_per_second: unlimited('Events per second published through the HTTP API; null or -1 = unlimited.'),
  max_event_payload_in_kb: limit('event_limits.max_payload_in_kb', 'Largest event data (KB).', 'SERVICE_DEFAULT_APP_MAX_EVENT_PAYLOAD_IN_KB'),
  max_event_channels_at_once: limit('event_limits.max_channels_at_once', 'Channels one publish may name.'),
  max_event_batch_size: limit('event_limits.max_batch_size', 'Events in one batch publish.'),
  max_event_name_length: limit('event_limits.max_name_length', 'Longest event name.'),
  max_channel_name_length: limit('channel_limits.max_name_length', 'Longest channel name.'),
  max_message_size_kb: limit('websocket.max_payload_kb', 'Largest client message (KiB).'),
  max_presence_members_per_channel: limit('presence.max_members_per_channel', 'Members of one presence channel.'),
  max_presence_member_size_in_kb: limit('presence.max_member_size_in_kb', 'Largest presence member info (KB).'),
  enable_client_messages: optBool(true, 'Client events (client-*) on private and presence channels.'),
  subscription_count_events: optBool(false, 'Send pusher_internal:subscription_count.'),
  enable_user_authentication: optBool(true, 'Accept pusher:signin (false: refused with pusher:error 4009 and close).'),
  enable_watchlist_events: optBool(false, 'pusher_internal:watchlist_events for signed-in users with a user_data.watchlist (online/offline).'),
  user_authentication_timeout: Type.Optional(intOrNull(null, 1, {
    doc: 'Seconds a connection has to sign in or subscribe to a private/presence channel, else closed with 4009; null = no limit.',
    rule: 'must be a positive integer (seconds) or null',
  })),
  webhooks: Type.Optional(Type.Array(WebhookSchema, { default: [], ...meta({ doc: 'Webhook endpoints (see Webhook below).', rule: 'must be a list of {url, event_types, headers}' }) })),
  channel_delta_compression: Type.Optional(Type.Record(Type.String({ pattern: '^(\\*|\\*?[^*\\s]+|[^*\\s]+\\*)$' }), ChannelDeltaValue, {
    additionalProperties: false, default: {},
    'x-unknown': "has an invalid pattern: use an exact channel name, 'prefix-*', '*-suffix' or '*'",
    ...meta({ doc: 'Per channel pattern (exact, "prefix-*", "*-suffix" or "*"): Fossil, Xdelta3, disabled, inherit, or a mapping (see Channel delta setting below).', rule: 'must be a mapping of channel pattern to setting' }),
  })),
  channel_history: Type.Optional(Type.Record(Type.String({ pattern: '^(\\*|\\*?[^*\\s]+|[^*\\s]+\\*)$' }), ChannelHistoryValue, {
    additionalProperties: false, default: {},
    'x-unknown': "has an invalid pattern: use an exact channel name, 'prefix-*', '*-suffix' or '*'",
    ...meta({ doc: 'Per channel pattern (exact, "prefix-*", "*-suffix" or "*"): {size, ttl, rewind} — keep the last size messages for ttl seconds; rewind (≤ size, default 0) of them go to every new subscription (docs/history.md).', rule: 'must be a mapping of channel pattern to {size, ttl, rewind}' }),
  })),
  // checked and resolved after the schema (config/hooks.ts, from apps.ts)
  hooks: Type.Optional(Type.Unsafe<AppHooks | null>(Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()], {
    default: null,
    ...meta({ doc: 'Backend hooks: url, timeout_ms, on_failure (deny | allow), and connect / subscribe / client_event / publish, each {enabled, url, timeout_ms, on_failure, channels, events} (docs/hooks.md); null = none.', rule: 'must be a mapping of hook settings, or null' }),
  }))),
}, { additionalProperties: false, 'x-unknown': 'is not a known app setting', 'x-rule': 'must be a mapping with id, key and secret' });

export const AppList = Type.Union([Type.Array(AppSchema), Type.Null()], { default: [], ...meta({ doc: 'Apps, each with id, key, secret and optional settings (docs/configuration.md, "Apps"); both lists are used. Ids and keys must be unique.', rule: 'must be a list of apps' }) });

/** The app store settings of `app_manager` (its `array.apps` list aside): in `Config.app_manager`. */
export const AppStoreSchema = section({
  driver: oneOf(['array', 'memory', 'postgres', 'mysql', 'dynamodb'], 'array', {
    doc: 'The app store: array (apps from the configuration only), postgres, mysql or dynamodb (apps from a table of database.<driver>, plus the configured ones; docs/app-stores.md); memory is not in this build.',
    env: 'APP_MANAGER_DRIVER', ours: true,
  }),
  table_schema: oneOf(['auto', 'ringcast', 'soketi', 'sockudo'], 'auto', {
    doc: 'Shape of the apps table: auto (detected from its columns or attributes), ringcast (made by `ringcast app-store init`), soketi or sockudo (their tables read as they are).',
    env: 'APP_MANAGER_TABLE_SCHEMA', ours: true,
  }),
  cache: section({
    enabled: bool(true, { doc: 'Keep the apps of the table in memory, read again every ttl seconds; false: read again every second.', env: 'APP_MANAGER_CACHE_ENABLED', ours: true }),
    ttl: int(60, 1, { max: 86400, doc: 'Seconds between two reads of the apps table: a change made in the database is in force within this.', env: 'APP_MANAGER_CACHE_TTL', ours: true }),
  }, 'The in-memory copy of the apps table.'),
}, 'Where apps come from.');

export const AppManagerSchema = section({
  ...AppStoreSchema.properties,
  array: section({ apps: AppList }, 'The array app store.'),
}, 'Where apps come from.');

export type AppStoreConfig = StaticDecode<typeof AppStoreSchema>;

type AppDecoded = StaticDecode<typeof AppSchema>;
/** An app with every limit resolved (app value, else the global default). */
export type AppConfig = { [K in keyof AppDecoded]-?: Exclude<AppDecoded[K], undefined> };
export type WebhookConfig = StaticDecode<typeof WebhookSchema>;
/** One entry of an app's `channel_history` (docs/protocol.md "History, rewind and recovery"). */
export type ChannelHistorySetting = StaticDecode<typeof ChannelHistoryValue>;
/** One entry of an app's `channel_delta_compression`: the string forms, or the object form. */
export type ChannelDeltaSetting = StaticDecode<typeof ChannelDeltaValue>;
