// The configuration schema: the one source of every key's type, default, validation rule,
// environment variable and description. defaults.ts, env.ts, issues.ts (messages),
// types.ts (`Config`), config.schema.json and docs/configuration.md (reference.ts) are
// all derived from it; the rules that tie several keys together are in rules.ts.
//
// To add a key: add one entry below in its section (builders in schema-kit.ts), e.g.
//   max_items: int(100, 1, { doc: 'what it does and its unit', env: 'HISTORY_MAX_ITEMS', ours: true }),
// then read it as `config.<section>.max_items` (its type follows), and run
// `npx tsc -p tsconfig.json && node scripts/config-schema.mjs` to regenerate
// config.schema.json and docs/configuration.md (test/config/reference.test.ts fails until
// they are). A per-app setting goes in AppSchema (Type.Optional, with a `default` or an
// `x-default-from` global key). A rule across keys goes in rules.ts.

import { availableParallelism, totalmem } from 'node:os';
import { FormatRegistry, Type, type StaticDecode } from '@sinclair/typebox';
import {
  bool, choice, fileMode, hostPorts, int, intOrNull, meta, oneOf, optStr, port, section, str, strList, text,
} from './schema-kit';
import { HEADER_NAME, MAX_WORKERS, WEBHOOK_EVENT_TYPES } from './constants';
import type { AppHooks } from './hooks';

export { HEADER_NAME, MAX_WORKERS, WEBHOOK_EVENT_TYPES };

/** Shortest adapter.cluster_secret: an HMAC key a guess cannot find. */
export const MIN_CLUSTER_SECRET = 16;

/** A secret of at least MIN_CLUSTER_SECRET characters, or null (an empty string counts as null). */
function clusterSecret(d: Parameters<typeof optStr>[0]) {
  return Type.Transform(Type.Union([Type.String({ pattern: `^(|[\\s\\S]{${MIN_CLUSTER_SECRET},})$` }), Type.Null()],
    { default: null, ...meta({ rule: `must be a string of at least ${MIN_CLUSTER_SECRET} characters, or null`, ...d }) }))
    .Decode((v) => (v === '' ? null : v))
    .Encode((v) => v);
}

const HEADER_RULE = 'must be an HTTP header name (letters, digits and !#$%&\'*+.^_`|~-)';


