// test-modes: once (the installed server starts with workers: 2)
// Install as a package: `npm pack` of this checkout (built: dist/ is what it ships), then
// `npm install -g ./ringcast-<version>.tgz` into a temporary prefix, then the installed
// `ringcast start --config FILE` serves a client and `ringcast check-config` works. npm
// fetches the dependencies as on any host (from its cache when it has them).

import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import Pusher from 'pusher';
import t from 'tap';
import { freePort } from '../helpers/net';
import { RawClient, sleep } from '../helpers/server';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const VERSION = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

/**
 * npm's own environment, without what tap or npm (running tap) put there, nor `make
 * test`'s NODE_V8_COVERAGE: npm's processes and the installed copy (outside dist/) would
 * write coverage of code that is not src/, gigabytes for the report to load.
 */
function npmEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(npm_|TAP|NODE_OPTIONS$|NODE_V8_COVERAGE$|RINGCAST_)/i.test(k)) continue;
    env[k] = v;
  }
  return env;
}

function up(port: number): Promise<number | null> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/up', agent: false, timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? null);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(null));
  });
}

t.test('npm pack → npm install -g in a temporary prefix → ringcast start --config FILE', { timeout: 300_000 }, async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-pkg-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const env = npmEnv();
  // The build is the test's precondition (the test itself runs from dist/): no prepack build.
  execFileSync('npm', ['pack', '--ignore-scripts', '--pack-destination', dir], { cwd: ROOT, env, stdio: 'pipe' });
  const tgz = path.join(dir, `ringcast-${VERSION}.tgz`);
  t.ok(existsSync(tgz), `npm pack wrote ringcast-${VERSION}.tgz`);
  const listing = execFileSync('tar', ['tzf', tgz], { encoding: 'utf8' }).split('\n');
  for (const f of ['package/bin/ringcast.js', 'package/dist/src/cli.js', 'package/dist/src/shard/worker.js', 'package/config.yaml', 'package/ops/ringcast.service', 'package/docs/operations.md']) {
    t.ok(listing.includes(f), `the package has ${f.slice('package/'.length)}`);
  }
  t.notOk(listing.some((f) => f.startsWith('package/dist/test/') || f.startsWith('package/test/')), 'no tests in the package');

  const prefix = path.join(dir, 'prefix');
  execFileSync('npm', ['install', '-g', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', tgz], { cwd: dir, env, stdio: 'pipe', timeout: 240_000 });
  const bin = path.join(prefix, 'bin', 'ringcast');
  t.ok(existsSync(bin), 'ringcast is on the prefix\'s bin/');
  t.equal(execFileSync(bin, ['--version'], { env, encoding: 'utf8' }).trim(), VERSION);
  // The browser/Node client modules resolve by the names docs/ use.
  const pkgDir = path.join(prefix, 'lib', 'node_modules', 'ringcast');
  const resolved = execFileSync(process.execPath, ['--input-type=module', '-e',
    "for (const m of ['ringcast/client', 'ringcast/client/delta.js', 'ringcast/client/recovery.js']) console.log(import.meta.resolve(m))"],
  { cwd: path.join(pkgDir, '..'), env: { ...env, NODE_PATH: '' }, encoding: 'utf8' }).trim().split('\n');
  t.same(resolved.map((u) => path.relative(pkgDir, new URL(u).pathname)), ['client/index.js', 'client/delta.js', 'client/recovery.js'], 'ringcast/client and ringcast/client/*.js resolve');

  const port = await freePort();
  const app = { id: 'pkg-app', key: 'pkg-key', secret: 'pkg-secret' };
  const config = path.join(dir, 'ringcast.yaml');
  writeFileSync(config, `host: 127.0.0.1\nport: ${port}\nworkers: 2\nshutdown_grace_period: 3000\nlog: {level: info}\napps: [{id: ${app.id}, key: ${app.key}, secret: ${app.secret}}]\n`);

  const check = execFileSync(bin, ['check-config', '--config', config], { env, encoding: 'utf8' });
  t.match(check, new RegExp(`port: ${port}`), 'check-config from the installed package');
  t.notMatch(check, /pkg-secret/);

  // Run from another directory: nothing may depend on the checkout.
  const child = spawn(bin, ['start', '--config', config], { cwd: os.tmpdir(), env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (b: Buffer) => { out += b.toString(); });
  child.stderr.on('data', (b: Buffer) => { out += b.toString(); });
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code))); // after stdout is read
  t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL'); });
  const until = Date.now() + 30_000;
  while (await up(port) !== 200) {
    if (child.exitCode !== null || Date.now() > until) throw new Error(`the installed ringcast did not come up: ${out}`);
    await sleep(100);
  }
  const c = await RawClient.connect(`ws://127.0.0.1:${port}/app/${app.key}?protocol=7`);
  t.equal((await c.subscribe('pkg-chan')).event, 'pusher_internal:subscription_succeeded');
  const sdk = new Pusher({ appId: app.id, key: app.key, secret: app.secret, host: '127.0.0.1', port: String(port) });
  t.equal((await sdk.trigger('pkg-chan', 'installed', { ok: true })).status, 200);
  t.same(JSON.parse((await c.next((f) => f.event === 'installed')).data), { ok: true }, 'the client got the event');
  child.kill('SIGTERM');
  t.equal(await exited, 0, 'SIGTERM: exit 0');
  t.match(out, /ringcast listening/);
  t.match(out, /pkg-app/, 'the startup line names the app');
  t.notMatch(out, /pkg-secret/, 'never its secret');
});
