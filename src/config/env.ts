// Environment variable overrides. Names are exactly the spec's (plus a few of ours,
// marked). Each variable is parsed here, strictly: a value that does not parse is a
// ConfigError whose key is the variable name. Range and enum rules are left to the
// validation pass, which then names the config key and says "(from env NAME)".
// An empty variable counts as unset (docker-compose `PORT=` style).

import { ConfigError, parseHostPort, parseOctalMode } from './checker';
import type { EnvApp } from './validate-apps';

type Kind = 'str' | 'num' | 'numOrNull' | 'bool' | 'list' | 'nodes' | 'mode';

/** env var → [dotted config path, how to parse it]. */
export const ENV_VARS: Readonly<Record<string, readonly [string, Kind]>> = {
  HOST: ['host', 'str'],
  PORT: ['port', 'num'],
  DOMAIN: ['domain', 'str'],
  WORKERS: ['workers', 'num'], // ours
  SHUTDOWN_GRACE_PERIOD: ['shutdown_grace_period', 'num'], // ours, ms
  UNIX_SOCKET_ENABLED: ['unix_socket.enabled', 'bool'],
  UNIX_SOCKET_PATH: ['unix_socket.path', 'str'],
  UNIX_SOCKET_PERMISSION_MODE: ['unix_socket.permission_mode', 'mode'],
  SSL_ENABLED: ['ssl.enabled', 'bool'],
  SSL_CERT_PATH: ['ssl.cert_path', 'str'],
  SSL_KEY_PATH: ['ssl.key_path', 'str'],
  SSL_REDIRECT_HTTP: ['ssl.redirect_http', 'bool'],
  SSL_HTTP_PORT: ['ssl.http_port', 'num'],
  ADAPTER_DRIVER: ['adapter.driver', 'str'],
  CACHE_DRIVER: ['cache.driver', 'str'],
  HISTORY_DRIVER: ['history.driver', 'str'],
  QUEUE_DRIVER: ['queue.driver', 'str'],
  RATE_LIMITER_DRIVER: ['rate_limiter.driver', 'str'],
  RATE_LIMITER_ENABLED: ['rate_limiter.enabled', 'bool'],
  RATE_LIMITER_API_MAX_REQUESTS: ['rate_limiter.api.max_requests', 'numOrNull'],
  RATE_LIMITER_API_WINDOW_SECONDS: ['rate_limiter.api.window_seconds', 'num'],
  RATE_LIMITER_API_TRUST_HOPS: ['rate_limiter.api.trust_hops', 'num'],
  RATE_LIMITER_WS_MAX_REQUESTS: ['rate_limiter.websocket.max_requests', 'numOrNull'],
  RATE_LIMITER_WS_WINDOW_SECONDS: ['rate_limiter.websocket.window_seconds', 'num'],
  DATABASE_REDIS_HOST: ['database.redis.host', 'str'],
  DATABASE_REDIS_PORT: ['database.redis.port', 'num'],
  DATABASE_REDIS_PASSWORD: ['database.redis.password', 'str'],
  DATABASE_REDIS_DB: ['database.redis.db', 'num'],
  REDIS_CLUSTER_NODES: ['database.redis_cluster.nodes', 'nodes'],
  DATABASE_POOLING_ENABLED: ['database.pooling.enabled', 'bool'],
  DATABASE_POOL_MIN: ['database.pooling.min', 'num'],
  DATABASE_POOL_MAX: ['database.pooling.max', 'num'],
  DATABASE_REDIS_POOL_MIN: ['database.redis.pool_min', 'num'],
  DATABASE_REDIS_POOL_MAX: ['database.redis.pool_max', 'num'],
  TAG_FILTERING_ENABLED: ['tag_filtering.enabled', 'bool'],
  CORS_ORIGINS: ['cors.origin', 'list'],
  CORS_METHODS: ['cors.methods', 'list'],
  CORS_HEADERS: ['cors.allowed_headers', 'list'],
  CORS_CREDENTIALS: ['cors.credentials', 'bool'],
  METRICS_ENABLED: ['metrics.enabled', 'bool'],
  METRICS_DRIVER: ['metrics.driver', 'str'],
  METRICS_HOST: ['metrics.host', 'str'],
  METRICS_PORT: ['metrics.port', 'num'],
  METRICS_PROMETHEUS_PREFIX: ['metrics.prefix', 'str'],
  CONSOLE_ENABLED: ['console.enabled', 'bool'], // ours, like the rest of console.*
  CONSOLE_HOST: ['console.host', 'str'],
  CONSOLE_PORT: ['console.port', 'num'],
  CONSOLE_TOKEN: ['console.token', 'str'],
  WEBSOCKET_MAX_PAYLOAD_KB: ['websocket.max_payload_kb', 'num'],
  WEBSOCKET_MAX_MESSAGES: ['websocket.max_messages', 'num'],
  WEBSOCKET_MAX_BYTES: ['websocket.max_bytes', 'num'],
  WEBSOCKET_AUTO_PING: ['websocket.auto_ping', 'bool'],
  WEBSOCKET_PING_INTERVAL: ['websocket.ping_interval', 'num'],
  WEBSOCKET_ACTIVITY_TIMEOUT: ['websocket.activity_timeout', 'num'], // ours
  WEBSOCKET_ON_BACKPRESSURE: ['websocket.on_backpressure', 'str'], // ours: drop | close
  BUS_RING_BYTES: ['bus.ring_bytes', 'num'], // ours
  BUS_MAX_SPILL_BYTES: ['bus.max_spill_bytes', 'num'], // ours
  ADAPTER_BUFFER_MULTIPLIER_PER_CPU: ['adapter.buffer_multiplier_per_cpu', 'num'],
  HTTP_API_REQUEST_LIMIT_IN_MB: ['http.request_limit_in_mb', 'num'],
  LOG_LEVEL: ['log.level', 'str'], // ours
  LOG_OUTPUT_FORMAT: ['log.output_format', 'str'],
  LOG_COLORS_ENABLED: ['log.colors_enabled', 'bool'],
  LOG_INCLUDE_TARGET: ['log.include_target', 'bool'],
  WEBHOOK_BATCHING_ENABLED: ['webhooks.batching.enabled', 'bool'],
  WEBHOOK_BATCHING_DURATION: ['webhooks.batching.duration', 'num'],
  WEBHOOK_BATCHING_SIZE: ['webhooks.batching.size', 'num'],
  WEBHOOK_KEY_HEADER: ['webhooks.key_header', 'str'], // ours
  WEBHOOK_SIGNATURE_HEADER: ['webhooks.signature_header', 'str'], // ours
  WEBHOOK_TIMEOUT_MS: ['webhooks.timeout_ms', 'num'], // ours
  WEBHOOK_MAX_RETRIES: ['webhooks.retry.max_retries', 'num'], // ours
  WEBHOOK_RETRY_INITIAL_DELAY_MS: ['webhooks.retry.initial_delay_ms', 'num'], // ours
  WEBHOOK_MAX_QUEUE: ['webhooks.max_queue', 'num'], // ours
  WEBHOOK_LAMBDA_ENDPOINT: ['webhooks.lambda_endpoint', 'str'], // ours
  NATS_SERVERS: ['adapter.nats.servers', 'list'], // ours
  DELTA_COMPRESSION_ENABLED: ['delta_compression.enabled', 'bool'], // ours
};

