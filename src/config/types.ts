// The validated, frozen configuration handed to every thread (structured-clone safe:
// plain objects, arrays, strings, numbers, booleans, null only).
// Field names follow the YAML keys of config.yaml (snake_case) so that a key named in
// an error message is the key a user writes.

export type AdapterDriver = 'local' | 'redis' | 'redis-cluster' | 'nats';
export type CacheDriver = 'memory' | 'redis' | 'redis-cluster' | 'none';
export type QueueDriver = 'sync' | 'redis';
export type RateLimiterDriver = 'memory' | 'redis' | 'redis-cluster' | 'none';
export type DeltaAlgorithm = 'Fossil' | 'Xdelta3';

export interface WebhookConfig {
  url: string;
  event_types: string[];
  headers: Record<string, string>;
}

/** One entry of an app's `channel_delta_compression`: the string forms, or the object form. */
export type ChannelDeltaSetting =
  | 'Fossil' | 'Xdelta3' | 'disabled' | 'inherit'
  | {
      enabled: boolean;
      algorithm: DeltaAlgorithm | null;
      conflation_key: string | null;
      max_messages_per_key: number | null;
      max_conflation_keys: number | null;
      enable_tags: boolean;
    };

/** An app with every limit resolved (app value, else the global default). */
export interface AppConfig {
  id: string;
  key: string;
  secret: string;
  enabled: boolean;
  /** Origin patterns; empty array = every origin allowed. */
  allowed_origins: string[];
  /** null = unlimited. */
  max_connections: number | null;
  max_client_events_per_second: number;
  /** null = unlimited. */
  max_backend_events_per_second: number | null;
  max_event_payload_in_kb: number;
  max_event_channels_at_once: number;
  max_event_batch_size: number;
  max_event_name_length: number;
  max_channel_name_length: number;
  max_message_size_kb: number;
  max_presence_members_per_channel: number;
  max_presence_member_size_in_kb: number;
  enable_client_messages: boolean;
  subscription_count_events: boolean;
  /** pusher:signin accepted (false: refused with 4009). */
  enable_user_authentication: boolean;
  /** pusher_internal:watchlist_events for signed-in users with a user_data.watchlist. */
  enable_watchlist_events: boolean;
  /** Seconds a connection has to sign in or subscribe to a private/presence channel (4009 after); null = no limit. */
  user_authentication_timeout: number | null;
  webhooks: WebhookConfig[];
  channel_delta_compression: Record<string, ChannelDeltaSetting>;
}

export interface RedisConfig {
  host: string;
  port: number;
  username: string | null;
  password: string | null;
  db: number;
  key_prefix: string;
  pool_min: number;
  pool_max: number;
  sentinels: { host: string; port: number }[];
  sentinel_password: string | null;
  name: string;
}

export interface Config {
  host: string;
  /** 0 = pick a free ephemeral port (tests). */
  port: number;
  domain: string;
  /** Number of shard threads (>= 1). */
  workers: number;
  /** Milliseconds given to clients and webhooks on SIGTERM/SIGINT before exit. */
  shutdown_grace_period: number;

  unix_socket: { enabled: boolean; path: string; permission_mode: number };
  ssl: { enabled: boolean; cert_path: string; key_path: string; redirect_http: boolean; http_port: number };

