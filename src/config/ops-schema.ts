// What operators watch the server with: metrics, console and log. Composed into
// GlobalSchema in schema.ts.

import { Type } from '@sinclair/typebox';
import { bool, int, meta, oneOf, optStr, port, section, str, text } from './schema-kit';

export const metrics = section({
  enabled: bool(false, { doc: 'Prometheus /metrics on its own listener.', env: 'METRICS_ENABLED' }),
  driver: oneOf(['prometheus'], 'prometheus', { doc: 'Metrics format.', env: 'METRICS_DRIVER' }),
  host: str('127.0.0.1', { doc: 'Interface of the metrics listener (loopback by default); a wildcard (0.0.0.0, ::) needs metrics.token.', env: 'METRICS_HOST' }),
  port: port(9601, { doc: 'Port of the metrics listener; 0 = any free port; must differ from port.', env: 'METRICS_PORT' }),
  prefix: Type.String({
    pattern: '^([a-zA-Z_:][a-zA-Z0-9_:]*)?$', default: 'ringcast_',
    ...meta({ doc: 'Prefix of every metric name.', env: 'METRICS_PROMETHEUS_PREFIX', rule: 'must be a valid Prometheus metric name prefix ([a-zA-Z_:][a-zA-Z0-9_:]*)' }),
  }),
  token: text('', { doc: 'Bearer token a scrape must send (`Authorization: Bearer <token>`, else 401); empty: /metrics is open to whoever reaches metrics.host. It also enables POST /drain (the node drains and stops, as on SIGTERM), which answers 403 without a token.', env: 'METRICS_TOKEN', ours: true }),
}, 'Prometheus metrics (docs/operations.md, "Metrics").');

export const liveConsole = section({
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
}, 'The live console (docs/console.md): its own listener, never the public port.');

export const log = section({
  level: oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], 'info', { doc: 'pino level.', env: 'LOG_LEVEL', ours: true }),
  output_format: oneOf(['json', 'human'], 'json', { doc: 'json (JSON lines on stdout) or human (pino-pretty lines); every thread\'s lines go through the primary, whole.', env: 'LOG_OUTPUT_FORMAT' }),
  colors_enabled: bool(false, { doc: 'Colours in the human format (refused with json).', env: 'LOG_COLORS_ENABLED' }),
  include_target: bool(false, { doc: 'Add thread (primary, shard-N) and module to every line.', env: 'LOG_INCLUDE_TARGET' }),
}, 'Logging (docs/operations.md, "Logging").');

export const tracing = section({
  enabled: bool(false, { doc: 'OpenTelemetry traces over OTLP/HTTP (docs/observability.md). The standard OTEL_* variables turn them on too (an OTLP endpoint, or OTEL_TRACES_EXPORTER=otlp), and OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none off.' }),
  endpoint: Type.String({
    format: 'ringcast-http-url', default: '',
    ...meta({ doc: 'OTLP/HTTP traces URL (e.g. http://collector:4318/v1/traces); empty: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces, else http://localhost:4318/v1/traces. Those variables win over this key.', rule: 'must be an http:// or https:// URL, or empty' }),
  }),
  sample_ratio: Type.Number({
    minimum: 0, maximum: 1, default: 1,
    ...meta({ doc: 'Share of new traces recorded (0 … 1); a request carrying a traceparent follows its caller\'s decision. OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG win over this key.', rule: 'must be a number from 0 to 1' }),
  }),
  service_name: str('ringcast', { doc: 'service.name of the spans; OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) wins over it.' }),
}, 'OpenTelemetry traces (docs/observability.md).');