/** Default app env vars → app field. The first three are required together. */
export const APP_ENV_VARS: Readonly<Record<string, readonly [string, Kind]>> = {
  SERVICE_DEFAULT_APP_ID: ['id', 'str'],
  SERVICE_DEFAULT_APP_KEY: ['key', 'str'],
  SERVICE_DEFAULT_APP_SECRET: ['secret', 'str'],
  SERVICE_DEFAULT_APP_ALLOWED_ORIGINS: ['allowed_origins', 'list'],
  SERVICE_DEFAULT_APP_MAX_CONNECTIONS: ['max_connections', 'num'],
  SERVICE_DEFAULT_APP_MAX_EVENT_PAYLOAD_IN_KB: ['max_event_payload_in_kb', 'num'],
};
const REQUIRED_APP_VARS = ['SERVICE_DEFAULT_APP_ID', 'SERVICE_DEFAULT_APP_KEY', 'SERVICE_DEFAULT_APP_SECRET'];

export interface EnvSetting {
  /** Dotted config path, e.g. `rate_limiter.api.max_requests`. */
  path: string;
  value: unknown;
  /** The env var it came from. */
  name: string;
}

export interface EnvOverrides {
  settings: EnvSetting[];
  app: EnvApp | null;
}

const TRUE = ['true', '1', 'yes'];
const FALSE = ['false', '0', 'no'];
const NULLS = ['null', 'none', 'off'];

