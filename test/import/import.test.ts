// test-modes: once (the conversion does not depend on the shard count; the imported app's pusher-js client is an end-to-end check of the file)
// `ringcast import soketi|sockudo`: realistic configs of both servers, written from their
// documented options (soketi's JSON with nested and dotted keys, its SOKETI_* env file;
// sockudo's config.toml and config.json), become ringcast YAML that loads, with every
// setting that did not carry over listed; a pusher-js client then connects with the
// imported app and receives an event the `pusher` SDK publishes with the imported secret.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import { loadConfig, type ConfigInput } from '../../src/config';
import { importText } from '../../src/import';
import { collect, connected, pusherJs, subscribed } from '../helpers/pusher-js';
import { startServer } from '../helpers/server';

const BIN = path.resolve(__dirname, '../../../bin/ringcast.js');
const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-import-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const SOKETI_JSON = JSON.stringify({
  debug: true,
  port: 6001,
  pathPrefix: '/ws',
  shutdownGracePeriod: 5000,
  userAuthenticationTimeout: 30000,
  'adapter.driver': 'cluster',
  database: { redis: { host: '10.0.0.5', port: 6380, password: 'pw', keyPrefix: 'sk_' } },
  'rateLimiter.driver': 'local',
  queue: { driver: 'sync' },
  metrics: { enabled: true, port: 9601, prometheus: { prefix: 'soketi_' } },
  'eventLimits.maxPayloadInKb': 50,
  'presence.maxMembersPerChannel': 50,
  httpApi: { requestLimitInMb: 10, acceptTraffic: { memoryThreshold: 90 } },
  'appManager.array.apps': [{
    id: 'soketi-app', key: 'soketi-key', secret: 'soketi-secret', maxConnections: -1, enableClientMessages: true,
    maxBackendEventsPerSecond: 100, maxClientEventsPerSecond: 10, maxReadRequestsPerSecond: 50,
    maxPresenceMembersPerChannel: 20, enabled: true,
    webhooks: [{ url: 'https://example.com/hook', event_types: ['channel_occupied', 'member_added'], filter: { channel_name_starts_with: 'private-' } }],
  }, { id: 'no-secret', key: 'k2' }],
}, null, 2);

const SOKETI_ENV = `# soketi in docker-compose
SOKETI_DEBUG=1
SOKETI_DEFAULT_APP_ID=env-app
SOKETI_DEFAULT_APP_KEY=env-key
SOKETI_DEFAULT_APP_SECRET="env-secret"
SOKETI_DEFAULT_APP_MAX_CONNS=200
SOKETI_DEFAULT_APP_WEBHOOKS='[{"url":"https://example.com/w","event_types":["channel_vacated"]}]'
export SOKETI_ADAPTER_DRIVER=redis
SOKETI_DB_REDIS_HOST=redis.internal
SOKETI_RATE_LIMITER_DRIVER=redis
SOKETI_APP_MANAGER_DRIVER=mysql
SOKETI_SSL_CERT=/etc/ssl/soketi.crt
SOKETI_SSL_KEY=/etc/ssl/soketi.key
SOKETI_METRICS_SERVER_PORT=9700
UNRELATED_VAR=x
`;

const SOCKUDO_TOML = `debug = false
host = "0.0.0.0"
port = 6001
mode = "production"
shutdown_grace_period = 2
websocket_max_payload_kb = 64
user_authentication_timeout = 3600
activity_timeout = 120

[adapter]
driver = "nats"
enable_socket_counting = true

[adapter.nats]
servers = ["nats://127.0.0.1:4222"]
prefix = "sockudo_adapter"
request_timeout_ms = 5000

[app_manager]
driver = "memory"

[[app_manager.array.apps]]
id = "sockudo-app"
key = "sockudo-key"
secret = "sockudo-secret"
enabled = true
max_read_requests_per_second = 100

[app_manager.array.apps.policy.limits]
max_connections = 100000
max_client_events_per_second = 1000

[app_manager.array.apps.policy.features]
enable_client_messages = true

[app_manager.array.apps.policy.idempotency]
enabled = true

[app_manager.cache]
enabled = false

[cache.memory]
ttl = 300

[queue]
driver = "memory"

[rate_limiter]
enabled = false
driver = "memory"

[metrics]
enabled = true
port = 9601

[metrics.prometheus]
prefix = "sockudo_"

[cors]
credentials = true
origin = ["*"]

[http_api]
request_limit_in_mb = 10

[webhooks]
request_timeout_ms = 10000

[logging]
colors_enabled = false

[delta_compression]
enabled = true
algorithm = "Fossil"

[push]
storage_driver = "memory"

[websocket]
max_messages = 1000
ping_interval = 30
idle_timeout = 120
`;