/** The checks a pattern cannot make (the JSON Schema keeps the pattern, editors skip the format). */
FormatRegistry.Set('ringcast-http-url', (s) => s === '' || httpUrl(s, ['http:', 'https:']));
FormatRegistry.Set('ringcast-webhook-url', (s) => /^lambda:\/\/\S+$/.test(s) || (/^https?:\/\//i.test(s) && httpUrl(s, ['http:', 'https:'])));

function httpUrl(s: string, protocols: string[]): boolean {
  try {
    const u = new URL(s);
    return protocols.includes(u.protocol) && u.hostname !== '';
  } catch {
    return false;
  }
}

/** A channel's `channel_history` size upper bound: a replay or REST page reads at most this many from one channel. */
export const MAX_HISTORY_SIZE = 100_000;

/** Memory per connection the derived default of limits.max_connections reserves. */
export const BYTES_PER_CONNECTION = 32 * 1024;

const DRIVERS = ['memory', 'redis', 'redis-cluster', 'none'] as const;
const ALGORITHMS = ['Fossil', 'Xdelta3'] as const;
type Algorithm = typeof ALGORITHMS[number];

export const GlobalSchema = Type.Object({
  host: str('0.0.0.0', { doc: 'Interface the HTTP API and WebSocket listener bind to.', env: 'HOST' }),
  port: port(6001, { doc: 'Port of the HTTP API and WebSockets (`/app/<key>`); 0 = any free port.', env: 'PORT' }),
  domain: str('localhost', { doc: 'The public host name: in the startup line\'s URL, and the redirect\'s `Location` when a request has no usable `Host`.', env: 'DOMAIN' }),
  workers: int(Math.min(MAX_WORKERS, Math.max(1, availableParallelism())), 1, {
    max: MAX_WORKERS, doc: 'Shard threads, each with its own event loop and share of the connections.', env: 'WORKERS', ours: true,
    defaultDoc: 'number of CPU cores (at most 256)',
  }),
  shutdown_grace_period: int(10_000, 0, {
    doc: 'Milliseconds a stop (SIGTERM/SIGINT) may take: connections still open at half of it (clients that ignore the 4200 close, idle keep-alive HTTP) are cut, so the process exits within it.',
    env: 'SHUTDOWN_GRACE_PERIOD', ours: true,
  }),

  unix_socket: section({
    enabled: bool(false, { doc: 'Also listen on a Unix domain socket (same routes; shard 0 takes its connections).', env: 'UNIX_SOCKET_ENABLED' }),
    path: str('/tmp/ringcast.sock', { doc: 'Socket path; a stale socket file is removed at start, a live one is an error. Under systemd: /run/ringcast/ringcast.sock.', env: 'UNIX_SOCKET_PATH' }),
    permission_mode: fileMode(0o660, { doc: 'File mode of the socket, octal like chmod: 660, "0660", 0o660.', env: 'UNIX_SOCKET_PERMISSION_MODE', defaultDoc: '0o660' }),
  }, 'A Unix domain socket listener next to host:port.'),
  ssl: section({
    enabled: bool(false, { doc: 'TLS on the public listener (cert_path and key_path must be readable PEM files).', env: 'SSL_ENABLED' }),
    cert_path: text('', { doc: 'PEM certificate (chain).', env: 'SSL_CERT_PATH' }),
    key_path: text('', { doc: 'PEM private key.', env: 'SSL_KEY_PATH' }),
    redirect_http: bool(false, { doc: 'Also run a plain HTTP listener answering every request with 301 to https://<Host, else domain>:<port><path>; needs ssl.enabled.', env: 'SSL_REDIRECT_HTTP' }),
    http_port: port(80, { doc: 'Port of that redirect listener (on host); 0 = any free port; must differ from port.', env: 'SSL_HTTP_PORT' }),
  }, 'TLS, and the plain-HTTP redirect to it.'),

  adapter: section({
    driver: oneOf(['local', 'redis', 'redis-cluster', 'nats'], 'local', {
      doc: 'How server instances share events: local (one node), redis, redis-cluster or nats. Nodes sharing a backend and prefix form one cluster.', env: 'ADAPTER_DRIVER',
    }),
    cluster_health: section({
      enabled: bool(true, { doc: 'Heartbeats between nodes; false: only a clean stop removes a node.' }),
      heartbeat_interval_ms: int(10_000, 1, { doc: 'Heartbeat period (ms); must be ≤ node_timeout_ms / 3.' }),
      node_timeout_ms: int(30_000, 1, { doc: 'A node silent this long (ms) is declared failed and its presence members removed.' }),
      cleanup_interval_ms: int(10_000, 1, { doc: 'How often (ms) silent nodes are looked for.' }),
    }, 'Node liveness for the multi-node drivers.'),
    nats: section({
      servers: strList(['nats://127.0.0.1:4222'], { doc: 'NATS server URLs (env: comma-separated); at least one when adapter.driver is nats.', env: 'NATS_SERVERS', ours: true }),
      user: optStr({ doc: 'NATS user name.' }),
      password: optStr({ doc: 'NATS password.' }),
      token: optStr({ doc: 'NATS token.' }),
      prefix: Type.String({
        pattern: '^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$', default: 'ringcast',
        ...meta({ doc: 'Subject prefix: <prefix>.pub, .ctl, .node.<id>.', rule: 'must be NATS subject tokens (letters, digits, _ and -) joined by single dots, with no wildcard' }),
      }),
    }, 'The nats adapter.'),
    cluster_secret: clusterSecret({
      doc: 'Signs every cluster frame this node sends (HMAC-SHA256) and drops every frame received without the same secret\'s signature; null: frames unsigned, anyone who can publish on the backend under the prefix is a node. Every node of a cluster needs the same value. At least 16 characters.',
      env: 'ADAPTER_CLUSTER_SECRET', ours: true,
    }),
    buffer_multiplier_per_cpu: int(64, 1, {
      doc: 'Refused when changed: the adapter has no per-CPU buffer (a publish goes to the backend at once).', env: 'ADAPTER_BUFFER_MULTIPLIER_PER_CPU',
    }),
  }, 'The cluster adapter (README, "Many hosts").'),
  cache: section({
    driver: oneOf(DRIVERS, 'memory', {
      doc: 'Cache channels\' last events: memory (per owner shard), redis / redis-cluster (shared by the nodes, kept across restarts), none (off).', env: 'CACHE_DRIVER',
    }),
  }, 'Cache channels.'),
  queue: section({
    driver: oneOf(['sync', 'redis'], 'sync', { doc: 'Webhook queue: sync (in memory) or redis (database.redis; at-least-once across restarts).', env: 'QUEUE_DRIVER' }),
  }, 'The webhook queue.'),
  rate_limiter: section({
    enabled: bool(true, { doc: 'Rate limits on (the per-app limits and the windows below).', env: 'RATE_LIMITER_ENABLED' }),
    driver: oneOf(DRIVERS, 'memory', { doc: 'Where counters live: memory (per process), redis or redis-cluster (shared), none.', env: 'RATE_LIMITER_DRIVER' }),
    api: section({
      max_requests: intOrNull(null, 1, { doc: 'Requests per window and client IP on the HTTP API; null = off.', env: 'RATE_LIMITER_API_MAX_REQUESTS' }),
      window_seconds: int(60, 1, { doc: 'Window length (s).', env: 'RATE_LIMITER_API_WINDOW_SECONDS' }),
      trust_hops: int(0, 0, { max: 32, doc: 'Proxies trusted for X-Forwarded-For.', env: 'RATE_LIMITER_API_TRUST_HOPS' }),
    }, 'Optional per-IP window on the HTTP API.'),
    websocket: section({
      max_requests: intOrNull(null, 1, { doc: 'Frames per window and connection; over it: pusher:error 4301, frame dropped; null = off.', env: 'RATE_LIMITER_WS_MAX_REQUESTS' }),
      window_seconds: int(60, 1, { doc: 'Window length (s).', env: 'RATE_LIMITER_WS_WINDOW_SECONDS' }),
    }, 'Optional per-connection window on WebSocket frames.'),
  }, 'Rate limiting.'),
  database: section({
    redis: section({
      host: str('127.0.0.1', { doc: 'Redis host.', env: 'DATABASE_REDIS_HOST' }),
      port: port(6379, { doc: 'Redis port.', env: 'DATABASE_REDIS_PORT' }, 1),
      username: optStr({ doc: 'Redis ACL user name.' }),
      password: optStr({ doc: 'Redis password.', env: 'DATABASE_REDIS_PASSWORD' }),
      db: int(0, 0, { doc: 'Database number (pub/sub ignores it).', env: 'DATABASE_REDIS_DB' }),
      key_prefix: text('', { doc: 'Prefix of every key, and of the adapter\'s channel (<key_prefix>ringcast).' }),
      pool_min: int(2, 0, { doc: 'Refused when changed: one connection per backend keeps a node\'s order, no pool.', env: 'DATABASE_REDIS_POOL_MIN' }),
      pool_max: int(10, 1, { doc: 'Refused when changed (as pool_min).', env: 'DATABASE_REDIS_POOL_MAX' }),
      sentinels: hostPorts({ doc: 'Sentinel mode: the Sentinels, e.g. ["10.0.0.1:26379", {host: 10.0.0.2, port: 26379}]; [] = connect to host:port.' }),
      sentinel_password: optStr({ doc: 'Password of the Sentinels.' }),
      name: str('mymaster', { doc: 'Sentinel master name.' }),
    }, 'Redis, for the redis drivers (adapter, cache, queue, rate limiter).'),
    redis_cluster: section({
      nodes: hostPorts({ doc: 'Cluster nodes ("host:port" or {host, port}); required when a driver is redis-cluster.', env: 'REDIS_CLUSTER_NODES' }),
      username: optStr({ doc: 'ACL user name.' }),
      password: optStr({ doc: 'Password.' }),
      key_prefix: text('', { doc: 'Prefix of every key.' }),
    }, 'Redis Cluster, for the redis-cluster drivers.'),
    pooling: section({
      enabled: bool(false, { doc: 'Refused when true: ringcast keeps one connection per backend (node order).', env: 'DATABASE_POOLING_ENABLED' }),
      min: int(2, 0, { doc: 'Refused when changed.', env: 'DATABASE_POOL_MIN' }),
      max: int(10, 1, { doc: 'Refused when changed.', env: 'DATABASE_POOL_MAX' }),
    }, 'Connection pools (refused when changed).'),
  }, 'Backends of the redis and redis-cluster drivers.'),
  tag_filtering: section({
    enabled: bool(false, { doc: 'Server-side filtering of events by tags (opt-in extension).', env: 'TAG_FILTERING_ENABLED' }),
    max_nodes: int(50, 1, { doc: 'Largest filter (nodes) a subscription may send.' }),
  }, 'Tag filtering (docs/tag-filtering.md).'),
  cors: section({
    origin: strList(['*'], { doc: 'Allowed origins (env: comma-separated); \'*\' is refused with credentials: true.', env: 'CORS_ORIGINS' }),
    methods: strList(['GET', 'POST', 'OPTIONS'], { doc: 'Allowed methods.', env: 'CORS_METHODS' }),
    allowed_headers: strList([
      'Origin', 'Content-Type', 'X-Auth-Token', 'X-Requested-With', 'Accept',
      'Authorization', 'X-CSRF-TOKEN', 'XSRF-TOKEN', 'X-Socket-Id',
    ], { doc: 'Allowed request headers.', env: 'CORS_HEADERS' }),
    credentials: bool(false, { doc: 'Access-Control-Allow-Credentials.', env: 'CORS_CREDENTIALS' }),
  }, 'CORS of the HTTP API.'),
  metrics: section({
    enabled: bool(false, { doc: 'Prometheus /metrics on its own listener.', env: 'METRICS_ENABLED' }),
    driver: oneOf(['prometheus'], 'prometheus', { doc: 'Metrics format.', env: 'METRICS_DRIVER' }),
    host: str('0.0.0.0', { doc: 'Interface of the metrics listener.', env: 'METRICS_HOST' }),
    port: port(9601, { doc: 'Port of the metrics listener; 0 = any free port; must differ from port.', env: 'METRICS_PORT' }),
    prefix: Type.String({
      pattern: '^([a-zA-Z_:][a-zA-Z0-9_:]*)?$', default: 'ringcast_',
      ...meta({ doc: 'Prefix of every metric name.', env: 'METRICS_PROMETHEUS_PREFIX', rule: 'must be a valid Prometheus metric name prefix ([a-zA-Z_:][a-zA-Z0-9_:]*)' }),
    }),
    token: text('', { doc: 'Bearer token a scrape must send (`Authorization: Bearer <token>`, else 401); empty: /metrics is open to whoever reaches metrics.host.', env: 'METRICS_TOKEN', ours: true }),
  }, 'Prometheus metrics (docs/operations.md, "Metrics").'),
  console: section({
    enabled: bool(false, { doc: 'The live console: each app\'s connections, channels, members and events, and a form to publish.', env: 'CONSOLE_ENABLED', ours: true }),
    host: str('127.0.0.1', { doc: 'Interface of the console listener; keep it on loopback or a private network.', env: 'CONSOLE_HOST', ours: true }),
    port: port(9602, { doc: 'Port of the console listener; 0 = any free port; must differ from port and metrics.port.', env: 'CONSOLE_PORT', ours: true }),
    token: optStr({ doc: 'The console login (at least 16 characters): every app. Needed when the console is on, unless allow_app_secret is true.', env: 'CONSOLE_TOKEN', ours: true }),
    allow_app_secret: bool(false, { doc: 'Also accept an app\'s id and secret as a login (that app only). Off: the secret, which signs API calls, is never typed into the page.', env: 'CONSOLE_ALLOW_APP_SECRET', ours: true }),
    login_max_failures: int(10, 1, { max: 1000, doc: 'Failed logins a client address may make in login_window; past it every /api request from it gets 429 with Retry-After until the window ends.', env: 'CONSOLE_LOGIN_MAX_FAILURES', ours: true }),
    login_window: int(60, 1, { max: 86_400, doc: 'Seconds: the window of login_max_failures (it starts at an address\'s first failure).', env: 'CONSOLE_LOGIN_WINDOW', ours: true }),
    login_max_addresses: int(10_000, 16, { max: 1_000_000, doc: 'Client addresses whose failures are remembered; past it the one whose window started first is forgotten (counted).', env: 'CONSOLE_LOGIN_MAX_ADDRESSES', ours: true }),
    max_streams: int(100, 1, { max: 10_000, doc: 'Live log streams open at once (browser tabs watching an app, process-wide); one more gets 503.', env: 'CONSOLE_MAX_STREAMS', ours: true }),
    stream_max_buffered_kb: int(256, 16, { max: 65_536, doc: 'KiB of the live log a browser may leave unread (the server\'s send buffer for it); past it its events are dropped and counted, and it is told how many once it reads again.', env: 'CONSOLE_STREAM_MAX_BUFFERED_KB', ours: true }),
  }, 'The live console (docs/console.md): its own listener, never the public port.'),
  websocket: section({
    max_payload_kb: int(64, 1, { doc: 'Largest client frame (KiB); a bigger one closes the socket (1009).', env: 'WEBSOCKET_MAX_PAYLOAD_KB' }),
    max_messages: int(1000, 1, { doc: 'A socket\'s send queue is full past this many messages (queued bytes / the shard\'s average message size).', env: 'WEBSOCKET_MAX_MESSAGES' }),
    max_bytes: int(1_048_576, 1, { doc: 'A socket\'s send queue is full past this many bytes.', env: 'WEBSOCKET_MAX_BYTES' }),
    auto_ping: bool(true, { doc: 'WebSocket ping frames (not pusher:ping) to silent clients; one that does not answer within 4–16 s more is closed.', env: 'WEBSOCKET_AUTO_PING' }),
    // uWS idle timeouts: ping_interval + a 4–16 s margin, at most 960 s (ws/connection.ts)
    ping_interval: int(30, 4, { max: 900, doc: 'Seconds without a frame from the client before that ping (uWS\'s timers tick every 4 s: up to 4 s early).', env: 'WEBSOCKET_PING_INTERVAL' }),
    activity_timeout: int(120, 1, { doc: 'Seconds of client silence before the server sends pusher:ping (sent to clients in connection_established).', env: 'WEBSOCKET_ACTIVITY_TIMEOUT', ours: true }),
    pong_timeout: int(30, 1, { doc: 'Seconds to wait for any frame after that ping before closing with 4201.' }),
    on_backpressure: oneOf(['drop', 'close'], 'drop', {
      doc: 'A full send queue: drop skips the socket\'s channel messages until it has read half its queue; close disconnects it (4100).', env: 'WEBSOCKET_ON_BACKPRESSURE', ours: true,
    }),
  }, 'WebSocket connections.'),
  bus: section({
    ring_bytes: intOrNull(null, 4096, {
      max: 2 ** 30, doc: 'Size of each inter-thread ring, rounded up to a power of two; null: 4 MiB / (threads − 1) as a power of two in [32 KiB, 256 KiB].', env: 'BUS_RING_BYTES', ours: true,
    }),
    max_spill_bytes: int(64 * 1024 * 1024, 65_536, {
      max: 2 ** 40, doc: 'Per thread: bytes of frames its writers queue while their rings are full, all its outgoing rings together (a process holds at most threads × this); past it the HTTP API answers 503. ≥ 2 × event_limits.max_payload_in_kb KiB.', env: 'BUS_MAX_SPILL_BYTES', ours: true,
    }),
    owner_reconcile_interval_ms: int(10_000, 0, {
      max: 3_600_000, doc: 'Every this many ms each shard reports its subscriptions to the owner shards, which correct what notices lost in a full ring left wrong (counts, presence members, member events, subscription_count, the webhook ledger; docs/owner-reconciliation.md); 0: off.', env: 'BUS_OWNER_RECONCILE_INTERVAL_MS', ours: true,
    }),
  }, 'The rings between threads (one per ordered pair of threads).'),
  http: section({
    request_limit_in_mb: int(10, 1, { doc: 'Largest API request body (MB); bigger: 413.', env: 'HTTP_API_REQUEST_LIMIT_IN_MB' }),
  }, 'The HTTP API.'),
  log: section({
    level: oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], 'info', { doc: 'pino level.', env: 'LOG_LEVEL', ours: true }),
    output_format: oneOf(['json', 'human'], 'json', { doc: 'json (JSON lines on stdout) or human (pino-pretty lines); every thread\'s lines go through the primary, whole.', env: 'LOG_OUTPUT_FORMAT' }),
    colors_enabled: bool(false, { doc: 'Colours in the human format (refused with json).', env: 'LOG_COLORS_ENABLED' }),
    include_target: bool(false, { doc: 'Add thread (primary, shard-N) and module to every line.', env: 'LOG_INCLUDE_TARGET' }),
  }, 'Logging (docs/operations.md, "Logging").'),
  event_limits: section({
    max_channels_at_once: int(100, 1, { doc: 'Default of apps[].max_event_channels_at_once.' }),
    max_name_length: int(200, 1, { doc: 'Default of apps[].max_event_name_length.' }),
    max_payload_in_kb: int(100, 1, { doc: 'Default of apps[].max_event_payload_in_kb.' }),
    max_batch_size: int(10, 1, { doc: 'Default of apps[].max_event_batch_size.' }),
  }, 'Defaults of the per-app event limits.'),
  channel_limits: section({
    max_name_length: int(200, 1, { doc: 'Default of apps[].max_channel_name_length.' }),
    cache_ttl: int(3600, 1, { doc: 'Seconds a cache channel keeps its last event.' }),
  }, 'Channel limits.'),
  presence: section({
    max_members_per_channel: int(100, 1, { doc: 'Default of apps[].max_presence_members_per_channel.' }),
    max_member_size_in_kb: int(2, 1, { doc: 'Default of apps[].max_presence_member_size_in_kb.' }),
  }, 'Defaults of the per-app presence limits.'),
  delta_compression: section({
    enabled: bool(true, { doc: 'Delta compression for the clients that ask for it.', env: 'DELTA_COMPRESSION_ENABLED', ours: true }),
    algorithm: oneOf(ALGORITHMS, 'Fossil', { doc: 'Default algorithm.' }),
    full_message_interval: int(10, 1, { doc: 'A full message after every N deltas.' }),
    min_message_size: int(100, 0, { doc: 'Bytes; smaller messages are sent whole.' }),
    max_state_age_secs: int(300, 1, { doc: 'Seconds a channel\'s base message is kept.' }),
    max_channel_states_per_socket: int(100, 1, { doc: 'Channels with delta state per socket.' }),
    cluster_coordination: bool(false, { doc: 'Same delta bases on every node (needs a redis, redis-cluster or nats adapter).' }),
    omit_delta_algorithm: bool(false, { doc: 'Leave the algorithm out of delta messages.' }),
    pool_size: int(0, 0, { max: 64, doc: 'Ours: piscina threads behind the delta sequencer; 0 computes on the sequencer thread (measured faster: docs/benchmarks.md).' }),
    pool_max_queue: int(256, 1, { max: 65_536, doc: 'Ours: deltas waiting for a pool thread (pool_size > 0, piscina maxQueue); past it a message goes out in full (delta_pool_refused_total).' }),
  }, 'Delta compression (docs/delta.md).'),
  webhooks: section({
    batching: section({
      enabled: bool(false, { doc: 'Merge the events of one app and endpoint into one request; off: one request per event.', env: 'WEBHOOK_BATCHING_ENABLED' }),
      duration: int(50, 1, { doc: 'A batch is sent this many ms after its first event.', env: 'WEBHOOK_BATCHING_DURATION' }),
      size: int(50, 1, { doc: 'A batch of this many events is sent at once.', env: 'WEBHOOK_BATCHING_SIZE' }),
    }, 'Webhook batching.'),
    key_header: Type.String({ pattern: HEADER_NAME.source, default: 'X-Pusher-Key', ...meta({ doc: 'Header carrying the app key.', env: 'WEBHOOK_KEY_HEADER', ours: true, rule: HEADER_RULE }) }),
    signature_header: Type.String({
      pattern: HEADER_NAME.source, default: 'X-Pusher-Signature',
      ...meta({ doc: 'Header carrying the hex HMAC-SHA256 of the body with the app secret; must differ from key_header.', env: 'WEBHOOK_SIGNATURE_HEADER', ours: true, rule: HEADER_RULE }),
    }),
    timeout_ms: int(5000, 1, { doc: 'Per request (HTTP POST or Lambda invoke), ms.', env: 'WEBHOOK_TIMEOUT_MS', ours: true }),
    retry: section({
      max_retries: int(3, 0, { max: 20, doc: 'Retries after the first attempt (429/500/502/503/504, network errors, timeouts; other answers are final).', env: 'WEBHOOK_MAX_RETRIES', ours: true }),
      initial_delay_ms: int(1000, 1, { doc: 'First wait (ms), doubled each retry; ≤ max_delay_ms.', env: 'WEBHOOK_RETRY_INITIAL_DELAY_MS', ours: true }),
      max_delay_ms: int(60_000, 1, { doc: 'Cap of one wait (ms).' }),
    }, 'Webhook retries.'),
    max_queue: int(10_000, 1, { doc: 'Requests waiting (redis: to be written) past which new ones are dropped (webhooks_dropped_total).', env: 'WEBHOOK_MAX_QUEUE', ours: true }),
    concurrency: int(16, 1, { max: 1024, doc: 'Requests in flight at once.' }),
    lambda_endpoint: Type.Transform(Type.Union([Type.String({ format: 'ringcast-http-url' }), Type.Null()], {
      default: null,
      ...meta({ doc: 'lambda:// targets: another Invoke endpoint than AWS\'s (e.g. a local stand-in); null = AWS\'s regional endpoint.', env: 'WEBHOOK_LAMBDA_ENDPOINT', ours: true, rule: 'must be an http:// or https:// URL, or null' }),
    })).Decode((v) => (v === '' ? null : v)).Encode((v) => v),
  }, 'Webhook delivery (apps[].webhooks lists the endpoints); the primary thread batches, signs and sends.'),
  protocol: section({
    event_prefix: oneOf(['pusher', 'proto'], 'pusher', { doc: 'pusher (pusher: / pusher_internal: on the wire) or proto.' }),
  }, 'Wire names.'),
  limits: section({
    max_subscriptions_per_connection: int(1000, 1, { max: 10_000_000, doc: 'Channels one connection may be subscribed to at once; beyond: pusher:subscription_error LimitReached (status 4100), the connection kept.', ours: true }),
    max_filter_values: int(1000, 1, { max: 10_000_000, doc: '`in` / `nin` values in one tag filter (all its nodes together); beyond: pusher:subscription_error InvalidFilter.', ours: true }),
    max_filter_values_per_connection: int(10_000, 1, { max: 100_000_000, doc: '`in` / `nin` values over all the tag filters of one connection; beyond: pusher:subscription_error LimitReached.', ours: true }),
    frames_per_second: int(1000, 1, { max: 1_000_000, doc: 'Frames per second a connection may send on average (its budget refills at this rate).', ours: true }),
    frame_burst: int(4000, 1, { max: 100_000_000, doc: 'Frames a connection may send at once above frames_per_second. Past it frames are dropped (pusher:error 4301, once); a connection that sends another frame_burst frames is closed with 4100.', ours: true }),
    max_connections: int(Math.max(1024, Math.floor(totalmem() / BYTES_PER_CONNECTION)), 1, {
      max: 2 ** 31 - 1, doc: 'WebSocket connections this process accepts (all apps, all shards); beyond: pusher:error 4100 "Over capacity" and close 4100.', ours: true,
      defaultDoc: 'one per 32 KiB of the machine\'s memory, at least 1,024',
    }),
    http_body_bytes_in_flight: int(64 * 1024 * 1024, 1024, { max: 2 ** 40, doc: 'Request-body bytes one shard reads at once (all API requests together); beyond: 503 with Retry-After: 1.', ours: true }),
  }, 'What one client (a socket, an HTTP request) can make one process hold or do (docs/security.md, "Limits and hostile clients").'),
  http_fallback: section({
    enabled: bool(true, { doc: 'Serve pusher-js\'s HTTP fallback transports (xhr_streaming, xhr_polling) on the main listener (docs/fallback.md).', env: 'HTTP_FALLBACK_ENABLED', ours: true }),
    path: Type.String({ pattern: '^(/[A-Za-z0-9._~-]+)+$', default: '/pusher', ...meta({
      doc: 'Prefix of the endpoints: {path}/app/{key}/{server}/{session}/{xhr_streaming|xhr|xhr_send}; pusher-js uses /pusher.',
      env: 'HTTP_FALLBACK_PATH', ours: true,
      rule: 'must be a path like /pusher: one or more /segments of letters, digits and ._~- (no trailing /)',
    }) }),
    // pusher-js waits 30 s (pongTimeout) for any frame after its ping: a heartbeat must come sooner
    heartbeat_interval: int(25, 1, { max: 29, doc: 'Seconds without a write before `h` is written to a stream (a poll is answered with it).', ours: true }),
    disconnect_delay: int(5, 1, { max: 3600, doc: 'Seconds a session lives without a receiving request before it ends like a dropped connection.', ours: true }),
    max_sessions: int(10_000, 1, { doc: 'Open sessions per process, at most; new ones answer 503 past it.', ours: true }),
  }, 'pusher-js\'s HTTP fallback transports (PROTOCOL.md "HTTP fallback transports").'),
  history: section({
    driver: oneOf(['memory', 'redis', 'redis-cluster'], 'memory', { doc: 'Where history channels are numbered and kept (docs/history.md): memory (per process; with a cluster adapter each node numbers its own), redis (database.redis) or redis-cluster (database.redis_cluster, Redis ≥ 7): one sequence per channel for every node.', env: 'HISTORY_DRIVER' }),
    meta_ttl: int(86_400, 1, { doc: 'Seconds a channel\'s epoch and last serial outlive its last message while it has no subscribers.' }),
    max_recover: int(1000, 1, { max: MAX_HISTORY_SIZE, doc: 'Most messages one recovery replays; more: recovered false, reason too_many.' }),
    memory_budget_mb: int(256, 1, { max: 1024 * 1024, doc: 'MiB of stored messages in the process; past it the least recently written channels are evicted first (history_evictions_total).', ours: true }),
  }, 'Message history, rewind and recovery (apps[].channel_history says which channels).'),
  idempotency: section({
    window_seconds: int(120, 1, { max: 86_400, doc: 'Seconds a publish\'s idempotency_key is remembered per app: a repeat gets the first answer and is not delivered again. Process-wide with adapter.driver local; cluster-wide (in Redis) with redis / redis-cluster; nats refuses keys (501).' }),
    max_keys: int(100_000, 1, { max: 10_000_000, doc: 'Keys remembered per process with adapter.driver local; past it the oldest are forgotten first. (With a redis adapter Redis keeps them, each for window_seconds.)', ours: true }),
  }, 'Idempotent publish (idempotency_key on events and batch items).'),
  hook_client: section({
    max_in_flight: int(1024, 1, { max: 100_000, doc: 'Backend hook calls in flight per shard, all apps together; beyond: the hook\'s on_failure policy, counted (docs/hooks.md).', ours: true }),
    max_response_kb: int(64, 1, { max: 10_240, doc: 'Largest hook answer read (KiB); a bigger one is a failure.', ours: true }),
    max_pending_per_connection: int(100, 1, { max: 10_000, doc: 'Frames one connection may queue behind a pending hook call (they run in its order); beyond: the frame is dropped with pusher:error 4301.', ours: true }),
    breaker: section({
      failures: int(5, 1, { max: 10_000, doc: 'Consecutive failures of an endpoint (per shard) that open its circuit breaker: calls are answered by on_failure without calling.', ours: true }),
      open_ms: int(5000, 1, { max: 3_600_000, doc: 'ms an open breaker waits before one probe call.', ours: true }),
    }, 'The circuit breaker per hook endpoint.'),
    ca_path: optStr({ doc: 'A PEM file of CA certificates trusted for https:// hook endpoints, besides the system\'s; null = the system\'s only.', ours: true }),
  }, 'The shard-side HTTP client of every app\'s backend hooks (docs/hooks.md).'),
}, { additionalProperties: false });