export function parseEnv(env: NodeJS.ProcessEnv): EnvOverrides {
  const settings: EnvSetting[] = [];
  for (const [name, [path, kind]] of Object.entries(ENV_VARS)) {
    const raw = env[name];
    if (raw === undefined || raw === '') continue;
    settings.push({ path, value: parseValue(name, raw, kind), name });
  }
  return { settings, app: parseDefaultApp(env) };
}

function parseDefaultApp(env: NodeJS.ProcessEnv): EnvApp | null {
  const set = Object.keys(APP_ENV_VARS).filter((n) => env[n] !== undefined && env[n] !== '');
  if (set.length === 0) return null;
  const missing = REQUIRED_APP_VARS.filter((n) => !set.includes(n));
  if (missing.length > 0) {
    throw new ConfigError(
      missing[0],
      `${missing.join(', ')} ${missing.length > 1 ? 'are' : 'is'} not set, but ${set.join(', ')} ${set.length > 1 ? 'are' : 'is'}: ` +
        'the default app needs all of SERVICE_DEFAULT_APP_ID, SERVICE_DEFAULT_APP_KEY and SERVICE_DEFAULT_APP_SECRET',
    );
  }
  const app: EnvApp = { value: {}, keys: {} };
  for (const name of set) {
    const [field, kind] = APP_ENV_VARS[name];
    app.value[field] = parseValue(name, env[name] as string, kind);
    app.keys[field] = name;
  }
  return app;
}

function parseValue(name: string, raw: string, kind: Kind): unknown {
  const s = raw.trim();
  switch (kind) {
    case 'str':
      return raw;
    case 'numOrNull':
      if (NULLS.includes(s.toLowerCase())) return null;
      return num(name, raw, ', null or off');
    case 'num':
      return num(name, raw, '');
    case 'bool': {
      const l = s.toLowerCase();
      if (TRUE.includes(l)) return true;
      if (FALSE.includes(l)) return false;
      throw bad(name, raw, 'must be a boolean: true/false, 1/0 or yes/no');
    }
    case 'list':
      return list(raw);
    case 'nodes':
      return list(raw).map((item) => {
        const hp = parseHostPort(item);
        if (!hp) throw bad(name, raw, `must be a comma-separated list of host:port (bad entry ${JSON.stringify(item)})`);
        return hp;
      });
    case 'mode': {
      const m = parseOctalMode(s);
      if (m === undefined) throw bad(name, raw, 'must be an octal file mode such as 660 or 0o660');
      return m;
    }
  }
}

function num(name: string, raw: string, extra: string): number {
  const s = raw.trim();
  if (!/^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(s)) throw bad(name, raw, `must be a number${extra}`);
  return Number(s);
}

function list(raw: string): string[] {
  return raw.split(',').map((x) => x.trim()).filter((x) => x !== '');
}

function bad(name: string, raw: string, rule: string): ConfigError {
  const shown = /SECRET|PASSWORD|TOKEN/.test(name) ? 'a hidden value' : JSON.stringify(raw);
  return new ConfigError(name, `${name} ${rule}, got ${shown}`);
}
