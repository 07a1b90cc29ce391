// The validation pass over the merged raw tree (defaults → config.yaml → env → overrides,
// values still untyped): `validateGlobal` here, `validateApps` in validate-apps.ts, both
// feeding one Checker. Every failed rule adds an issue whose message starts with the
// exact key path and states the rule, e.g. `apps[1].max_connections must be a positive
// integer or null, got 0`; `Checker.throwIfAny()` reports them all in one ConfigError
// (its `key` is the first one's).

import { accessSync, constants as fsc, statSync } from 'node:fs';
import { isMapping, parseOctalMode, type Checker } from './checker';
import type { AdapterDriver, CacheDriver, QueueDriver, RateLimiterDriver } from './types';
import { MAX_WORKERS, type GlobalConfig } from './defaults';

/** Walks a dotted path through the raw tree (sections are always mappings after merging). */
function get(tree: Record<string, unknown>, path: string): unknown {
  let cur: unknown = tree;
  for (const part of path.split('.')) cur = isMapping(cur) ? cur[part] : undefined;
  return cur;
}

const ADAPTERS: readonly AdapterDriver[] = ['local', 'redis', 'redis-cluster', 'nats'];
const CACHES: readonly CacheDriver[] = ['memory', 'redis', 'redis-cluster', 'none'];
const QUEUES: readonly QueueDriver[] = ['sync', 'redis'];
const LIMITERS: readonly RateLimiterDriver[] = ['memory', 'redis', 'redis-cluster', 'none'];
const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Checks and types everything but the apps. */
export function validateGlobal(c: Checker, tree: Record<string, unknown>): GlobalConfig {
  const g = (p: string) => get(tree, p);
  const pos = (p: string) => c.int(p, g(p), 1);
  const nonNeg = (p: string) => c.int(p, g(p), 0);
  const posOrNull = (p: string) => c.int(p, g(p), 1, { nullable: true });
  const bool = (p: string) => c.bool(p, g(p));
  const str = (p: string) => c.str(p, g(p));
  const optStr = (p: string) => c.optStr(p, g(p));
  const list = (p: string) => c.strList(p, g(p));

  const cfg: GlobalConfig = {
    host: str('host'),
    port: c.port('port', g('port')),
    domain: str('domain'),
    workers: c.int('workers', g('workers'), 1, { max: MAX_WORKERS }),
    shutdown_grace_period: nonNeg('shutdown_grace_period'),
    unix_socket: { enabled: bool('unix_socket.enabled'), path: str('unix_socket.path'), permission_mode: mode(c, 'unix_socket.permission_mode', g('unix_socket.permission_mode')) },
    ssl: {
      enabled: bool('ssl.enabled'),
      cert_path: c.str('ssl.cert_path', g('ssl.cert_path'), true),
      key_path: c.str('ssl.key_path', g('ssl.key_path'), true),
      redirect_http: bool('ssl.redirect_http'),
      http_port: c.port('ssl.http_port', g('ssl.http_port')),
    },
    adapter: {
      driver: c.oneOf('adapter.driver', g('adapter.driver'), ADAPTERS),
      cluster_health: {
        enabled: bool('adapter.cluster_health.enabled'),
        heartbeat_interval_ms: pos('adapter.cluster_health.heartbeat_interval_ms'),
        node_timeout_ms: pos('adapter.cluster_health.node_timeout_ms'),
        cleanup_interval_ms: pos('adapter.cluster_health.cleanup_interval_ms'),
      },
      nats: {
        servers: list('adapter.nats.servers'),
        user: optStr('adapter.nats.user'),
        password: optStr('adapter.nats.password'),
        token: optStr('adapter.nats.token'),
        prefix: str('adapter.nats.prefix'),
      },
      buffer_multiplier_per_cpu: pos('adapter.buffer_multiplier_per_cpu'),
    },
    cache: { driver: c.oneOf('cache.driver', g('cache.driver'), CACHES) },
    queue: { driver: c.oneOf('queue.driver', g('queue.driver'), QUEUES) },
    rate_limiter: {
      enabled: bool('rate_limiter.enabled'),
      driver: c.oneOf('rate_limiter.driver', g('rate_limiter.driver'), LIMITERS),
      api: {
        max_requests: posOrNull('rate_limiter.api.max_requests'),
        window_seconds: pos('rate_limiter.api.window_seconds'),
        trust_hops: c.int('rate_limiter.api.trust_hops', g('rate_limiter.api.trust_hops'), 0, { max: 32 }),
      },
      websocket: { max_requests: posOrNull('rate_limiter.websocket.max_requests'), window_seconds: pos('rate_limiter.websocket.window_seconds') },
    },
    database: {
      redis: {
        host: str('database.redis.host'),
        port: c.port('database.redis.port', g('database.redis.port'), 1),
        username: optStr('database.redis.username'),
        password: optStr('database.redis.password'),
        db: nonNeg('database.redis.db'),
        key_prefix: c.str('database.redis.key_prefix', g('database.redis.key_prefix'), true),
        pool_min: nonNeg('database.redis.pool_min'),
        pool_max: pos('database.redis.pool_max'),
        sentinels: c.hostPorts('database.redis.sentinels', g('database.redis.sentinels')),
        sentinel_password: optStr('database.redis.sentinel_password'),
        name: str('database.redis.name'),
      },
      redis_cluster: {
        nodes: c.hostPorts('database.redis_cluster.nodes', g('database.redis_cluster.nodes')),
        username: optStr('database.redis_cluster.username'),
        password: optStr('database.redis_cluster.password'),
        key_prefix: c.str('database.redis_cluster.key_prefix', g('database.redis_cluster.key_prefix'), true),
      },
      pooling: { enabled: bool('database.pooling.enabled'), min: nonNeg('database.pooling.min'), max: pos('database.pooling.max') },
    },
    tag_filtering: { enabled: bool('tag_filtering.enabled'), max_nodes: pos('tag_filtering.max_nodes') },
    http_fallback: {
      enabled: bool('http_fallback.enabled'),
      path: fallbackPath(c, g('http_fallback.path')),
      // pusher-js waits 30 s (pongTimeout) for any frame after its ping: a heartbeat must come sooner
      heartbeat_interval: c.int('http_fallback.heartbeat_interval', g('http_fallback.heartbeat_interval'), 1, { max: 29 }),
      disconnect_delay: c.int('http_fallback.disconnect_delay', g('http_fallback.disconnect_delay'), 1, { max: 3600 }),
      max_sessions: pos('http_fallback.max_sessions'),
    },
    cors: { origin: list('cors.origin'), methods: list('cors.methods'), allowed_headers: list('cors.allowed_headers'), credentials: bool('cors.credentials') },
    metrics: {
      enabled: bool('metrics.enabled'),
      driver: c.oneOf('metrics.driver', g('metrics.driver'), ['prometheus'] as const),
      host: str('metrics.host'),
      port: c.port('metrics.port', g('metrics.port')),
      prefix: c.str('metrics.prefix', g('metrics.prefix'), true),
    },
    console: { enabled: bool('console.enabled'), host: str('console.host'), port: c.port('console.port', g('console.port')), token: optStr('console.token') },
    websocket: {
      max_payload_kb: pos('websocket.max_payload_kb'),
      max_messages: pos('websocket.max_messages'),
      max_bytes: pos('websocket.max_bytes'),
      auto_ping: bool('websocket.auto_ping'),
      // uWS idle timeouts: ping_interval + a 4–16 s margin, at most 960 s (ws/connection.ts)
      ping_interval: c.int('websocket.ping_interval', g('websocket.ping_interval'), 4, { max: 900 }),
      activity_timeout: pos('websocket.activity_timeout'),
      pong_timeout: pos('websocket.pong_timeout'),
      on_backpressure: c.oneOf('websocket.on_backpressure', g('websocket.on_backpressure'), ['drop', 'close'] as const),
    },
    bus: {
      ring_bytes: c.int('bus.ring_bytes', g('bus.ring_bytes'), 4096, { max: 2 ** 30, nullable: true }),
      max_spill_bytes: c.int('bus.max_spill_bytes', g('bus.max_spill_bytes'), 65_536, { max: 2 ** 40 }),
    },
    http: { request_limit_in_mb: pos('http.request_limit_in_mb') },
    log: {
      level: c.oneOf('log.level', g('log.level'), LEVELS),
      output_format: c.oneOf('log.output_format', g('log.output_format'), ['json', 'human'] as const),
      colors_enabled: bool('log.colors_enabled'),
      include_target: bool('log.include_target'),
    },
    event_limits: {
      max_channels_at_once: pos('event_limits.max_channels_at_once'),
      max_name_length: pos('event_limits.max_name_length'),
      max_payload_in_kb: pos('event_limits.max_payload_in_kb'),
      max_batch_size: pos('event_limits.max_batch_size'),
    },
    channel_limits: { max_name_length: pos('channel_limits.max_name_length'), cache_ttl: pos('channel_limits.cache_ttl') },
    presence: { max_members_per_channel: pos('presence.max_members_per_channel'), max_member_size_in_kb: pos('presence.max_member_size_in_kb') },
    delta_compression: {
      enabled: bool('delta_compression.enabled'),
      algorithm: c.oneOf('delta_compression.algorithm', g('delta_compression.algorithm'), ['Fossil', 'Xdelta3'] as const),
      full_message_interval: pos('delta_compression.full_message_interval'),
      min_message_size: nonNeg('delta_compression.min_message_size'),
      max_state_age_secs: pos('delta_compression.max_state_age_secs'),
      max_channel_states_per_socket: pos('delta_compression.max_channel_states_per_socket'),
      cluster_coordination: bool('delta_compression.cluster_coordination'),
      omit_delta_algorithm: bool('delta_compression.omit_delta_algorithm'),
      pool_size: c.int('delta_compression.pool_size', g('delta_compression.pool_size'), 0, { max: 64 }),
    },
    webhooks: {
      batching: { enabled: bool('webhooks.batching.enabled'), duration: pos('webhooks.batching.duration'), size: pos('webhooks.batching.size') },
      key_header: headerName(c, 'webhooks.key_header', g('webhooks.key_header')),
      signature_header: headerName(c, 'webhooks.signature_header', g('webhooks.signature_header')),
      timeout_ms: pos('webhooks.timeout_ms'),
      retry: {
        max_retries: c.int('webhooks.retry.max_retries', g('webhooks.retry.max_retries'), 0, { max: 20 }),
        initial_delay_ms: pos('webhooks.retry.initial_delay_ms'),
        max_delay_ms: pos('webhooks.retry.max_delay_ms'),
      },
      max_queue: pos('webhooks.max_queue'),
      concurrency: c.int('webhooks.concurrency', g('webhooks.concurrency'), 1, { max: 1024 }),
      lambda_endpoint: httpUrlOrNull(c, 'webhooks.lambda_endpoint', g('webhooks.lambda_endpoint')),
    },
    protocol: { event_prefix: c.oneOf('protocol.event_prefix', g('protocol.event_prefix'), ['pusher', 'proto'] as const) },
  };

  crossChecks(c, cfg);
  return cfg;
}

