// Every built-in default in one place. `defaultConfig()` returns a fresh, mutable tree
// (everything but `apps`) that the loader merges config.yaml, env and overrides into.
// App defaults are not here: an app's limits default to the resolved global values
// (event_limits, channel_limits, presence, websocket), see `appDefaults()`.

import { availableParallelism } from 'node:os';
import type { AppConfig, Config } from './types';

export type GlobalConfig = Omit<Config, 'apps'>;

/** Upper bound for `workers` (validate.ts enforces it; the default is capped to it). */
export const MAX_WORKERS = 256;

export function defaultConfig(): GlobalConfig {
  return {
    host: '0.0.0.0',
    port: 6001,
    domain: 'localhost',
    workers: Math.min(MAX_WORKERS, Math.max(1, availableParallelism())),
    shutdown_grace_period: 10_000,

    unix_socket: { enabled: false, path: '/tmp/ringcast.sock', permission_mode: 0o660 },
    ssl: { enabled: false, cert_path: '', key_path: '', redirect_http: false, http_port: 80 },

    adapter: {
      driver: 'local',
      cluster_health: { enabled: true, heartbeat_interval_ms: 10_000, node_timeout_ms: 30_000, cleanup_interval_ms: 10_000 },
      nats: { servers: ['nats://127.0.0.1:4222'], user: null, password: null, token: null, prefix: 'ringcast' },
      buffer_multiplier_per_cpu: 64,
    },
    cache: { driver: 'memory' },
    queue: { driver: 'sync' },
    rate_limiter: {
      enabled: true,
      driver: 'memory',
      api: { max_requests: null, window_seconds: 60, trust_hops: 0 },
      websocket: { max_requests: null, window_seconds: 60 },
    },
    database: {
      redis: {
        host: '127.0.0.1',
        port: 6379,
        username: null,
        password: null,
        db: 0,
        key_prefix: '',
        pool_min: 2,
        pool_max: 10,
        sentinels: [],
        sentinel_password: null,
        name: 'mymaster',
      },
      redis_cluster: { nodes: [], username: null, password: null, key_prefix: '' },
      pooling: { enabled: false, min: 2, max: 10 },
    },
    tag_filtering: { enabled: false, max_nodes: 50 },
    http_fallback: { enabled: true, path: '/pusher', heartbeat_interval: 25, disconnect_delay: 5, max_sessions: 10_000 },
    cors: {
      origin: ['*'],
      methods: ['GET', 'POST', 'OPTIONS'],
      allowed_headers: [
        'Origin', 'Content-Type', 'X-Auth-Token', 'X-Requested-With', 'Accept',
        'Authorization', 'X-CSRF-TOKEN', 'XSRF-TOKEN', 'X-Socket-Id',
      ],
      credentials: false,
    },
    metrics: { enabled: false, driver: 'prometheus', host: '0.0.0.0', port: 9601, prefix: 'ringcast_' },
    console: { enabled: false, host: '127.0.0.1', port: 9602, token: null },
    websocket: {
      max_payload_kb: 64,
      max_messages: 1000,
      max_bytes: 1_048_576, // 1 MiB of buffered output per socket before backpressure
      auto_ping: true,
      ping_interval: 30,
      activity_timeout: 120,
      pong_timeout: 30,
      on_backpressure: 'drop',
    },
    bus: { ring_bytes: null, max_spill_bytes: 64 * 1024 * 1024 },
    http: { request_limit_in_mb: 10 },
    log: { level: 'info', output_format: 'json', colors_enabled: false, include_target: false },
    event_limits: { max_channels_at_once: 100, max_name_length: 200, max_payload_in_kb: 100, max_batch_size: 10 },
    channel_limits: { max_name_length: 200, cache_ttl: 3600 },
    presence: { max_members_per_channel: 100, max_member_size_in_kb: 2 },
    delta_compression: {
      enabled: true,
      algorithm: 'Fossil',
      full_message_interval: 10,
      min_message_size: 100,
      max_state_age_secs: 300,
      max_channel_states_per_socket: 100,
      cluster_coordination: false,
      omit_delta_algorithm: false,
      pool_size: 0,
    },
    webhooks: {
      batching: { enabled: false, duration: 50, size: 50 },
      key_header: 'X-Pusher-Key',
      signature_header: 'X-Pusher-Signature',
      timeout_ms: 5000,
      retry: { max_retries: 3, initial_delay_ms: 1000, max_delay_ms: 60_000 },
      max_queue: 10_000,
      concurrency: 16,
      lambda_endpoint: null,
    },
    protocol: { event_prefix: 'pusher' },
  };
}

/**
 * The raw tree the loader merges into: the global defaults plus the two places apps
 * can be listed. Its shape is also the list of known YAML keys (typo protection).
 */
export function defaultRawTree(): Record<string, unknown> {
  return {
    ...defaultConfig(),
    apps: [],
    app_manager: { driver: 'array', array: { apps: [] } },
  };
}

export type AppLimitDefaults = Omit<AppConfig, 'id' | 'key' | 'secret'>;

/** Per-app defaults, derived from the (validated) global config. Fresh object each call. */
export function appDefaults(g: GlobalConfig): AppLimitDefaults {
  return {
    enabled: true,
    allowed_origins: [],
    max_connections: null,
    max_client_events_per_second: 1000,
    max_backend_events_per_second: null,
    max_event_payload_in_kb: g.event_limits.max_payload_in_kb,
    max_event_channels_at_once: g.event_limits.max_channels_at_once,
    max_event_batch_size: g.event_limits.max_batch_size,
    max_event_name_length: g.event_limits.max_name_length,
    max_channel_name_length: g.channel_limits.max_name_length,
    max_message_size_kb: g.websocket.max_payload_kb,
    max_presence_members_per_channel: g.presence.max_members_per_channel,
    max_presence_member_size_in_kb: g.presence.max_member_size_in_kb,
    enable_client_messages: true,
    subscription_count_events: false,
    enable_user_authentication: true,
    enable_watchlist_events: false,
    user_authentication_timeout: null,
    webhooks: [],
    channel_delta_compression: {},
  };
}

export const WEBHOOK_EVENT_TYPES = [
  'channel_occupied', 'channel_vacated', 'member_added', 'member_removed',
  'client_event', 'cache_miss', 'subscription_count',
] as const;