/** The imported YAML loaded as `ringcast start --config` loads it. */
function load(yaml: string) {
  const file = path.join(dir, `out-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, yaml);
  return loadConfig({ file, env: {} });
}

t.test('soketi config.json: nested and dotted keys, apps, limits, webhooks', async (t) => {
  const { yaml, notes } = importText('soketi', 'config.json', SOKETI_JSON);
  const c = load(yaml);
  t.equal(c.log.level, 'debug');
  t.equal(c.shutdown_grace_period, 5000);
  t.equal(c.database.redis.host, '10.0.0.5');
  t.equal(c.database.redis.key_prefix, 'sk_');
  t.equal(c.metrics.prefix, 'soketi_');
  t.equal(c.event_limits.max_payload_in_kb, 50);
  t.equal(c.presence.max_members_per_channel, 50);
  t.equal(c.http.request_limit_in_mb, 10);
  t.equal(c.adapter.driver, 'local', 'the cluster adapter has no equivalent');
  t.equal(c.apps.length, 1, 'the app without a secret is left out');
  const app = c.apps[0];
  t.match(app, { id: 'soketi-app', key: 'soketi-key', secret: 'soketi-secret', max_connections: null, enable_client_messages: true,
    max_backend_events_per_second: 100, max_client_events_per_second: 10, max_presence_members_per_channel: 20, user_authentication_timeout: 30 });
  t.same(app.webhooks.map((w) => [w.url, w.event_types]), [['https://example.com/hook', ['channel_occupied', 'member_added']]]);
  const said = notes.join('\n');
  for (const k of ['pathPrefix', 'httpApi.acceptTraffic.memoryThreshold', 'adapter.driver: cluster', 'maxReadRequestsPerSecond', 'webhooks.0.filter', 'apps.1: left out']) {
    t.match(said, k, `names ${k}`);
  }
});

t.test('soketi env file: SOKETI_ variables, JSON values, database app manager, TLS files', async (t) => {
  const { yaml, notes } = importText('soketi', '.env', SOKETI_ENV);
  const tree = parse(yaml) as ConfigInput;
  t.match(tree, { adapter: { driver: 'redis' }, rate_limiter: { driver: 'redis' }, database: { redis: { host: 'redis.internal' } },
    metrics: { port: 9700 }, ssl: { enabled: true, cert_path: '/etc/ssl/soketi.crt', key_path: '/etc/ssl/soketi.key' } });
  t.match(tree.apps, [{ id: 'env-app', key: 'env-key', secret: 'env-secret', max_connections: 200, webhooks: [{ url: 'https://example.com/w', event_types: ['channel_vacated'] }] }]);
  const said = notes.join('\n');
  t.match(said, 'UNRELATED_VAR: not a soketi variable');
  t.match(said, /appManager\.driver: mysql/);
  t.match(said, /ssl\.cert_path: kept, but the file must exist/);
  // With the files in place, it loads.
  const pem = path.join(dir, 'x.pem');
  writeFileSync(pem, '-----BEGIN CERTIFICATE-----\n');
  const c = loadConfig({ env: {}, overrides: { ...tree, ssl: { enabled: true, cert_path: pem, key_path: pem } } });
  t.equal(c.apps[0].key, 'env-key');
});

t.test('sockudo config.toml: the same keys carry over, policy parts flatten, the rest is named', async (t) => {
  const { yaml, notes } = importText('sockudo', 'config.toml', SOCKUDO_TOML);
  const c = load(yaml);
  t.equal(c.adapter.driver, 'nats');
  t.same(c.adapter.nats.servers, ['nats://127.0.0.1:4222']);
  t.equal(c.shutdown_grace_period, 2000, 'seconds become milliseconds');
  t.equal(c.websocket.max_payload_kb, 64);
  t.equal(c.websocket.ping_interval, 30);
  t.equal(c.webhooks.timeout_ms, 10000);
  t.equal(c.metrics.prefix, 'sockudo_');
  t.equal(c.queue.driver, 'sync');
  t.equal(c.delta_compression.algorithm, 'Fossil');
  t.match(c.apps, [{ id: 'sockudo-app', key: 'sockudo-key', max_connections: 100000, max_client_events_per_second: 1000,
    enable_client_messages: true, user_authentication_timeout: 3600 }]);
  const said = notes.join('\n');
  for (const k of ['push: section', 'cache.memory: section', 'websocket.idle_timeout', 'adapter.enable_socket_counting', 'mode:',
    'policy.idempotency', 'max_read_requests_per_second', 'cors.origin: left out, ringcast refuses it']) {
    t.match(said, k, `names ${k}`);
  }
  // The same settings as JSON read the same.
  const json = importText('sockudo', 'config.json', JSON.stringify({ port: 6002, app_manager: { array: { apps: [{ id: 'a', key: 'b', secret: 'c', max_connections: 5 }] } } }));
  t.match(load(json.yaml).apps, [{ id: 'a', key: 'b', secret: 'c', max_connections: 5 }]);
});

t.test('refused values: a bad webhook goes alone, a duplicate app goes whole', async (t) => {
  const { yaml, notes } = importText('soketi', 'config.json', JSON.stringify({ appManager: { array: { apps: [
    { id: 1, key: 'k', secret: 's', webhooks: [{ url: 'ftp://x', event_types: ['channel_occupied'] }, { url: 'https://ok.example', event_types: ['nope'] },
      { url: 'https://ok.example/w', event_types: ['channel_vacated'] }] },
    { id: 2, key: 'k', secret: 't' },
  ] } } }));
  const c = load(yaml);
  t.equal(c.apps.length, 1);
  t.same(c.apps[0].webhooks.map((w) => w.url), ['https://ok.example/w']);
  const said = notes.join('\n');
  t.match(said, /apps\.0\.webhooks\.0: left out, ringcast refuses it: .*ftp:\/\/x/);
  t.match(said, /apps\.0\.webhooks\.1: left out, ringcast refuses it: .*"nope"/);
  t.match(said, /apps\.1: left out, ringcast refuses it: .*must be unique/);
});

t.test('bad input: a clear error naming the file', async (t) => {
  t.throws(() => importText('sockudo', 'config.toml', 'port = = 1'), /cannot read sockudo's configuration in config\.toml/);
  t.throws(() => importText('soketi', 'config.json', '{"port": '), /cannot read soketi's configuration in config\.json/);
  t.throws(() => importText('soketi', 'config.json', '[1]'), /must hold a JSON object/);
  t.throws(() => importText('soketi', '.env', 'not a line'), /not a KEY=VALUE line/);
  const none = importText('soketi', 'config.json', '{"port": 6005}');
  t.match(none.notes.join('\n'), /apps: none carried over/);
});

t.test('the CLI: output file, notes on stderr, exit statuses', async (t) => {
  const input = path.join(dir, 'config.toml');
  const output = path.join(dir, 'ringcast.yaml');
  writeFileSync(input, SOCKUDO_TOML);
  const run = (...args: string[]) => spawnSync(process.execPath, [BIN, 'import', ...args], { encoding: 'utf8', env: { PATH: process.env.PATH } });
  const ok = run('sockudo', input, '--output', output);
  t.equal(ok.status, 0, ok.status === 0 ? 'exit 0' : ok.stderr);
  t.match(ok.stderr, /ringcast import: push: section has no equivalent/);
  t.match(readFileSync(output, 'utf8'), /key: sockudo-key/);
  const check = spawnSync(process.execPath, [BIN, 'check-config', '--config', output], { encoding: 'utf8', env: { PATH: process.env.PATH } });
  t.equal(check.status, 0, check.status === 0 ? 'check-config accepts it' : check.stderr);
  t.equal(run('soketi', input).status, 1, 'TOML is not a soketi config');
  t.equal(run('peer', input).status, 2);
  t.equal(run('sockudo').status, 2);
  t.equal(run('sockudo', input, '--output').status, 2);
  t.equal(run('sockudo', input, '--bogus').status, 2);
  t.equal(run('sockudo', input, input).status, 2);
  t.equal(run('sockudo', path.join(dir, 'missing.toml')).status, 1);
});

t.test('pusher-js connects with each imported app and receives what the SDK publishes', async (t) => {
  for (const [peer, file, text] of [['soketi', 'config.json', SOKETI_JSON], ['sockudo', 'config.toml', SOCKUDO_TOML]] as const) {
    const tree = parse(importText(peer, file, text).yaml) as ConfigInput;
    // The test's own listener and a single node: the imported file's port and adapter are for production.
    const srv = await startServer({ ...tree, port: 0, host: '127.0.0.1', adapter: { driver: 'local' }, metrics: { enabled: false }, log: { level: 'error' } });
    const app = srv.config.apps[0];
    const client = srv.track(pusherJs(srv.port, { app }));
    await connected(client);
    const ch = await subscribed(client, 'imported');
    const got = collect<{ n: number }>(ch, 'hello');
    await srv.sdk(app).trigger('imported', 'hello', { n: 1 });
    await got.until(1, 'the event');
    t.same(got.got, [{ n: 1 }], `${peer}: ${app.key} receives`);
    await srv.stop();
  }
});
