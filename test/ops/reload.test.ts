// Config reload of the apps: RunningServer.reload (what SIGHUP calls) in a running server,
// and SIGHUP itself on the `ringcast` command with a config file rewritten in between.
// Connections of unchanged and changed apps stay open (they receive a publish after the
// reload), those of a removed app close with 4001, of a disabled app with 4003.

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import WebSocket from 'ws';
import { loadConfig, type AppInput } from '../../src/config';
import { freePort } from '../helpers/net';
import { RawClient, WORKERS, eventually, startServer, type TestServer } from '../helpers/server';

const A = { id: 'a', key: 'a-key', secret: 'a-secret' };
const B = { id: 'b', key: 'b-key', secret: 'b-secret' };
const C = { id: 'c', key: 'c-key', secret: 'c-secret' };
const D = { id: 'd', key: 'd-key', secret: 'd-secret' };
const E = { id: 'e', key: 'e-key', secret: 'e-secret' };

function url(srv: TestServer | number, key: string): string {
  const port = typeof srv === 'number' ? srv : srv.port;
  return `ws://127.0.0.1:${port}/app/${key}?protocol=7&client=js&version=8.4.0`;
}

/** n tracked connections to the app with `key`, on as many shards as there are (up to n). */
async function connectMany(srv: TestServer, key: string, n: number): Promise<RawClient[]> {
  const out: RawClient[] = [];
  const shards = () => new Set(out.map((c) => c.socketId.split('.')[0])).size;
  for (let i = 0; i < 40 && (out.length < n || shards() < Math.min(WORKERS, n)); i++) {
    out.push(srv.track(await RawClient.connect(url(srv, key))));
  }
  return out;
}

/** The first frame of a connection to `key`: its error code (or 0 when it was established) and the close code. */
async function firstFrame(port: number, key: string): Promise<{ code: number; close: number | null }> {
  const c = new RawClient(new WebSocket(url(port, key)));
  const f = await c.next(() => true, 5000);
  if (f.event === 'pusher:connection_established') {
    await c.close();
    return { code: 0, close: null };
  }
  return { code: (typeof f.data === 'string' ? JSON.parse(f.data) : f.data).code as number, close: await c.closed(5000) };
}

function config(apps: AppInput[]) {
  return loadConfig({ env: {}, overrides: { host: '127.0.0.1', port: 0, workers: WORKERS, log: { level: 'error' }, shutdown_drain_window: 0, apps } });
}

t.test(`reload: added, removed, disabled and changed apps in every shard (workers ${WORKERS})`, async (t) => {
  const srv = await startServer({ apps: [A, { ...B, max_connections: 100 }, C, D], delta_compression: { enabled: true } });
  t.teardown(() => srv.stop());
  const as = await connectMany(srv, A.key, 4);
  const bs = await connectMany(srv, B.key, 3);
  const cs = await connectMany(srv, C.key, 2);
  const ds = await connectMany(srv, D.key, 2);
  for (const c of [...as, ...bs]) t.equal((await c.subscribe('news')).event, 'pusher_internal:subscription_succeeded');

  const next = config([A, { ...B, secret: 'b-secret-2', max_connections: bs.length }, { ...C, enabled: false }, E]);
  const result = await srv.server.reload(next);
  t.same(result.added, ['e']);
  t.same(result.removed, ['d']);
  t.same(result.changed, ['b', 'c']);
  t.same(result.disabled, ['c']);
  t.same(result.restartKeys, [], 'nothing else differs');
  t.equal(result.closed, cs.length + ds.length, 'connections closed over all shards');

  for (const c of ds) {
    t.equal(await c.closed(5000), 4001, 'removed app: closed with 4001');
    t.equal(c.frames.find((f) => f.event === 'pusher:error')?.data.code, 4001, 'after an error frame with 4001');
  }
  for (const c of cs) {
    t.equal(await c.closed(5000), 4003, 'disabled app: closed with 4003');
    t.equal(c.frames.find((f) => f.event === 'pusher:error')?.data.code, 4003);
  }

  // The unchanged app's connections, on every shard, are still there and get a publish.
  await srv.sdk(A).trigger('news', 'after-reload', { n: 1 });
  for (const c of as) t.same((await c.event('after-reload', 'news', 5000)).data, JSON.stringify({ n: 1 }), 'unchanged app: still connected');

  // The changed app: the old secret is refused, the new one publishes to the same connections.
  const old = await srv.sdk(B).trigger('news', 'x', {}).then(() => 200, (err: { status?: number }) => err.status);
  t.equal(old, 401, 'old secret refused');
  await srv.sdk({ ...B, secret: 'b-secret-2' }).trigger('news', 'with-new-secret', {});
  for (const c of bs) await c.event('with-new-secret', 'news', 5000);
  t.pass('changed app: connections kept, new secret in force');
  // Its new max_connections counts the connections made before the reload (same counter slot).
  t.same(await firstFrame(srv.port, B.key), { code: 4004, close: 4004 }, 'new max_connections applies to the connections already open');

  t.same(await firstFrame(srv.port, E.key), { code: 0, close: null }, 'added app accepts connections');
  t.same(await firstFrame(srv.port, D.key), { code: 4001, close: 4001 }, 'removed app refused at connect');
  t.same(await firstFrame(srv.port, C.key), { code: 4003, close: 4003 }, 'disabled app refused at connect');
  t.same(srv.server.config.apps.map((a) => a.id), ['a', 'b', 'c', 'e'], 'RunningServer.config has the new apps');

  // A second reload re-adds the removed app (it gets its old counter slot back) and re-enables C.
  const again = await srv.server.reload(config([A, B, C, D]));
  t.same(again.added, ['d']);
  t.same(again.removed, ['e']);
  t.same(await firstFrame(srv.port, D.key), { code: 0, close: null }, 're-added app accepts connections');
  t.same(await firstFrame(srv.port, C.key), { code: 0, close: null }, 're-enabled app accepts connections');
  await srv.sdk(A).trigger('news', 'after-second', {});
  for (const c of as) await c.event('after-second', 'news', 5000);
  t.pass('unchanged app still connected after the second reload');
});