/** http_fallback.path: a URL path prefix of plain segments ('/pusher', '/ws/fallback'). */
function fallbackPath(c: Checker, v: unknown): string {
  if (typeof v !== 'string' || !/^(\/[A-Za-z0-9._~-]+)+$/.test(v)) {
    c.fail('http_fallback.path', 'must be a path like /pusher: one or more /segments of letters, digits and ._~- (no trailing /)', v);
  }
  return v as string;
}

/** An HTTP header name (RFC 9110 token). */
export const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

function headerName(c: Checker, key: string, v: unknown): string {
  if (typeof v !== 'string' || !HEADER_NAME.test(v)) c.fail(key, 'must be an HTTP header name (letters, digits and !#$%&\'*+.^_`|~-)', v);
  return v as string;
}

function httpUrlOrNull(c: Checker, key: string, v: unknown): string | null {
  if (v === null || v === '') return null;
  let ok = false;
  try {
    ok = typeof v === 'string' && /^https?:$/.test(new URL(v).protocol);
  } catch { /* not a URL */ }
  if (!ok) c.fail(key, 'must be an http:// or https:// URL, or null', v);
  return v as string;
}

function mode(c: Checker, key: string, v: unknown): number {
  const n = typeof v === 'string' ? parseOctalMode(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > 0o7777) {
    c.fail(key, 'must be an octal file mode such as "660" or 0o660', v);
  }
  return n as number;
}

