// POST /drain on the metrics listener: an operator's stop of one node, as on SIGTERM (the
// paced drain, then the stop). Only with metrics.token, and with it as the bearer token:
// 405 for another method, 403 without a token configured, 401 without or with a wrong one;
// 202, then /up answers 503, the connected client gets 4200, the server stops. And
// `ringcast drain --config FILE` makes `ringcast start` of the same file exit 0; without a
// token or without metrics it exits 78 naming the key.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { freePort } from '../helpers/net';
import { APP, RawClient, WORKERS, eventually, startServer } from '../helpers/server';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const TOKEN = 'drain-token-1234';

function request(port: number, method: string, p: string, auth?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: p, method, agent: false, headers: auth ? { authorization: auth } : {} }, (res) => {
      let body = '';
      res.on('data', (b: Buffer) => { body += b.toString(); });
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

t.test(`POST /drain with metrics.token (${WORKERS} workers)`, async (t) => {
  const srv = await startServer({ metrics: { enabled: true, host: '127.0.0.1', port: 0, token: TOKEN }, shutdown_drain_window: 200 });
  t.teardown(() => srv.stop());
  const mp = srv.server.metricsPort!;
  const client = await RawClient.connect(srv.wsUrl());
  let r = await request(mp, 'GET', '/drain', `Bearer ${TOKEN}`);
  t.equal(r.status, 405, 'GET: 405');
  r = await request(mp, 'POST', '/drain');
  t.equal(r.status, 401, 'no Authorization: 401');
  t.match(r.body, /\/drain needs `Authorization: Bearer <metrics.token>`/);
  r = await request(mp, 'POST', '/drain', 'Bearer wrong');
  t.equal(r.status, 401, 'a wrong token: 401');
  t.equal(client.closeCode, null, 'still connected after the refusals');
  r = await request(mp, 'POST', '/drain', `Bearer ${TOKEN}`);
  t.equal(r.status, 202, r.body);
  t.same(JSON.parse(r.body), { status: 'draining' });
  t.equal(await client.closed(10_000), 4200, 'the client is asked to reconnect');
  await srv.server.stopped;
  t.pass('the server stopped');
});

t.test('POST /drain without metrics.token: 403', async (t) => {
  const srv = await startServer({ metrics: { enabled: true, host: '127.0.0.1', port: 0 } });
  t.teardown(() => srv.stop());
  const r = await request(srv.server.metricsPort!, 'POST', '/drain', `Bearer ${TOKEN}`);
  t.equal(r.status, 403);
  t.match(r.body, /needs metrics.token/);
  t.equal((await request(srv.port, 'GET', '/up')).status, 200, 'the node goes on');
});

const cli = (args: string[], env: NodeJS.ProcessEnv) => spawnSync(process.execPath, [path.join(ROOT, 'bin', 'ringcast.js'), ...args], { cwd: ROOT, env, encoding: 'utf8', timeout: 20_000 });

t.test('`ringcast drain` refuses a configuration it cannot use', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-drain-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'config.yaml');
  const env = { PATH: process.env.PATH };
  writeFileSync(file, 'metrics:\n  enabled: false\napps:\n  - id: a\n    key: k\n    secret: s\n');
  let r = cli(['drain', '--config', file], env);
  t.equal(r.status, 78);
  t.match(r.stderr, /metrics.enabled is false/);
  writeFileSync(file, 'metrics:\n  enabled: true\napps:\n  - id: a\n    key: k\n    secret: s\n');
  r = cli(['drain', '--config', file], env);
  t.equal(r.status, 78);
  t.match(r.stderr, /metrics.token is empty/);
  writeFileSync(file, `metrics:\n  enabled: true\n  port: ${await freePort()}\n  token: ${TOKEN}\napps:\n  - id: a\n    key: k\n    secret: s\n`);
  r = cli(['drain', '--config', file], env);
  t.equal(r.status, 1, 'nothing listens there');
  t.match(r.stderr, /could not reach the metrics listener/);
});

t.test('`ringcast drain` stops `ringcast start` of the same file', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-drain-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const [port, mport] = [await freePort(), await freePort()];
  const file = path.join(dir, 'config.yaml');
  writeFileSync(file, [
    'host: 127.0.0.1', `port: ${port}`, `workers: ${WORKERS}`, 'shutdown_drain_window: 200',
    'metrics:', '  enabled: true', '  host: 127.0.0.1', `  port: ${mport}`, `  token: ${TOKEN}`,
    'log:', '  level: warn', 'apps:', `  - id: ${APP.id}`, `    key: ${APP.key}`, `    secret: ${APP.secret}`, '',
  ].join('\n'));
  const env: NodeJS.ProcessEnv = {};
  for (const k of ['PATH', 'HOME', 'TMPDIR', 'LANG']) if (process.env[k] !== undefined) env[k] = process.env[k];
  const proc = spawn(process.execPath, [path.join(ROOT, 'bin', 'ringcast.js'), 'start', '--config', file], { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr!.on('data', (b: Buffer) => { stderr += b.toString(); });
  const exited = new Promise<number | string>((resolve) => proc.once('exit', (code, sig) => resolve(code ?? sig ?? -1)));
  t.teardown(() => { if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL'); });
  await eventually(async () => {
    if (proc.exitCode !== null) throw new Error(`ringcast exited: ${stderr}`);
    return (await request(mport, 'GET', '/metrics', `Bearer ${TOKEN}`).catch(() => ({ status: 0 }))).status === 200;
  }, 20_000, 'the metrics listener');
  const r = cli(['drain', '--config', file], env);
  t.equal(r.status, 0, r.stderr);
  t.match(r.stdout, /is draining, then stops/);
  t.equal(await exited, 0, `exit code 0${stderr ? `; stderr: ${stderr.slice(0, 300)}` : ''}`);
});
