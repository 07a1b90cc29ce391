// The process, its listeners and what one client may make it hold: the top-level keys
// (host, port, workers…), unix_socket, ssl, cors, websocket, http, http_fallback, limits
// and bus (the rings between its threads). Composed into GlobalSchema in schema.ts.

import { availableParallelism, totalmem } from 'node:os';
import { Type } from '@sinclair/typebox';
import { bool, cidrList, fileMode, int, intOrNull, meta, oneOf, port, section, str, strList, text } from './schema-kit';
import { MAX_WORKERS } from './constants';

/** Memory per connection the derived default of limits.max_connections reserves. */
export const BYTES_PER_CONNECTION = 32 * 1024;

/** The top-level keys of config.yaml. */
export const serverKeys = {
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
shutdown_unready_delay: int(0, 0, {
  max: 3_600_000,
  doc: 'Milliseconds a stopping node answers 503 on /up (and to new connections) before it asks its clients to reconnect: time for a load balancer\'s health check to take it out of the pool. With shutdown_drain_window, at most half of shutdown_grace_period (longer is shortened to it).',
  env: 'SHUTDOWN_UNREADY_DELAY', ours: true,
}),
shutdown_drain_window: int(5_000, 0, {
  max: 3_600_000,
  doc: 'Milliseconds over which a stopping node asks its clients to reconnect (close 4200), evenly, so the other nodes take them at a steady rate; 0 = all at once. With shutdown_unready_delay, at most half of shutdown_grace_period (longer is shortened to it).',
  env: 'SHUTDOWN_DRAIN_WINDOW', ours: true,
}),

};

export const unixSocket = section({
  enabled: bool(false, { doc: 'Also listen on a Unix domain socket (same routes; shard 0 takes its connections).', env: 'UNIX_SOCKET_ENABLED' }),
  path: str('/tmp/ringcast.sock', { doc: 'Socket path; a stale socket file is removed at start, a live one is an error. Under systemd: /run/ringcast/ringcast.sock.', env: 'UNIX_SOCKET_PATH' }),
  permission_mode: fileMode(0o660, { doc: 'File mode of the socket, octal like chmod: 660, "0660", 0o660.', env: 'UNIX_SOCKET_PERMISSION_MODE', defaultDoc: '0o660' }),
}, 'A Unix domain socket listener next to host:port.');

export const ssl = section({
  enabled: bool(false, { doc: 'TLS on the public listener (cert_path and key_path must be readable PEM files).', env: 'SSL_ENABLED' }),
  cert_path: text('', { doc: 'PEM certificate (chain).', env: 'SSL_CERT_PATH' }),
  key_path: text('', { doc: 'PEM private key.', env: 'SSL_KEY_PATH' }),
  redirect_http: bool(false, { doc: 'Also run a plain HTTP listener answering every request with 301 to https://<Host, else domain>:<port><path>; needs ssl.enabled.', env: 'SSL_REDIRECT_HTTP' }),
  http_port: port(80, { doc: 'Port of that redirect listener (on host); 0 = any free port; must differ from port.', env: 'SSL_HTTP_PORT' }),
}, 'TLS, and the plain-HTTP redirect to it.');

export const cors = section({
  origin: strList(['*'], { doc: 'Allowed origins (env: comma-separated); \'*\' is refused with credentials: true.', env: 'CORS_ORIGINS' }),
  methods: strList(['GET', 'POST', 'OPTIONS'], { doc: 'Allowed methods.', env: 'CORS_METHODS' }),
  allowed_headers: strList([
    'Origin', 'Content-Type', 'X-Auth-Token', 'X-Requested-With', 'Accept',
    'Authorization', 'X-CSRF-TOKEN', 'XSRF-TOKEN', 'X-Socket-Id',
  ], { doc: 'Allowed request headers.', env: 'CORS_HEADERS' }),
  credentials: bool(false, { doc: 'Access-Control-Allow-Credentials.', env: 'CORS_CREDENTIALS' }),
}, 'CORS of the HTTP API.');

export const websocket = section({
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
}, 'WebSocket connections.');

export const bus = section({
  ring_bytes: intOrNull(null, 4096, {
    max: 2 ** 30, doc: 'Size of each inter-thread ring, rounded up to a power of two; null: 4 MiB / (threads − 1) as a power of two in [32 KiB, 256 KiB].', env: 'BUS_RING_BYTES', ours: true,
  }),
  max_spill_bytes: int(64 * 1024 * 1024, 65_536, {
    max: 2 ** 40, doc: 'Per thread: bytes of frames its writers queue while their rings are full, all its outgoing rings together (a process holds at most threads × this); past it the HTTP API answers 503. ≥ 2 × event_limits.max_payload_in_kb KiB.', env: 'BUS_MAX_SPILL_BYTES', ours: true,
  }),
  owner_reconcile_interval_ms: int(10_000, 0, {
    max: 3_600_000, doc: 'Every this many ms each shard reports its subscriptions to the owner shards, which correct what notices lost in a full ring left wrong (counts, presence members, member events, subscription_count, the webhook ledger; docs/owner-reconciliation.md); 0: off.', env: 'BUS_OWNER_RECONCILE_INTERVAL_MS', ours: true,
  }),
}, 'The rings between threads (one per ordered pair of threads).');

