import t, { type Test } from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ConfigError, deepFreeze, defaultConfig, loadConfig, type ConfigInput, type LoadConfigOptions } from '../../src/config';
import { defaultRawTree } from '../../src/config/defaults';
import { APP_ENV_VARS, ENV_VARS } from '../../src/config/env';

const APP = { id: 'a1', key: 'k1', secret: 's1' };
const dir = mkdtempSync(join(tmpdir(), 'ringcast-config-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
function yamlFile(text: string): string {
  const file = join(dir, `c${n++}.yaml`);
  writeFileSync(file, text);
  return file;
}

/** Loads with one app unless the overrides list apps themselves; env is isolated. */
function load(overrides: Record<string, unknown> = {}, env: NodeJS.ProcessEnv = {}, file: string | null = null) {
  const o = 'apps' in overrides || 'app_manager' in overrides ? overrides : { apps: [APP], ...overrides };
  return loadConfig({ file, env, overrides: o as ConfigInput });
}

function configError(opts: LoadConfigOptions): ConfigError {
  try {
    loadConfig(opts);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

function fails(t: Test, what: string, opts: LoadConfigOptions, key: string, rule: RegExp | string): ConfigError {
  const err = configError({ env: {}, ...opts });
  t.equal(err.code, 'RC_ERR_CONFIG', `${what}: code`);
  t.equal(err.key, key, `${what}: key`);
  t.ok(err.message.startsWith(`${key} `) || err.message.includes(key), `${what}: message names ${key}: ${err.message}`);
  t.match(err.message, rule, `${what}: rule`);
  return err;
}
const withApp = (o: Record<string, unknown>): LoadConfigOptions =>
  ({ overrides: ('apps' in o || 'app_manager' in o ? o : { apps: [APP], ...o }) as ConfigInput });

t.test('defaults', async (t) => {
  const cfg = load();
  const { apps, app_manager: appManager, ...global } = cfg;
  t.same(global, defaultConfig());
  t.same(appManager, { driver: 'array', table_schema: 'auto', cache: { enabled: true, ttl: 60 } });
  t.equal(cfg.port, 6001);
  t.equal(cfg.host, '0.0.0.0');
  t.equal(cfg.unix_socket.permission_mode, 0o660);
  t.ok(cfg.workers >= 1 && cfg.workers <= 256);
  t.same(apps, [{
    ...APP, enabled: true, allowed_origins: [], max_connections: null, max_client_events_per_second: 1000,
    max_backend_events_per_second: null, max_event_payload_in_kb: 100, max_event_channels_at_once: 100,
    max_event_batch_size: 10, max_event_name_length: 200, max_channel_name_length: 200, max_message_size_kb: 64,
    max_presence_members_per_channel: 100, max_presence_member_size_in_kb: 2, enable_client_messages: true,
    subscription_count_events: false, enable_user_authentication: true, enable_watchlist_events: false,
    user_authentication_timeout: null, webhooks: [], channel_delta_compression: {}, channel_history: {}, hooks: null,
  }]);
  const a = defaultConfig();
  a.cors.origin.push('x');
  t.same(defaultConfig().cors.origin, ['*'], 'defaultConfig returns a fresh tree');
});

t.test('app limits default to the resolved global values', async (t) => {
  const cfg = load({ event_limits: { max_payload_in_kb: 7, max_batch_size: 3 }, websocket: { max_payload_kb: 32 },
    presence: { max_members_per_channel: 5 }, channel_limits: { max_name_length: 150 } });
  t.match(cfg.apps[0], { max_event_payload_in_kb: 7, max_event_batch_size: 3, max_message_size_kb: 32,
    max_presence_members_per_channel: 5, max_channel_name_length: 150 });
  const own = load({ event_limits: { max_payload_in_kb: 7 }, apps: [{ ...APP, max_event_payload_in_kb: 9 }] });
  t.equal(own.apps[0].max_event_payload_in_kb, 9);
});

t.test('the root config.yaml runs as is', async (t) => {
  const cfg = loadConfig({ file: resolve(__dirname, '../../../config.yaml'), env: {} });
  const { apps, app_manager: appManager, ...global } = cfg;
  t.same(global, defaultConfig(), 'every value written there is the default');
  t.equal(appManager.driver, 'array');
  t.match(apps, [{ id: 'app-id', key: 'app-key', secret: 'app-secret' }]);
  t.equal(apps.length, 1);
});

t.test('freezing', async (t) => {
  const overrides = { apps: [{ ...APP, allowed_origins: ['a.com'] }] };
  const cfg = loadConfig({ env: {}, overrides });
  for (const o of [cfg, cfg.apps, cfg.apps[0], cfg.apps[0].allowed_origins, cfg.cors.origin, cfg.adapter.cluster_health]) {
    t.ok(Object.isFrozen(o));
  }
  t.throws(() => { (cfg as { port: number }).port = 1; }, TypeError);
  t.throws(() => { cfg.apps.push(cfg.apps[0]); }, TypeError);
  t.notOk(Object.isFrozen(overrides.apps[0]), 'the caller’s overrides are not frozen');
  overrides.apps[0].allowed_origins.push('b.com');
  t.same(cfg.apps[0].allowed_origins, ['a.com'], 'nor aliased');
  const o = { a: { b: [{ c: 1 }] } };
  t.equal(deepFreeze(o), o);
  t.ok(Object.isFrozen(o.a.b[0]));
});

t.test('YAML loading', async (t) => {
  const file = yamlFile(`
port: 7000
ssl:
adapter:
  cluster_health: {heartbeat_interval_ms: 5000}
database:
  redis_cluster:
    nodes: ["10.0.0.1:7000", {host: 10.0.0.2, port: 7001}, "[::1]:7002"]
cors: {origin: [https://a.com], credentials: true}
apps:
  - {id: 42, key: 1234, secret: s}
app_manager:
  array:
    apps:
      - {id: m1, key: mk, secret: ms, max_connections: -1, max_backend_events_per_second: 5}
`);
  const cfg = loadConfig({ file, env: {} });
  t.equal(cfg.port, 7000);
  t.equal(cfg.ssl.http_port, 80, 'an empty section keeps its defaults');
  t.same(cfg.adapter.cluster_health, { enabled: true, heartbeat_interval_ms: 5000, node_timeout_ms: 30000, cleanup_interval_ms: 10000 });
  t.same(cfg.database.redis_cluster.nodes, [{ host: '10.0.0.1', port: 7000 }, { host: '10.0.0.2', port: 7001 }, { host: '::1', port: 7002 }]);
  t.same(cfg.apps.map((a) => [a.id, a.key]), [['m1', 'mk'], ['42', '1234']], 'app_manager apps first, numeric ids become strings');
  t.equal(cfg.apps[0].max_connections, null);
  t.equal(cfg.apps[0].max_backend_events_per_second, 5);

  const modes: [string, number][] = [['660', 0o660], ['0o600', 0o600], ['"0640"', 0o640], ['"755"', 0o755]];
  for (const [text, want] of modes) {
    const c = loadConfig({ file: yamlFile(`unix_socket: {permission_mode: ${text}}\napps: [{id: a, key: b, secret: c}]\n`), env: {} });
    t.equal(c.unix_socket.permission_mode, want, `permission_mode ${text}`);
  }
  const bad = yamlFile('unix_socket: {permission_mode: 999}\n');
  fails(t, 'mode 999', { file: bad }, 'unix_socket.permission_mode', /must be an octal file mode/);

  const empty = yamlFile('# nothing\n');
  fails(t, 'empty file', { file: empty }, 'apps', /^no apps configured: set apps in config.yaml or SERVICE_DEFAULT_APP_ID\/KEY\/SECRET$/);
  const nullApps = loadConfig({ file: yamlFile('apps:\n'), env: {}, overrides: { apps: [APP] } });
  t.equal(nullApps.apps.length, 1);
});

t.test('YAML file errors name the file', async (t) => {
  const missing = join(dir, 'missing.yaml');
  fails(t, 'missing', { file: missing }, missing, /cannot read config file/);
  const broken = yamlFile('port: [1,\n');
  fails(t, 'syntax', { file: broken }, broken, /invalid YAML in .*line/);
  const dup = yamlFile('port: 1\nport: 2\n');
  fails(t, 'duplicate keys', { file: dup }, dup, /Map keys must be unique/);
  const list = yamlFile('- a\n- b\n');
  fails(t, 'not a mapping', { file: list }, list, /must hold a YAML mapping/);
  const source = yamlFile('port: 70000\napps: [{id: a, key: b, secret: c}]\n');
  const err = fails(t, 'source', { file: source }, 'port', 'port must be an integer between 0 and 65535, got 70000');
  t.ok(err.message.endsWith(`(from ${source})`), 'message says which file set it');
  fails(t, 'yes is a string', { file: yamlFile('ssl: {enabled: yes}\napps: [{id: a, key: b, secret: c}]\n') },
    'ssl.enabled', 'ssl.enabled must be a boolean (true or false), got "yes"');
});

t.test('precedence: defaults < file < env < overrides', async (t) => {
  const file = yamlFile('port: 7000\nhost: 127.0.0.1\ndomain: file.test\napps: [{id: a, key: b, secret: c}]\n');
  const fromFile = loadConfig({ file, env: {} });
  t.match(fromFile, { port: 7000, host: '127.0.0.1', domain: 'file.test', metrics: { port: 9601 } });
  const fromEnv = loadConfig({ file, env: { PORT: '7001', HOST: '::' } });
  t.match(fromEnv, { port: 7001, host: '::', domain: 'file.test' });
  const fromOverrides = loadConfig({ file, env: { PORT: '7001' }, overrides: { port: 7002 } });
  t.equal(fromOverrides.port, 7002);
  const file2 = yamlFile('apps: [{id: x, key: x, secret: x}]\n');
  t.same(loadConfig({ file: file2, env: {}, overrides: { apps: [APP] } }).apps.map((a) => a.id), ['a1'], 'overrides replace lists whole');
});

t.test('env overrides', async (t) => {
  const cfg = load({}, {
    PORT: ' 7100 ', WORKERS: '3', SHUTDOWN_GRACE_PERIOD: '500', LOG_INCLUDE_TARGET: 'YES', UNIX_SOCKET_ENABLED: '1',
    UNIX_SOCKET_PERMISSION_MODE: '0o600', TAG_FILTERING_ENABLED: 'True', METRICS_ENABLED: 'no', LOG_COLORS_ENABLED: '0',
    CORS_ORIGINS: 'https://a.com, https://b.com,', CORS_CREDENTIALS: 'true', REDIS_CLUSTER_NODES: 'h1:7000,h2:7001',
    RATE_LIMITER_API_MAX_REQUESTS: '100', RATE_LIMITER_WS_MAX_REQUESTS: 'off', NATS_SERVERS: 'nats://n1:4222,nats://n2:4222',
    DATABASE_REDIS_PASSWORD: 'pw', DATABASE_REDIS_DB: '2', LOG_LEVEL: 'debug', WEBSOCKET_ACTIVITY_TIMEOUT: '60',
    DELTA_COMPRESSION_ENABLED: 'false', WEBHOOK_BATCHING_SIZE: '5', DOMAIN: '',
  });
  t.match(cfg, {
    port: 7100, workers: 3, shutdown_grace_period: 500, domain: 'localhost',
    unix_socket: { enabled: true, permission_mode: 0o600 },
    tag_filtering: { enabled: true }, metrics: { enabled: false }, log: { colors_enabled: false, include_target: true, level: 'debug' },
    cors: { origin: ['https://a.com', 'https://b.com'], credentials: true },
    rate_limiter: { api: { max_requests: 100 }, websocket: { max_requests: null } },
    adapter: { nats: { servers: ['nats://n1:4222', 'nats://n2:4222'] } },
    database: { redis: { password: 'pw', db: 2 }, redis_cluster: { nodes: [{ host: 'h1', port: 7000 }, { host: 'h2', port: 7001 }] } },
    websocket: { activity_timeout: 60 }, delta_compression: { enabled: false }, webhooks: { batching: { size: 5 } },
  });
  for (const [path] of [...Object.values(ENV_VARS)]) {
    const parts = path.split('.');
    let cur: unknown = defaultRawTree();
    for (const p of parts) cur = (cur as Record<string, unknown>)[p];
    t.not(cur, undefined, `${path} exists`);
  }
});

t.test('env parse errors name the variable', async (t) => {
  const cases: [Record<string, string>, string, RegExp | string][] = [
    [{ SSL_ENABLED: 'maybe' }, 'SSL_ENABLED', 'SSL_ENABLED must be a boolean: true/false, 1/0 or yes/no, got "maybe"'],
    [{ PORT: '6001abc' }, 'PORT', 'PORT must be a number, got "6001abc"'],
    [{ WORKERS: '0x10' }, 'WORKERS', /WORKERS must be a number/],
    [{ RATE_LIMITER_API_MAX_REQUESTS: 'lots' }, 'RATE_LIMITER_API_MAX_REQUESTS', /must be a number, null or off/],
    [{ REDIS_CLUSTER_NODES: 'h1:7000,h2' }, 'REDIS_CLUSTER_NODES', /must be a comma-separated list of host:port \(bad entry "h2"\)/],
    [{ UNIX_SOCKET_PERMISSION_MODE: '0o999' }, 'UNIX_SOCKET_PERMISSION_MODE', /must be an octal file mode/],
    [{ SERVICE_DEFAULT_APP_ID: 'x', SERVICE_DEFAULT_APP_KEY: 'y', SERVICE_DEFAULT_APP_SECRET: 'z', SERVICE_DEFAULT_APP_MAX_CONNECTIONS: 'ten' },
      'SERVICE_DEFAULT_APP_MAX_CONNECTIONS', /must be a number/],
  ];
  for (const [env, key, rule] of cases) fails(t, key, { env, ...withApp({}) }, key, rule);
  const range = fails(t, 'range', { env: { PORT: '70000' }, ...withApp({}) }, 'port', 'port must be an integer between 0 and 65535, got 70000 (from env PORT)');
  t.equal(range.issues.length, 1);
});

t.test('default app from env', async (t) => {
  const env = { SERVICE_DEFAULT_APP_ID: 'env-id', SERVICE_DEFAULT_APP_KEY: 'env-key', SERVICE_DEFAULT_APP_SECRET: 'env-secret' };
  const only = loadConfig({ env });
  t.match(only.apps, [{ id: 'env-id', key: 'env-key', secret: 'env-secret', max_connections: null }]);
  const full = loadConfig({ env: { ...env, SERVICE_DEFAULT_APP_ALLOWED_ORIGINS: 'a.com, https://*.b.com', SERVICE_DEFAULT_APP_MAX_CONNECTIONS: '-1', SERVICE_DEFAULT_APP_MAX_EVENT_PAYLOAD_IN_KB: '20' } });
  t.match(full.apps[0], { allowed_origins: ['a.com', 'https://*.b.com'], max_connections: null, max_event_payload_in_kb: 20 });
  const merged = loadConfig({ env, overrides: { apps: [APP, { id: 'env-id', key: 'old', secret: 'old' }, { id: 'z', key: 'z', secret: 'z' }] } });
  t.same(merged.apps.map((a) => a.key), ['k1', 'env-key', 'z'], 'same id: the env app replaces it in place');
  const appended = loadConfig({ env, overrides: { apps: [APP] } });
  t.same(appended.apps.map((a) => a.id), ['a1', 'env-id']);

  fails(t, 'partial', { env: { SERVICE_DEFAULT_APP_ID: 'x' } }, 'SERVICE_DEFAULT_APP_KEY',
    /^SERVICE_DEFAULT_APP_KEY, SERVICE_DEFAULT_APP_SECRET are not set, but SERVICE_DEFAULT_APP_ID is/);
  fails(t, 'extras only', { env: { SERVICE_DEFAULT_APP_MAX_CONNECTIONS: '5' } }, 'SERVICE_DEFAULT_APP_ID',
    /SERVICE_DEFAULT_APP_ID, SERVICE_DEFAULT_APP_KEY, SERVICE_DEFAULT_APP_SECRET are not set/);
  fails(t, 'limit', { env: { ...env, SERVICE_DEFAULT_APP_MAX_CONNECTIONS: '0' } }, 'SERVICE_DEFAULT_APP_MAX_CONNECTIONS',
    'SERVICE_DEFAULT_APP_MAX_CONNECTIONS must be a positive integer or null, got 0');
  fails(t, 'dup key', { env: { ...env, SERVICE_DEFAULT_APP_KEY: 'k1' }, overrides: { apps: [APP] } }, 'SERVICE_DEFAULT_APP_KEY',
    'SERVICE_DEFAULT_APP_KEY must be unique, but apps[0] has the same key "k1"');
  t.same(Object.keys(APP_ENV_VARS).slice(0, 3), ['SERVICE_DEFAULT_APP_ID', 'SERVICE_DEFAULT_APP_KEY', 'SERVICE_DEFAULT_APP_SECRET']);
});

t.test('validation messages name the key and the rule', async (t) => {
  const B = 'must be a boolean (true or false)';
  const cases: [Record<string, unknown>, string, RegExp | string][] = [
    [{ port: 70000 }, 'port', 'port must be an integer between 0 and 65535, got 70000'],
    [{ port: '6001' }, 'port', 'port must be an integer between 0 and 65535, got "6001"'],
    [{ port: 1.5 }, 'port', /^port must be an integer between 0 and 65535/],
    [{ workers: 0 }, 'workers', 'workers must be an integer between 1 and 256, got 0'],
    [{ workers: 300 }, 'workers', 'workers must be an integer between 1 and 256, got 300'],
    [{ shutdown_grace_period: -1 }, 'shutdown_grace_period', 'shutdown_grace_period must be a non-negative integer, got -1'],
    [{ host: '' }, 'host', 'host must be a non-empty string, got ""'],
    [{ unix_socket: { permission_mode: 'rwx' } }, 'unix_socket.permission_mode', /must be an octal file mode such as "660" or 0o660/],
    [{ ssl: { enabled: true } }, 'ssl.cert_path', 'ssl.cert_path must name a readable PEM file when ssl.enabled is true (not set)'],
    [{ ssl: { enabled: true, cert_path: '/nonexistent/c.pem', key_path: '/nonexistent/k.pem' } }, 'ssl.cert_path', /ENOENT/],
    [{ adapter: { driver: 'kafka' } }, 'adapter.driver', 'adapter.driver must be one of local, redis, redis-cluster, nats, got "kafka"'],
    [{ cache: { driver: 'disk' } }, 'cache.driver', 'cache.driver must be one of memory, redis, redis-cluster, none'],
    [{ queue: { driver: 'memory' } }, 'queue.driver', 'queue.driver must be one of sync, redis'],
    [{ rate_limiter: { driver: 'x' } }, 'rate_limiter.driver', /must be one of memory, redis, redis-cluster, none/],
    [{ rate_limiter: { api: { max_requests: 0 } } }, 'rate_limiter.api.max_requests', 'rate_limiter.api.max_requests must be a positive integer or null, got 0'],
    [{ rate_limiter: { api: { trust_hops: -1 } } }, 'rate_limiter.api.trust_hops', 'must be an integer between 0 and 32'],
    [{ adapter: { cluster_health: { heartbeat_interval_ms: 20000 } } }, 'adapter.cluster_health.heartbeat_interval_ms',
      'adapter.cluster_health.heartbeat_interval_ms must be ≤ node_timeout_ms / 3 (node_timeout_ms is 30000), got 20000'],
    [{ adapter: { driver: 'redis-cluster' } }, 'database.redis_cluster.nodes',
      'database.redis_cluster.nodes must list at least one host:port when adapter.driver is redis-cluster (or set REDIS_CLUSTER_NODES)'],
    [{ cache: { driver: 'redis-cluster' }, rate_limiter: { driver: 'redis-cluster' } }, 'database.redis_cluster.nodes', /when cache.driver, rate_limiter.driver is redis-cluster/],
    [{ database: { redis_cluster: { nodes: ['nope'] } } }, 'database.redis_cluster.nodes[0]', /must be a "host:port" string or a \{host, port\} mapping/],
    [{ database: { redis_cluster: { nodes: [{ host: 'h', port: 0 }] } } }, 'database.redis_cluster.nodes[0].port', 'must be an integer between 1 and 65535'],
    [{ adapter: { driver: 'nats', nats: { servers: [] } } }, 'adapter.nats.servers', /must list at least one server when adapter.driver is nats/],
    [{ delta_compression: { cluster_coordination: true } }, 'delta_compression.cluster_coordination', /needs adapter.driver redis, redis-cluster or nats/],
    [{ adapter: { buckets: 1000 } }, 'adapter.buckets', 'adapter.buckets must be a power of two (1, 2, 4, … 65536), got 1000'],
    [{ adapter: { buckets: 131_072 } }, 'adapter.buckets', /adapter.buckets must be an integer between 1 and 65536/],
    [{ adapter: { driver: 'nats' }, apps: [{ ...APP, channel_history: { 'h-*': { size: 10, ttl: 60 } } }] }, 'history.driver',
      /history.driver must be redis or redis-cluster with adapter.driver nats and apps with channel_history/],
    [{ database: { redis: { pool_min: 20 } } }, 'database.redis.pool_min', 'database.redis.pool_min must be ≤ database.redis.pool_max (10), got 20'],
    [{ database: { pooling: { min: 11, max: 10 } } }, 'database.pooling.min', 'must be ≤ database.pooling.max (10)'],
    [{ database: { redis: { password: 12345 } } }, 'database.redis.password', 'database.redis.password must be a string or null, got a number'],
    [{ cors: { credentials: true } }, 'cors.origin', /^cors.origin must not contain '\*' when cors.credentials is true/],
    [{ cors: { origin: '*' } }, 'cors.origin', 'cors.origin must be a list of non-empty strings, got "*"'],
    [{ metrics: { prefix: 'ring-cast' } }, 'metrics.prefix', /must be a valid Prometheus metric name prefix/],
    [{ adapter: { nats: { prefix: 'blue.' } } }, 'adapter.nats.prefix', /must be NATS subject tokens .* joined by single dots, with no wildcard, got "blue\."/],
    [{ metrics: { enabled: true, port: 6001 } }, 'metrics.port', 'metrics.port must differ from port when metrics.enabled is true, got 6001'],
    [{ log: { level: 'verbose' } }, 'log.level', 'log.level must be one of fatal, error, warn, info, debug, trace, silent, got "verbose"'],
    [{ log: { output_format: 'text' } }, 'log.output_format', 'must be one of json, human'],
    [{ websocket: { max_payload_kb: 0 } }, 'websocket.max_payload_kb', 'websocket.max_payload_kb must be a positive integer, got 0'],
    [{ http: { request_limit_in_mb: 0.5 } }, 'http.request_limit_in_mb', 'http.request_limit_in_mb must be a positive integer, got 0.5'],
    [{ event_limits: { max_batch_size: 'ten' } }, 'event_limits.max_batch_size', 'must be a positive integer, got "ten"'],
    [{ presence: { max_member_size_in_kb: 0 } }, 'presence.max_member_size_in_kb', 'must be a positive integer'],
    [{ webhooks: { batching: { duration: 0 } } }, 'webhooks.batching.duration', 'must be a positive integer'],
    [{ webhooks: { key_header: 'X Key' } }, 'webhooks.key_header', /webhooks\.key_header must be an HTTP header name/],
    [{ webhooks: { signature_header: 'x-pusher-key' } }, 'webhooks.signature_header', 'webhooks.signature_header must differ from webhooks.key_header'],
    [{ webhooks: { timeout_ms: 0 } }, 'webhooks.timeout_ms', 'must be a positive integer'],
    [{ webhooks: { retry: { max_retries: 21 } } }, 'webhooks.retry.max_retries', 'must be an integer between 0 and 20'],
    [{ webhooks: { retry: { initial_delay_ms: 90_000 } } }, 'webhooks.retry.initial_delay_ms', 'must be ≤ webhooks.retry.max_delay_ms (60000)'],
    [{ webhooks: { max_queue: 0 } }, 'webhooks.max_queue', 'must be a positive integer'],
    [{ webhooks: { lambda_endpoint: 'localhost:9000' } }, 'webhooks.lambda_endpoint', 'must be an http:// or https:// URL, or null'],
    [{ delta_compression: { algorithm: 'fossil' } }, 'delta_compression.algorithm', 'must be one of Fossil, Xdelta3, got "fossil"'],
    [{ protocol: { event_prefix: 'ably' } }, 'protocol.event_prefix', 'must be one of pusher, proto'],
    [{ tag_filtering: { enabled: 'yes' } }, 'tag_filtering.enabled', `tag_filtering.enabled ${B}, got "yes"`],
    [{ sssl: { enabled: true } }, 'sssl', 'sssl is not a known setting (did you mean "ssl"?) (from overrides)'],
    [{ adapter: { drver: 'redis' } }, 'adapter.drver', 'adapter.drver is not a known setting (did you mean "driver"?)'],
    [{ ssl: true }, 'ssl', 'ssl must be a mapping of settings, got true'],
    [{ app_manager: { driver: 'oracle', array: { apps: [APP] } } }, 'app_manager.driver', 'app_manager.driver must be one of array, memory, postgres, mysql, dynamodb, got "oracle"'],
    [{ app_manager: { array: { apps: [APP] } }, apps: {} }, 'apps', 'apps must be a list of apps, got {}'],
  ];
  for (const [o, key, rule] of cases) fails(t, JSON.stringify(o), withApp(o), key, rule);
});

t.test('ssl with readable files passes', async (t) => {
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  writeFileSync(cert, 'x');
  writeFileSync(key, 'x');
  t.equal(load({ ssl: { enabled: true, cert_path: cert, key_path: key } }).ssl.enabled, true);
  fails(t, 'dir', withApp({ ssl: { enabled: true, cert_path: dir, key_path: key } }), 'ssl.cert_path', /not a file/);
  fails(t, 'redirect', withApp({ port: 443, ssl: { enabled: true, cert_path: cert, key_path: key, redirect_http: true, http_port: 443 } }),
    'ssl.http_port', 'ssl.http_port must differ from port when ssl.redirect_http is true');
  t.equal(load({ adapter: { cluster_health: { enabled: false, heartbeat_interval_ms: 20000 } } }).adapter.cluster_health.enabled, false,
    'the heartbeat rule applies only when cluster health is on');
});

t.test('app validation', async (t) => {
  const app = (extra: Record<string, unknown>) => ({ apps: [APP, { id: 'a2', key: 'k2', secret: 's2', ...extra }] });
  const hook = (w: Record<string, unknown>) => app({ webhooks: [{ url: 'https://h.test/hook', event_types: ['channel_occupied'], ...w }] });
  const cases: [Record<string, unknown>, string, RegExp | string][] = [
    [app({ max_connections: 0 }), 'apps[1].max_connections', 'apps[1].max_connections must be a positive integer or null, got 0 (from overrides)'],
    [app({ max_connections: '10' }), 'apps[1].max_connections', 'apps[1].max_connections must be a positive integer or null, got "10"'],
    [app({ max_backend_events_per_second: 1.5 }), 'apps[1].max_backend_events_per_second', 'must be a positive integer or null'],
    [app({ max_client_events_per_second: 0 }), 'apps[1].max_client_events_per_second', 'must be a positive integer, got 0'],
    [app({ max_presence_member_size_in_kb: -2 }), 'apps[1].max_presence_member_size_in_kb', 'must be a positive integer'],
    [app({ enabled: 'false' }), 'apps[1].enabled', 'apps[1].enabled must be a boolean (true or false), got "false"'],
    [app({ allowed_origins: 'a.com' }), 'apps[1].allowed_origins', 'must be a list of non-empty strings'],
    [app({ max_conections: 5 }), 'apps[1].max_conections', 'apps[1].max_conections is not a known app setting (did you mean "max_connections"?)'],
    [app({ id: '' }), 'apps[1].id', "apps[1].id must be a non-empty string without spaces, '/', '?' or '#', got \"\""],
    [app({ id: 'a b' }), 'apps[1].id', /must be a non-empty string without spaces/],
    [app({ key: undefined }), 'apps[1].key', 'apps[1].key must be a non-empty string without spaces, \'/\', \'?\' or \'#\', got nothing'],
    [app({ secret: 123 }), 'apps[1].secret', 'apps[1].secret must be a non-empty string (quote it in YAML), got a number'],
    [{ apps: [APP, 'a2'] }, 'apps[1]', 'apps[1] must be a mapping with id, key and secret, got "a2"'],
    [app({ id: 'a1' }), 'apps[1].id', 'apps[1].id must be unique, but apps[0] has the same id "a1"'],
    [app({ key: 'k1' }), 'apps[1].key', 'apps[1].key must be unique, but apps[0] has the same key "k1"'],
    [{ apps: [APP], app_manager: { array: { apps: [{ ...APP, key: 'other' }] } } }, 'apps[0].id', 'but app_manager.array.apps[0] has the same id'],
    [{ apps: [] }, 'apps', 'no apps configured: set apps in config.yaml or SERVICE_DEFAULT_APP_ID/KEY/SECRET'],
    [app({ webhooks: {} }), 'apps[1].webhooks', 'must be a list of {url, event_types, headers}'],
    [hook({ url: 'ftp://h.test' }), 'apps[1].webhooks[0].url', 'apps[1].webhooks[0].url must be an http://, https:// or lambda:// URL, got "ftp://h.test"'],
    [hook({ url: 'https://' }), 'apps[1].webhooks[0].url', 'must be an http://, https:// or lambda:// URL'],
    [hook({ event_types: [] }), 'apps[1].webhooks[0].event_types', /must be a non-empty list of: channel_occupied, channel_vacated, member_added, member_removed, client_event, cache_miss, subscription_count/],
    [hook({ event_types: ['channel_occupied', 'occupied'] }), 'apps[1].webhooks[0].event_types[1]', 'must be one of channel_occupied'],
    [hook({ headers: { 'X-A': 1 } }), 'apps[1].webhooks[0].headers', 'must be a mapping of header name to string value'],
    [hook({ filter: {} }), 'apps[1].webhooks[0].filter', 'is not a known webhook setting'],
    [hook({ headers: { 'Bad Name': 'v' } }), 'apps[1].webhooks[0].headers', 'has "Bad Name", which is not an HTTP header name'],
    [hook({ headers: { 'X-A': 'a\r\nX-B: b' } }), 'apps[1].webhooks[0].headers.X-A', 'must not contain CR, LF or NUL'],
    [hook({ url: 'lambda://my-function' }), 'apps[1].webhooks[0].url', /must be lambda:\/\/arn:<partition>:lambda:<region>:<account>:function:<name>\[:<qualifier>\]/],
    [app({ channel_delta_compression: [] }), 'apps[1].channel_delta_compression', 'must be a mapping of channel pattern to setting'],
    [app({ channel_delta_compression: { 'x-*': 'fossil' } }), 'apps[1].channel_delta_compression.x-*',
      'apps[1].channel_delta_compression.x-* must be one of Fossil, Xdelta3, disabled, inherit, got "fossil"'],
    [app({ channel_delta_compression: { 'a*b': 'Fossil' } }), 'apps[1].channel_delta_compression.a*b', /has an invalid pattern/],
    [app({ channel_delta_compression: { c: { conflation: 'id' } } }), 'apps[1].channel_delta_compression.c.conflation', /is not a known delta setting \(did you mean "conflation_key"\?\)/],
    [app({ channel_delta_compression: { c: { max_conflation_keys: 0 } } }), 'apps[1].channel_delta_compression.c.max_conflation_keys', 'must be a positive integer or null'],
    [app({ channel_delta_compression: { c: 5 } }), 'apps[1].channel_delta_compression.c', /must be one of Fossil, Xdelta3, disabled, inherit or a mapping/],
  ];
  for (const [o, key, rule] of cases) fails(t, key, withApp(o), key, rule);

  const ok = load({
    apps: [{
      ...APP, max_connections: 10, max_backend_events_per_second: -1,
      webhooks: [{ url: 'lambda://arn:aws:lambda:eu-west-1:123456789012:function:f', event_types: ['client_event'] },
        { url: 'https://h.test/x', event_types: ['member_added'], headers: { 'X-A': 'b' } }],
      channel_delta_compression: { '*': 'inherit', 'market-*': 'Xdelta3', '*-prices': { conflation_key: 'item.id', max_messages_per_key: 5 } },
    }],
  } as Record<string, unknown>).apps[0];
  t.equal(ok.max_connections, 10);
  t.equal(ok.max_backend_events_per_second, null);
  t.same(ok.webhooks[0].headers, {});
  t.same(ok.channel_delta_compression['*-prices'], {
    enabled: true, algorithm: null, conflation_key: 'item.id', max_messages_per_key: 5, max_conflation_keys: null, enable_tags: false,
  });
});

t.test('several problems are reported together', async (t) => {
  const err = configError({ env: {}, overrides: { port: -1, workers: 0, apps: [{ ...APP, max_connections: 0 }] } as unknown as ConfigInput });
  t.equal(err.key, 'port');
  t.same(err.issues.map((i) => i.key), ['port', 'workers', 'apps[0].max_connections']);
  t.match(err.message, /^3 configuration errors:\n {2}- port must be/);
});

t.test('slow consumers and the bus: websocket.on_backpressure, bus.ring_bytes, bus.max_spill_bytes', async (t) => {
  const d = load();
  t.equal(d.websocket.on_backpressure, 'drop');
  t.same(d.bus, { ring_bytes: null, max_spill_bytes: 67_108_864, owner_reconcile_interval_ms: 10_000 }, 'ring size derived from the thread count (bus/topology.ts)');
  const e = load({}, { WEBSOCKET_ON_BACKPRESSURE: 'close', BUS_RING_BYTES: '65536', BUS_MAX_SPILL_BYTES: '1048576', BUS_OWNER_RECONCILE_INTERVAL_MS: '0' });
  t.equal(e.websocket.on_backpressure, 'close');
  t.same(e.bus, { ring_bytes: 65_536, max_spill_bytes: 1_048_576, owner_reconcile_interval_ms: 0 });
  fails(t, 'reconcile interval', withApp({ bus: { owner_reconcile_interval_ms: -1 } }), 'bus.owner_reconcile_interval_ms',
    /^bus\.owner_reconcile_interval_ms must be an integer between 0 and 3600000/);
  fails(t, 'reconcile interval type', withApp({ bus: { owner_reconcile_interval_ms: '10s' } }), 'bus.owner_reconcile_interval_ms', /must be an integer/);
  fails(t, 'on_backpressure', withApp({ websocket: { on_backpressure: 'block' } }), 'websocket.on_backpressure',
    'websocket.on_backpressure must be one of drop, close, got "block"');
  fails(t, 'ring_bytes', withApp({ bus: { ring_bytes: 1024 } }), 'bus.ring_bytes', /^bus\.ring_bytes must be an integer between 4096 and 1073741824 or null, got 1024/);
  fails(t, 'spill floor', withApp({ bus: { max_spill_bytes: 100_000 } }), 'bus.max_spill_bytes',
    /^bus\.max_spill_bytes must be ≥ 2 × event_limits\.max_payload_in_kb KiB \(204800\) so that the largest event can queue, got 100000/);
  t.equal(load({ bus: { max_spill_bytes: 100_000 }, event_limits: { max_payload_in_kb: 40 } }).bus.max_spill_bytes, 100_000, 'the floor follows the payload limit');
});

t.test('user features: enable_user_authentication, enable_watchlist_events, user_authentication_timeout', async (t) => {
  const app = (extra: Record<string, unknown>) => ({ apps: [APP, { id: 'a2', key: 'k2', secret: 's2', ...extra }] });
  fails(t, 'signin switch', withApp(app({ enable_user_authentication: 'yes' })), 'apps[1].enable_user_authentication',
    'apps[1].enable_user_authentication must be a boolean (true or false), got "yes"');
  fails(t, 'watchlist switch', withApp(app({ enable_watchlist_events: 1 })), 'apps[1].enable_watchlist_events', 'must be a boolean');
  fails(t, 'timeout zero', withApp(app({ user_authentication_timeout: 0 })), 'apps[1].user_authentication_timeout',
    'apps[1].user_authentication_timeout must be a positive integer (seconds) or null, got 0');
  fails(t, 'timeout string', withApp(app({ user_authentication_timeout: '30s' })), 'apps[1].user_authentication_timeout', 'must be a positive integer (seconds) or null');
  fails(t, 'typo', withApp(app({ enable_watchlist_event: true })), 'apps[1].enable_watchlist_event', '(did you mean "enable_watchlist_events"?)');
  const [a, b] = load(app({ enable_user_authentication: false, enable_watchlist_events: true, user_authentication_timeout: 30 })).apps;
  t.match(a, { enable_user_authentication: true, enable_watchlist_events: false, user_authentication_timeout: null }, 'defaults');
  t.match(b, { enable_user_authentication: false, enable_watchlist_events: true, user_authentication_timeout: 30 });
  t.equal(load(app({ user_authentication_timeout: null })).apps[1].user_authentication_timeout, null, 'null = no timeout');
});

t.test('history: channel_history, history.*, idempotency.*, HISTORY_DRIVER', async (t) => {
  const app = (extra: Record<string, unknown>) => ({ apps: [{ ...APP, ...extra }] });
  const h = (v: unknown) => withApp(app({ channel_history: v }));
  const ok = load(app({ channel_history: { 'chat-*': { size: 100, ttl: 60, rewind: 10 }, feed: { size: 5, ttl: 30 } } })).apps[0].channel_history;
  t.same(ok, { 'chat-*': { size: 100, ttl: 60, rewind: 10 }, feed: { size: 5, ttl: 30, rewind: 0 } }, 'rewind defaults to 0');
  t.same(load().history, { driver: 'memory', meta_ttl: 86_400, max_recover: 1000, memory_budget_mb: 256, max_questions_per_connection: 4, max_channels_per_shard: 100_000, replay_bytes_per_second: 8_388_608 });
  t.same(load().idempotency, { window_seconds: 120, max_keys: 100_000 });
  fails(t, 'not a map', h(['x']), 'apps[0].channel_history', 'apps[0].channel_history must be a mapping of channel pattern to {size, ttl, rewind}');
  fails(t, 'size 0', h({ 'a-*': { size: 0, ttl: 5 } }), 'apps[0].channel_history.a-*.size', 'must be an integer between 1 and 100000, got 0');
  fails(t, 'ttl missing', h({ 'a-*': { size: 3 } }), 'apps[0].channel_history.a-*.ttl', 'must be a positive integer (seconds), got nothing');
  fails(t, 'rewind > size', h({ 'a-*': { size: 3, ttl: 5, rewind: 4 } }), 'apps[0].channel_history.a-*.rewind', 'apps[0].channel_history.a-*.rewind must be ≤ size (3), got 4');
  fails(t, 'typo', h({ 'a-*': { size: 3, ttl: 5, rewnd: 1 } }), 'apps[0].channel_history.a-*.rewnd', '(did you mean "rewind"?)');
  fails(t, 'pattern', h({ 'a*b': { size: 3, ttl: 5 } }), 'apps[0].channel_history.a*b', 'has an invalid pattern');
  fails(t, 'driver', withApp({ history: { driver: 'disk' } }), 'history.driver', 'history.driver must be one of memory, redis, redis-cluster, got "disk"');
  t.equal(load({ apps: [APP] }, { HISTORY_DRIVER: 'redis' }).history.driver, 'redis', 'HISTORY_DRIVER redis is accepted');
  fails(t, 'redis-cluster without nodes', { env: { HISTORY_DRIVER: 'redis-cluster' }, overrides: { apps: [APP] } }, 'database.redis_cluster.nodes', 'when history.driver is redis-cluster');
  fails(t, 'meta_ttl', withApp({ history: { meta_ttl: 0 } }), 'history.meta_ttl', 'must be a positive integer');
  fails(t, 'max_recover', withApp({ history: { max_recover: 1e9 } }), 'history.max_recover', 'must be an integer between 1 and 100000');
  fails(t, 'window', withApp({ idempotency: { window_seconds: -1 } }), 'idempotency.window_seconds', 'must be an integer between 1 and 86400');
});