t.test('reload: settings other than apps are named, not applied', async (t) => {
  const srv = await startServer({ apps: [A], delta_compression: { enabled: true } });
  t.teardown(() => srv.stop());
  const next = loadConfig({ env: {}, overrides: { host: '127.0.0.1', port: 0, workers: WORKERS, log: { level: 'error' }, shutdown_drain_window: 0, apps: [A], websocket: { activity_timeout: 60 } } });
  const r = await srv.server.reload(next);
  t.same(r.restartKeys, ['websocket']);
  t.equal(srv.server.config.websocket.activity_timeout, srv.config.websocket.activity_timeout, 'not applied');
});

// ── SIGHUP on the command ────────────────────────────────────────────────────

const ROOT = path.resolve(__dirname, '..', '..', '..');
const BIN = path.join(ROOT, 'bin', 'ringcast.js');

function yaml(port: number, apps: typeof A[]): string {
  return [
    'host: 127.0.0.1', `port: ${port}`, `workers: ${WORKERS}`, 'log:', '  level: info', 'apps:',
    ...apps.flatMap((a) => [`  - id: ${a.id}`, `    key: ${a.key}`, `    secret: ${a.secret}`]),
    '',
  ].join('\n');
}

t.test(`SIGHUP reloads the apps from the file; an invalid file keeps the running config (workers ${WORKERS})`, async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-reload-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'config.yaml');
  const port = await freePort();
  writeFileSync(file, yaml(port, [A]));
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME };
  const child = spawn(process.execPath, [BIN, 'start', '--config', file], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (b: Buffer) => { out += b.toString(); });
  child.stderr.on('data', (b: Buffer) => { out += b.toString(); });
  const exited = new Promise<number | string>((r) => child.once('exit', (code, sig) => r(code ?? sig ?? -1)));
  t.teardown(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL'); });
  const count = (msg: string) => out.split('\n').filter((l) => l.includes(`"msg":"${msg}"`)).length;

  await eventually(() => count('ringcast listening') === 1, 20_000, 'the server to listen');
  const a = await RawClient.connect(url(port, A.key));
  t.match(a.socketId, /^\d+\.\d+$/);

  writeFileSync(file, yaml(port, [A]) + '  - id: broken\n    key: [\n');
  child.kill('SIGHUP');
  await eventually(() => count('reload refused: the running configuration is kept') === 1, 10_000, 'the refusal to be logged');
  t.match(out, /"msg":"reload refused[^\n]*"error":"invalid YAML|"error":"invalid YAML[^\n]*reload refused/, 'the log says why');
  await a.sync(5000);
  t.pass('connection kept after the refused reload');
  t.same(await firstFrame(port, E.key), { code: 4001, close: 4001 }, 'nothing was added');

  writeFileSync(file, yaml(port, [A, E]));
  child.kill('SIGHUP');
  await eventually(() => count('configuration reloaded') === 1, 10_000, 'the reload to be logged');
  t.same(await firstFrame(port, E.key), { code: 0, close: null }, 'the added app accepts connections');
  await a.sync(5000);
  t.pass('the unchanged app\'s connection is still open');
  t.notMatch(out, /e-secret|a-secret/, 'no secret in the log');

  child.kill('SIGTERM');
  t.equal(await a.closed(8000), 4200);
  t.equal(await exited, 0);
});