// ---- apps ----

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
  algorithm: Type.Optional(choice<Algorithm, null>(ALGORITHMS, [Type.Null()], { default: null, description: 'Algorithm; null = the global one.' })),
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

const AppList = Type.Union([Type.Array(AppSchema), Type.Null()], { default: [], ...meta({ doc: 'Apps, each with id, key, secret and optional settings (docs/configuration.md, "Apps"); both lists are used. Ids and keys must be unique.', rule: 'must be a list of apps' }) });

export const AppManagerSchema = section({
  driver: oneOf(['array', 'memory'], 'array', { doc: 'The app store: array (apps from the configuration); memory is not in this build.' }),
  array: section({ apps: AppList }, 'The array app store.'),
}, 'Where apps come from.');

/** config.yaml: every section, apps and app_manager. */
export const ConfigFileSchema = Type.Object({
  ...GlobalSchema.properties,
  apps: AppList,
  app_manager: AppManagerSchema,
}, { additionalProperties: false });

// ---- the types every thread uses ----

export type GlobalConfig = StaticDecode<typeof GlobalSchema>;
type AppDecoded = StaticDecode<typeof AppSchema>;
/** An app with every limit resolved (app value, else the global default). */
export type AppConfig = { [K in keyof AppDecoded]-?: Exclude<AppDecoded[K], undefined> };
export type WebhookConfig = StaticDecode<typeof WebhookSchema>;
/** One entry of an app's `channel_history` (PROTOCOL.md "History, rewind and recovery"). */
export type ChannelHistorySetting = StaticDecode<typeof ChannelHistoryValue>;
export type HistoryConfig = GlobalConfig['history'];
export type IdempotencyConfig = GlobalConfig['idempotency'];
/** One entry of an app's `channel_delta_compression`: the string forms, or the object form. */
export type ChannelDeltaSetting = StaticDecode<typeof ChannelDeltaValue>;
/** The validated, frozen configuration handed to every thread (structured-clone safe). */
export type Config = GlobalConfig & { apps: AppConfig[] };
