// test-modes: once (the child servers set their own shard counts)
// The `ringcast` command (bin/ringcast.js → dist/src/cli.js) run as a child process:
// help, version, bad commands and configs, start → /up → SIGTERM / SIGINT drain, env
// overrides. Needs `tsc` first (the bin loads dist/).

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import WebSocket from 'ws';
import { APP_ENV_VARS, ENV_VARS } from '../../src/config/env';
import { freePort } from '../helpers/net';
import { RawClient, sleep } from '../helpers/server';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const BIN = path.join(ROOT, 'bin', 'ringcast.js');
const VERSION = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const FILE_APP = { id: 'cli-app', key: 'cli-key', secret: 'cli-secret' } as const;

/** The test's environment without anything that would configure ringcast or load tap's hooks. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of [...Object.keys(ENV_VARS), ...Object.keys(APP_ENV_VARS), 'NODE_OPTIONS']) delete env[k];
  for (const k of Object.keys(env)) if (k.startsWith('TAP') || k.startsWith('RINGCAST_')) delete env[k];
  return { ...env, ...extra };
}

interface Running {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (or the signal name) once the process has ended. */
  exited: Promise<number | string>;
}

function launch(t: Test, args: string[], env: Record<string, string> = {}, cwd = ROOT): Running {
  const child = spawn(process.execPath, [BIN, ...args], { cwd, env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (b: Buffer) => { out += b.toString(); });
  child.stderr!.on('data', (b: Buffer) => { err += b.toString(); });
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => resolve(code ?? signal ?? -1));
  });
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  });
  return { child, stdout: () => out, stderr: () => err, exited };
}

/** Runs to completion (bounded). */
async function run(t: Test, args: string[], env: Record<string, string> = {}, timeoutMs = 15_000) {
  const r = launch(t, args, env);
  const code = await within(r.exited, timeoutMs, `ringcast ${args.join(' ')} to exit`);
  return { code, stdout: r.stdout(), stderr: r.stderr() };
}

async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms); });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function getUp(port: number): Promise<{ status: number; body: any } | null> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/up', agent: false, timeout: 1000 }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => { body += c.toString(); });
      res.on('end', () => {
        try {
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(body) });
        } catch {
          resolve({ status: res.statusCode ?? 0, body });
        }
      });
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(null));
  });
}

/** Polls GET /up until it answers 200 (fails fast if the process exits first). */
async function waitUp(r: Running, port: number, timeoutMs = 20_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  let exited = false;
  void r.exited.then(() => { exited = true; });
  while (Date.now() < until) {
    if (exited) throw new Error(`ringcast exited before listening: ${r.stderr()}${r.stdout()}`);
    const res = await getUp(port);
    if (res?.status === 200 && res.body?.status === 'ok') return;
    await sleep(50);
  }
  throw new Error(`GET /up on :${port} did not answer within ${timeoutMs} ms; stderr: ${r.stderr()}`);
}

function tmpDir(t: Test): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-cli-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function writeConfig(t: Test, yaml: string): string {
  const file = path.join(tmpDir(t), 'config.yaml');
  writeFileSync(file, yaml);
  return file;
}

function goodConfig(port: number): string {
  return [
    'host: 127.0.0.1',
    `port: ${port}`,
    'workers: 2',
    'shutdown_grace_period: 4000',
    'log:',
    '  level: warn',
    'apps:',
    `  - id: ${FILE_APP.id}`,
    `    key: ${FILE_APP.key}`,
    `    secret: ${FILE_APP.secret}`,
    '',
  ].join('\n');
}

t.test('--help prints the usage and exits 0', async (t) => {
  const r = await run(t, ['--help']);
  t.equal(r.code, 0);
  t.match(r.stdout, /Usage:/);
  t.match(r.stdout, /ringcast start \[--config FILE\]/);
  t.match(r.stdout, /--version/);
  t.equal(r.stderr, '');
  const short = await run(t, ['-h']);
  t.equal(short.code, 0);
  t.equal(short.stdout, r.stdout, '-h is the same');
});

t.test('--version prints the package.json version', async (t) => {
  const r = await run(t, ['--version']);
  t.equal(r.code, 0);
  t.equal(r.stdout.trim(), VERSION);
});

t.test('an unknown command exits non-zero with a message', async (t) => {
  const r = await run(t, ['frobnicate']);
  t.not(r.code, 0);
  t.match(r.stderr, /unknown command "frobnicate"/);
  t.match(r.stderr, /Usage:/, 'and the usage');
  const none = await run(t, []);
  t.not(none.code, 0, 'no command at all');
  t.match(none.stderr, /missing command/);
  const opt = await run(t, ['start', '--frob']);
  t.not(opt.code, 0, 'unknown option');
  t.match(opt.stderr, /unknown option "--frob"/);
});