export const http = section({
  request_limit_in_mb: int(10, 1, { doc: 'Largest API request body (MB); bigger: 413.', env: 'HTTP_API_REQUEST_LIMIT_IN_MB' }),
  trusted_proxies: cidrList({
    doc: 'Peers (IP addresses, CIDR ranges; `unix`: the Unix socket\'s) whose X-Forwarded-For (else Forwarded: for=) names the client: the rightmost address that is not one of them is the client address of WebSockets, HTTP sessions, the API\'s per-IP window, hooks, the console\'s login throttle and logs. [] = no proxy trusted, the peer is the client (docs/security.md).',
    env: 'HTTP_TRUSTED_PROXIES', ours: true,
  }),
}, 'The HTTP API, and every listener\'s client addresses.');

export const limits = section({
  max_subscriptions_per_connection: int(1000, 1, { max: 10_000_000, doc: 'Channels one connection may be subscribed to at once; beyond: pusher:subscription_error LimitReached (status 4100), the connection kept.', ours: true }),
  max_client_event_depth: int(64, 1, { max: 10_000, doc: 'Levels of arrays and objects a client event\'s data may nest; deeper: pusher:error 4301, the event dropped before any hook sees it.', ours: true }),
  max_filter_values: int(1000, 1, { max: 10_000_000, doc: '`in` / `nin` values in one tag filter (all its nodes together); beyond: pusher:subscription_error InvalidFilter.', ours: true }),
  max_filter_values_per_connection: int(10_000, 1, { max: 100_000_000, doc: '`in` / `nin` values over all the tag filters of one connection; beyond: pusher:subscription_error LimitReached.', ours: true }),
  frames_per_second: int(1000, 1, { max: 1_000_000, doc: 'Frames per second a connection may send on average (its budget refills at this rate).', ours: true }),
  frame_burst: int(4000, 1, { max: 100_000_000, doc: 'Frames a connection may send at once above frames_per_second. Past it frames are dropped (pusher:error 4301, once); a connection that sends another frame_burst frames is closed with 4100.', ours: true }),
  max_connections: int(Math.max(1024, Math.floor(totalmem() / BYTES_PER_CONNECTION)), 1, {
    max: 2 ** 31 - 1, doc: 'WebSocket connections this process accepts (all apps, all shards); beyond: pusher:error 4100 "Over capacity" and close 4100.', ours: true,
    defaultDoc: 'one per 32 KiB of the machine\'s memory, at least 1,024',
  }),
  max_connections_per_ip: int(1000, 1, {
    max: 2 ** 31 - 1, doc: 'WebSockets and HTTP fallback sessions together from one client address (http.trusted_proxies says which), per process; beyond: pusher:error 4100 and close 4100 (WebSocket), 429 (HTTP session).', env: 'LIMITS_MAX_CONNECTIONS_PER_IP', ours: true,
  }),
  http_body_bytes_in_flight: int(64 * 1024 * 1024, 1024, { max: 2 ** 40, doc: 'Request-body bytes one shard reads at once (all API requests together); beyond: 503 with Retry-After: 1.', ours: true }),
}, 'What one client (a socket, an HTTP request) can make one process hold or do (docs/security.md, "Limits and hostile clients").');

export const httpFallback = section({
  enabled: bool(true, { doc: 'Serve pusher-js\'s HTTP fallback transports (xhr_streaming, xhr_polling) on the main listener (docs/fallback.md).', env: 'HTTP_FALLBACK_ENABLED', ours: true }),
  path: Type.String({ pattern: '^(/[A-Za-z0-9._~-]+)+$', default: '/pusher', ...meta({
    doc: 'Prefix of the endpoints: {path}/app/{key}/{server}/{session}/{xhr_streaming|xhr|xhr_send}; pusher-js uses /pusher.',
    env: 'HTTP_FALLBACK_PATH', ours: true,
    rule: 'must be a path like /pusher: one or more /segments of letters, digits and ._~- (no trailing /)',
  }) }),
  // pusher-js waits 30 s (pongTimeout) for any frame after its ping: a heartbeat must come sooner
  heartbeat_interval: int(25, 1, { max: 29, doc: 'Seconds without a write before `h` is written to a stream (a poll is answered with it).', ours: true }),
  disconnect_delay: int(5, 1, { max: 3600, doc: 'Seconds a session lives without a receiving request before it ends like a dropped connection.', ours: true }),
  abort_delay_ms: int(1000, 0, {
    max: 3_600_000,
    doc: 'Milliseconds a session lives after the client aborted its receiving request (it left: presence member_removed and webhooks follow), unless a new one arrives; pusher-js\'s own reopen of a long stream keeps disconnect_delay. At most disconnect_delay.',
    ours: true,
  }),
  max_sessions: int(10_000, 1, { doc: 'Open sessions per process, at most; new ones answer 503 past it.', ours: true }),
}, 'pusher-js\'s HTTP fallback transports (docs/fallback.md).');
