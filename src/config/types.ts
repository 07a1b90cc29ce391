// The validated, frozen configuration handed to every thread (structured-clone safe:
// plain objects, arrays, strings, numbers, booleans, null only), as schema.ts decodes it.
// Field names follow the YAML keys of config.yaml (snake_case) so that a key named in
// an error message is the key a user writes. Each field's meaning: schema.ts, or
// docs/configuration.md.

import type { Config, GlobalConfig } from './schema';

export type { AppConfig, ChannelDeltaSetting, ChannelHistorySetting, Config, HistoryConfig, IdempotencyConfig, WebhookConfig } from './schema';
export type { AppHooks, HookFailurePolicy, HookKind, HookSettings } from './hooks';

export type AdapterDriver = Config['adapter']['driver'];
export type CacheDriver = Config['cache']['driver'];
export type QueueDriver = Config['queue']['driver'];
export type RateLimiterDriver = Config['rate_limiter']['driver'];
export type DeltaAlgorithm = Config['delta_compression']['algorithm'];
export type RedisConfig = GlobalConfig['database']['redis'];