t.test('start with a bad config exits non-zero before listening and names the key', async (t) => {
  const port = await freePort();
  const cases: [string, string, RegExp][] = [
    ['negative port', goodConfig(port).replace(`port: ${port}`, 'port: -1'), /\bport\b/],
    ['unknown key', goodConfig(port) + 'bogus_setting: 1\n', /bogus_setting/],
    ['unknown nested key', goodConfig(port) + 'websocket:\n  max_payload_kbb: 64\n', /websocket\.max_payload_kbb/],
    ['wrong type', goodConfig(port).replace('workers: 2', 'workers: many'), /\bworkers\b/],
  ];
  for (const [what, yaml, key] of cases) {
    const file = writeConfig(t, yaml);
    const r = await run(t, ['start', '--config', file]);
    t.not(r.code, 0, `${what}: non-zero exit`);
    t.match(r.stderr, /invalid configuration/, `${what}: says the configuration is invalid`);
    t.match(r.stderr, key, `${what}: names the key`);
    t.notMatch(r.stdout + r.stderr, /listening/, `${what}: never listened`);
    t.notMatch(r.stderr, /\n\s+at /, `${what}: no stack trace`);
  }
  t.equal(await getUp(port), null, 'nothing answers on the configured port');
  const missing = await run(t, ['start', '--config', path.join(tmpDir(t), 'nope.yaml')]);
  t.not(missing.code, 0, 'a missing config file');
  t.match(missing.stderr, /nope\.yaml/);
});

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  t.test(`start, serve, then ${signal}: clients get 4200 and the process exits 0`, async (t) => {
    const port = await freePort();
    const file = writeConfig(t, goodConfig(port));
    const r = launch(t, ['start', '--config', file]);
    await waitUp(r, port);
    const up = await getUp(port);
    t.equal(up?.status, 200);
    t.type(up?.body.timestamp, 'number', '/up answers {status, timestamp}');

    const clients = await Promise.all(Array.from({ length: 4 }, () =>
      RawClient.connect(`ws://127.0.0.1:${port}/app/${FILE_APP.key}?protocol=7`)));
    for (const c of clients) t.match(c.socketId, /^\d+\.\d+$/, 'connected');
    t.equal((await clients[0].subscribe('cli-chan')).event, 'pusher_internal:subscription_succeeded');

    const sentAt = Date.now();
    r.child.kill(signal);
    for (const c of clients) t.equal(await c.closed(5000), 4200, 'client closed with 4200');
    t.equal(await within(r.exited, 8000, 'exit after the signal'), 0, 'exit code 0');
    t.ok(Date.now() - sentAt < 8000, `exited ${Date.now() - sentAt} ms after ${signal}`);
    t.equal(await getUp(port), null, 'no longer listening');
    t.notMatch(r.stderr(), /Error|\n\s+at /, 'nothing on stderr that looks like a crash');
  });
}

t.test('a SIGTERM as soon as /up answers (start() not yet resolved) still drains and exits 0', async (t) => {
  // Each shard answers /up once it listens, which can be before the primary has seen
  // every shard ready; the signal handlers must already be in place by then.
  for (let i = 0; i < 3; i++) {
    const port = await freePort();
    const r = launch(t, ['start', '--config', writeConfig(t, goodConfig(port))]);
    await waitUp(r, port);
    r.child.kill('SIGTERM');
    t.equal(await within(r.exited, 8000, 'exit after SIGTERM'), 0, `run ${i + 1}: exit code 0`);
  }
});

t.test('environment overrides: PORT replaces the file port, SERVICE_DEFAULT_APP_* adds an app', async (t) => {
  const filePort = await freePort();
  let envPort = await freePort();
  while (envPort === filePort) envPort = await freePort();
  const file = writeConfig(t, goodConfig(filePort));
  const r = launch(t, ['start', '--config', file], {
    PORT: String(envPort),
    SERVICE_DEFAULT_APP_ID: 'env-app',
    SERVICE_DEFAULT_APP_KEY: 'env-key',
    SERVICE_DEFAULT_APP_SECRET: 'env-secret',
  });
  await waitUp(r, envPort);
  t.pass(`listening on the PORT from the environment (:${envPort})`);
  t.equal(await getUp(filePort), null, `not on the file's port (:${filePort})`);

  const envClient = await RawClient.connect(`ws://127.0.0.1:${envPort}/app/env-key?protocol=7`);
  t.match(envClient.socketId, /^\d+\.\d+$/, 'the default app from the environment accepts connections');
  const fileClient = await RawClient.connect(`ws://127.0.0.1:${envPort}/app/${FILE_APP.key}?protocol=7`);
  t.match(fileClient.socketId, /^\d+\.\d+$/, 'the app from the file is still there');
  const unknown = new RawClient(new WebSocket(`ws://127.0.0.1:${envPort}/app/no-such-key`));
  const first = await unknown.next(() => true, 5000);
  t.same({ event: first.event, code: (typeof first.data === 'string' ? JSON.parse(first.data) : first.data).code }, { event: 'pusher:error', code: 4001 }, 'an unknown key is refused');
  t.equal(await unknown.closed(), 4001);

  r.child.kill('SIGTERM');
  t.equal(await envClient.closed(5000), 4200);
  t.equal(await fileClient.closed(5000), 4200);
  t.equal(await within(r.exited, 8000, 'exit after SIGTERM'), 0);
});