function crossChecks(c: Checker, cfg: GlobalConfig): void {
  if (cfg.ssl.enabled && c.ok('ssl.enabled')) {
    for (const k of ['cert_path', 'key_path'] as const) {
      const p = cfg.ssl[k];
      if (!c.ok(`ssl.${k}`)) continue;
      const why = unreadable(p);
      if (why) c.fail(`ssl.${k}`, `must name a readable PEM file when ssl.enabled is true (${why})`, p);
    }
    if (cfg.ssl.redirect_http && cfg.ssl.http_port === cfg.port && cfg.port !== 0) {
      c.fail('ssl.http_port', 'must differ from port when ssl.redirect_http is true', cfg.ssl.http_port);
    }
  }
  if (cfg.ssl.redirect_http === true && cfg.ssl.enabled !== true) {
    c.fail('ssl.redirect_http', 'needs ssl.enabled: true (it redirects plain HTTP to the HTTPS port)', true);
  }
  if (cfg.log.colors_enabled === true && cfg.log.output_format !== 'human') {
    c.fail('log.colors_enabled', 'applies to log.output_format human only (JSON lines carry no colour)', true);
  }
  if (cfg.metrics.enabled === true && cfg.metrics.port === cfg.port && cfg.port !== 0) {
    c.fail('metrics.port', 'must differ from port when metrics.enabled is true', cfg.metrics.port);
  }
  if (cfg.console.enabled === true) consoleChecks(c, cfg);
  const h = cfg.adapter.cluster_health;
  const hk = 'adapter.cluster_health.';
  if (h.enabled === true && c.ok(`${hk}heartbeat_interval_ms`, `${hk}node_timeout_ms`) && h.heartbeat_interval_ms * 3 > h.node_timeout_ms) {
    c.fail(`${hk}heartbeat_interval_ms`, `must be ≤ node_timeout_ms / 3 (node_timeout_ms is ${h.node_timeout_ms})`, h.heartbeat_interval_ms);
  }
  const usesCluster = ([['adapter.driver', cfg.adapter.driver], ['cache.driver', cfg.cache.driver], ['rate_limiter.driver', cfg.rate_limiter.driver]] as const)
    .filter(([, d]) => d === 'redis-cluster').map(([k]) => k);
  if (usesCluster.length > 0 && c.ok('database.redis_cluster.nodes') && cfg.database.redis_cluster.nodes.length === 0) {
    c.fail('database.redis_cluster.nodes', `must list at least one host:port when ${usesCluster.join(', ')} is redis-cluster (or set REDIS_CLUSTER_NODES)`, undefined, false);
  }
  if (cfg.adapter.driver === 'nats' && c.ok('adapter.nats.servers') && cfg.adapter.nats.servers.length === 0) {
    c.fail('adapter.nats.servers', 'must list at least one server when adapter.driver is nats (or set NATS_SERVERS)', undefined, false);
  }
  if (cfg.delta_compression.cluster_coordination === true && cfg.adapter.driver === 'local') {
    c.fail('delta_compression.cluster_coordination', 'needs adapter.driver redis, redis-cluster or nats (it is local)', undefined, false);
  }
  for (const [lo, hi] of [['database.redis.pool_min', 'database.redis.pool_max'], ['database.pooling.min', 'database.pooling.max']] as const) {
    const [a, b] = [lo, hi].map((k) => k.split('.').reduce<unknown>((o, p) => (o as Record<string, unknown>)[p], cfg)) as number[];
    if (c.ok(lo, hi) && a > b) c.fail(lo, `must be ≤ ${hi} (${b})`, a);
  }
  if (cfg.cors.credentials === true && cfg.cors.origin.includes('*')) {
    c.fail('cors.origin', "must not contain '*' when cors.credentials is true (browsers reject a wildcard origin with credentials); list the allowed origins", cfg.cors.origin);
  }
  const spillFloor = 2 * cfg.event_limits.max_payload_in_kb * 1024;
  if (c.ok('bus.max_spill_bytes', 'event_limits.max_payload_in_kb') && cfg.bus.max_spill_bytes < spillFloor) {
    // a publish frame bigger than half a ring always passes through the spill queue
    c.fail('bus.max_spill_bytes', `must be ≥ 2 × event_limits.max_payload_in_kb KiB (${spillFloor}) so that the largest event can queue`, cfg.bus.max_spill_bytes);
  }
  const r = cfg.webhooks.retry;
  if (c.ok('webhooks.retry.initial_delay_ms', 'webhooks.retry.max_delay_ms') && r.initial_delay_ms > r.max_delay_ms) {
    c.fail('webhooks.retry.initial_delay_ms', `must be ≤ webhooks.retry.max_delay_ms (${r.max_delay_ms})`, r.initial_delay_ms);
  }
  if (c.ok('webhooks.key_header', 'webhooks.signature_header') && cfg.webhooks.key_header.toLowerCase() === cfg.webhooks.signature_header.toLowerCase()) {
    c.fail('webhooks.signature_header', 'must differ from webhooks.key_header', cfg.webhooks.signature_header);
  }
  if (c.ok('metrics.prefix') && !/^([a-zA-Z_:][a-zA-Z0-9_:]*)?$/.test(cfg.metrics.prefix)) {
    c.fail('metrics.prefix', 'must be a valid Prometheus metric name prefix ([a-zA-Z_:][a-zA-Z0-9_:]*)', cfg.metrics.prefix);
  }
}

/** The console never shares the public port (nor the metrics one), and a token is not guessable by length. */
function consoleChecks(c: Checker, cfg: GlobalConfig): void {
  const { port, token } = cfg.console;
  if (c.ok('console.port') && port !== 0 && port === cfg.port) {
    c.fail('console.port', 'must differ from port: the console is never served on the public port', port);
  }
  if (c.ok('console.port') && port !== 0 && cfg.metrics.enabled === true && port === cfg.metrics.port) {
    c.fail('console.port', 'must differ from metrics.port (each has its own listener)', port);
  }
  if (c.ok('console.token') && token !== null && token.length < 16) {
    c.fail('console.token', 'must be at least 16 characters (or null: each app logs in with its own secret)', undefined, false);
  }
}

function unreadable(path: string): string | null {
  if (path === '') return 'not set';
  try {
    accessSync(path, fsc.R_OK);
    return statSync(path).isFile() ? null : 'not a file';
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? 'unreadable';
  }
}