  adapter: {
    driver: AdapterDriver;
    cluster_health: { enabled: boolean; heartbeat_interval_ms: number; node_timeout_ms: number; cleanup_interval_ms: number };
    nats: { servers: string[]; user: string | null; password: string | null; token: string | null; prefix: string };
    buffer_multiplier_per_cpu: number;
  };
  cache: { driver: CacheDriver };
  queue: { driver: QueueDriver };
  rate_limiter: {
    enabled: boolean;
    driver: RateLimiterDriver;
    api: { max_requests: number | null; window_seconds: number; trust_hops: number };
    websocket: { max_requests: number | null; window_seconds: number };
  };
  database: {
    redis: RedisConfig;
    redis_cluster: { nodes: { host: string; port: number }[]; username: string | null; password: string | null; key_prefix: string };
    pooling: { enabled: boolean; min: number; max: number };
  };
  tag_filtering: { enabled: boolean; max_nodes: number };
  // ── HTTP fallback transports (src/fallback/; PROTOCOL.md "HTTP fallback transports") ──
  http_fallback: {
    enabled: boolean;
    /** Prefix of the endpoints: {path}/app/{key}/{server}/{session}/{xhr_streaming|xhr|xhr_send}. */
    path: string;
    /** Seconds without a write before `h` is written to a stream (a poll is answered with it). */
    heartbeat_interval: number;
    /** Seconds a session lives without a receiving request before it ends like a dropped connection. */
    disconnect_delay: number;
    /** Open sessions per process, at most (new ones answer 503 past it). */
    max_sessions: number;
  };
  cors: { origin: string[]; methods: string[]; allowed_headers: string[]; credentials: boolean };
  metrics: { enabled: boolean; driver: 'prometheus'; host: string; port: number; prefix: string };
  /** The live console (src/console/): its own listener, never the public port. token null: each app's secret logs in to that app. */
  console: { enabled: boolean; host: string; port: number; token: string | null };
  websocket: {
    max_payload_kb: number;
    max_messages: number;
    max_bytes: number;
    auto_ping: boolean;
    ping_interval: number;
    /** Seconds of client silence before the server sends pusher:ping (sent to clients in connection_established). */
    activity_timeout: number;
    /** Seconds to wait for any frame after a server ping before closing with 4201. */
    pong_timeout: number;
    /** A socket over max_bytes / max_messages of queued output: skip its messages, or close it (4100). */
    on_backpressure: 'drop' | 'close';
  };
  /**
   * The inter-thread rings (src/bus): size of each ring (null: derived from the thread
   * count, bus/topology.ts ringBytesFor) and bound of each writer's spill queue.
   */
  bus: { ring_bytes: number | null; max_spill_bytes: number };
  http: { request_limit_in_mb: number };
  log: { level: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'; output_format: 'json' | 'human'; colors_enabled: boolean; include_target: boolean };
  event_limits: { max_channels_at_once: number; max_name_length: number; max_payload_in_kb: number; max_batch_size: number };
  channel_limits: { max_name_length: number; cache_ttl: number };
  presence: { max_members_per_channel: number; max_member_size_in_kb: number };
  delta_compression: {
    enabled: boolean;
    algorithm: DeltaAlgorithm;
    full_message_interval: number;
    min_message_size: number;
    max_state_age_secs: number;
    max_channel_states_per_socket: number;
    cluster_coordination: boolean;
    omit_delta_algorithm: boolean;
    /** Ours: piscina threads behind the delta sequencer; 0 (default) computes on the sequencer thread (delta/compute.ts, docs/performance.md). */
    pool_size: number;
  };
  /** Webhook delivery (src/webhooks/): the primary thread batches, signs and sends. */
  webhooks: {
    batching: { enabled: boolean; duration: number; size: number };
    /** Names of the app-key and signature headers (PROTOCOL.md: X-Pusher-Key, X-Pusher-Signature). */
    key_header: string;
    signature_header: string;
    /** Per-request timeout (ms) of an HTTP POST or a Lambda invoke. */
    timeout_ms: number;
    /** Retries after the first attempt; waits initial_delay_ms × 2^n, capped at max_delay_ms. */
    retry: { max_retries: number; initial_delay_ms: number; max_delay_ms: number };
    /** Requests waiting (sync driver; redis: RPUSHes not yet answered) past which new ones are dropped (webhooks_dropped_total). */
    max_queue: number;
    /** Requests in flight at once. */
    concurrency: number;
    /** Lambda Invoke endpoint override (e.g. a local stand-in); null = AWS's regional endpoint. */
    lambda_endpoint: string | null;
  };
  protocol: { event_prefix: 'pusher' | 'proto' };
  apps: AppConfig[];
}
