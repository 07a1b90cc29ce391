// `ringcast check-config [--config FILE]` as a child process: the effective configuration
// (defaults ← file ← environment) as YAML with secrets masked and exit 0, or every
// validation error and exit 78.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { parse } from 'yaml';
import { maskSecrets } from '../../src/check-config';
import { loadConfig } from '../../src/config';
import { APP_ENV_VARS, ENV_VARS } from '../../src/config/env';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const BIN = path.join(ROOT, 'bin', 'ringcast.js');

function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env };
  for (const k of [...Object.keys(ENV_VARS), ...Object.keys(APP_ENV_VARS), 'NODE_OPTIONS']) delete e[k];
  for (const k of Object.keys(e)) if (k.startsWith('TAP') || k.startsWith('RINGCAST_')) delete e[k];
  return { ...e, ...extra };
}

function dir(t: Test): string {
  const d = mkdtempSync(path.join(os.tmpdir(), 'ringcast-check-'));
  t.teardown(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

function run(args: string[], extraEnv: Record<string, string> = {}, cwd = ROOT) {
  const r = spawnSync(process.execPath, [BIN, 'check-config', ...args], { cwd, env: env(extraEnv), encoding: 'utf8', timeout: 30_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const GOOD = `port: 7001
workers: 2
database:
  redis:
    password: redis-pass-123
adapter:
  nats:
    servers: ["nats://natsuser:nats-pass-456@10.0.0.5:4222"]
unix_socket: {permission_mode: 0o640}
apps:
  - id: shop
    key: shop-key
    secret: shop-secret-789
`;

t.test('a valid file: effective configuration, secrets masked, exit 0', async (t) => {
  const d = dir(t);
  const file = path.join(d, 'ringcast.yaml');
  writeFileSync(file, GOOD);
  const r = run(['--config', file], { PORT: '7002', SERVICE_DEFAULT_APP_ID: 'env-app', SERVICE_DEFAULT_APP_KEY: 'env-key', SERVICE_DEFAULT_APP_SECRET: 'env-secret-000' });
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stderr, '');
  for (const secret of ['redis-pass-123', 'nats-pass-456', 'shop-secret-789', 'env-secret-000']) t.notMatch(r.stdout, secret, `${secret} not printed`);
  const shown = parse(r.stdout) as Record<string, any>;
  t.equal(shown.port, 7002, 'the environment wins over the file');
  t.equal(shown.workers, 2, 'the file wins over the defaults');
  t.equal(shown.websocket.activity_timeout, 120, 'defaults are shown');
  t.equal(shown.database.redis.password, '********');
  t.same(shown.adapter.nats.servers, ['nats://********@10.0.0.5:4222'], 'credentials in a URL');
  t.equal(shown.unix_socket.permission_mode, '0o640', 'the mode as chmod writes it');
  t.same(shown.apps.map((a: { id: string; secret: string }) => [a.id, a.secret]), [['shop', '********'], ['env-app', '********']]);
  t.equal(shown.database.redis.username, null, 'unset stays null, not masked');

  // What it prints is a configuration ringcast loads (secrets aside): the same effective values.
  const again = path.join(d, 'again.yaml');
  writeFileSync(again, r.stdout);
  const reloaded = loadConfig({ file: again, env: {} });
  const original = loadConfig({ file, env: { PORT: '7002', SERVICE_DEFAULT_APP_ID: 'env-app', SERVICE_DEFAULT_APP_KEY: 'env-key', SERVICE_DEFAULT_APP_SECRET: 'env-secret-000' } });
  t.same(maskSecrets(reloaded), maskSecrets(original), 'round trip');
});

t.test('without --config: ./config.yaml of the working directory', async (t) => {
  const d = dir(t);
  writeFileSync(path.join(d, 'config.yaml'), 'port: 7123\napps: [{id: a, key: b, secret: c}]\n');
  const r = run([], {}, d);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /defaults ← config\.yaml ← environment/);
  t.equal((parse(r.stdout) as { port: number }).port, 7123);
});

t.test('an invalid file: every error, exit 78, nothing on stdout', async (t) => {
  const d = dir(t);
  const file = path.join(d, 'bad.yaml');
  writeFileSync(file, 'port: -1\nworkers: many\nlog: {colors_enabled: true}\napps: [{id: a, key: b, secret: c}]\n');
  const r = run(['--config', file]);
  t.equal(r.code, 78);
  t.equal(r.stdout, '');
  t.match(r.stderr, /invalid configuration \(3 errors\)/);
  for (const key of [/- port must be/, /- workers must be/, /- log\.colors_enabled applies to log\.output_format human only/]) t.match(r.stderr, key);
  const typo = path.join(d, 'typo.yaml');
  writeFileSync(typo, 'bogus: 1\n');
  const r1 = run(['--config', typo]);
  t.equal(r1.code, 78, 'an unknown key');
  t.match(r1.stderr, /bogus is not a known setting/);

  const refused = path.join(d, 'refused.yaml');
  writeFileSync(refused, 'database: {pooling: {enabled: true}}\napps: [{id: a, key: b, secret: c}]\n');
  const r2 = run(['--config', refused]);
  t.equal(r2.code, 78, 'an option this build refuses at start is an error here too');
  t.match(r2.stderr, /database\.pooling\.enabled/);

  const missing = run(['--config', path.join(d, 'nope.yaml')]);
  t.equal(missing.code, 78);
  t.match(missing.stderr, /cannot read config file .*nope\.yaml/);
  const env78 = run(['--config', file.replace('bad', 'none')], { PORT: 'abc' });
  t.equal(env78.code, 78);
});

t.test('maskSecrets', async (t) => {
  t.same(maskSecrets({ a: { secret: 's', password: '', token: null, headers: { Authorization: 'Bearer x', Empty: '' } }, url: 'redis://:pw@h:6379/0', plain: 'x@y' }),
    { a: { secret: '********', password: '', token: null, headers: { Authorization: '********', Empty: '' } }, url: 'redis://********@h:6379/0', plain: 'x@y' });
});
