// The configuration schema: the one source of every key's type, default, validation rule,
// environment variable and description. defaults.ts, env.ts, issues.ts (messages),
// types.ts (`Config`), config.schema.json and docs/configuration.md (reference.ts) are
// all derived from it; the rules that tie several keys together are in rules.ts.
//
// This file puts the sections in config.yaml's order; each lives in the file of its concern:
//   server-schema.ts         top-level keys, unix_socket, ssl, cors, websocket, bus, http, limits, http_fallback
//   backends-schema.ts       adapter, cache, queue, rate_limiter, database
//   channels-schema.ts       event_limits, channel_limits, presence, protocol, tag_filtering,
//                            delta_compression, history, idempotency
//   backend-calls-schema.ts  webhooks, hook_client
//   ops-schema.ts            metrics, console, log, tracing
//   app-schema.ts            apps[] (AppSchema and its per-app maps), app_manager
//
// To add a key: add one entry in its section (builders in schema-kit.ts), e.g.
//   max_items: int(100, 1, { doc: 'what it does and its unit', env: 'HISTORY_MAX_ITEMS', ours: true }),
// then read it as `config.<section>.max_items` (its type follows), and run
// `npx tsc -p tsconfig.json && node scripts/config-schema.mjs` to regenerate
// config.schema.json and docs/configuration.md (test/config/reference.test.ts fails until
// they are). A new section goes in its concern's file and in GlobalSchema below. A per-app
// setting goes in AppSchema (Type.Optional, with a `default` or an `x-default-from` global
// key). A rule across keys goes in rules.ts.

import { Type, type StaticDecode } from '@sinclair/typebox';
import { HEADER_NAME, MAX_HISTORY_SIZE, MAX_WORKERS, WEBHOOK_EVENT_TYPES } from './constants';
import { bus, cors, http, httpFallback, limits, serverKeys, ssl, unixSocket, websocket } from './server-schema';
import { adapter, cache, database, queue, rateLimiter } from './backends-schema';
import { channelLimits, deltaCompression, eventLimits, history, idempotency, presence, protocol, tagFiltering } from './channels-schema';
import { hookClient, webhooks } from './backend-calls-schema';
import { liveConsole, log, metrics, tracing } from './ops-schema';
import { AppList, AppManagerSchema, type AppConfig, type AppStoreConfig } from './app-schema';

export { HEADER_NAME, MAX_HISTORY_SIZE, MAX_WORKERS, WEBHOOK_EVENT_TYPES };
export { BYTES_PER_CONNECTION } from './server-schema';
export { MIN_CLUSTER_SECRET } from './backends-schema';
export { AppManagerSchema, AppStoreSchema, AppSchema, ChannelDeltaValue, ChannelHistoryValue, WebhookSchema } from './app-schema';
export type { AppConfig, AppStoreConfig, ChannelDeltaSetting, ChannelHistorySetting, WebhookConfig } from './app-schema';

export const GlobalSchema = Type.Object({
  ...serverKeys,
  unix_socket: unixSocket,
  ssl,
  adapter,
  cache,
  queue,
  rate_limiter: rateLimiter,
  database,
  tag_filtering: tagFiltering,
  cors,
  metrics,
  console: liveConsole,
  tracing,
  websocket,
  bus,
  http,
  log,
  event_limits: eventLimits,
  channel_limits: channelLimits,
  presence,
  delta_compression: deltaCompression,
  webhooks,
  protocol,
  limits,
  http_fallback: httpFallback,
  history,
  idempotency,
  hook_client: hookClient,
}, { additionalProperties: false });

/** config.yaml: every section, apps and app_manager. */
export const ConfigFileSchema = Type.Object({
  ...GlobalSchema.properties,
  apps: AppList,
  app_manager: AppManagerSchema,
}, { additionalProperties: false });

// ---- the types every thread uses ----

export type GlobalConfig = StaticDecode<typeof GlobalSchema>;
export type HistoryConfig = GlobalConfig['history'];
export type IdempotencyConfig = GlobalConfig['idempotency'];
/** The validated, frozen configuration handed to every thread (structured-clone safe). */
export type Config = GlobalConfig & { apps: AppConfig[]; app_manager: AppStoreConfig };
