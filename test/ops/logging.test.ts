// test-modes: once (ringcast start as a child with 4 shards)
// log.output_format, log.colors_enabled, log.include_target, and one destination for every
// thread: `ringcast start` as a child process with 4 shards at level debug; clients
// subscribe to many channels, so every shard logs (`channel occupied` by the channel's
// owner shard) while the primary logs too; then SIGTERM, and stdout is read whole.

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { APP_ENV_VARS, ENV_VARS } from '../../src/config/env';
import { freePort } from '../helpers/net';
import { RawClient, sleep } from '../helpers/server';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const BIN = path.join(ROOT, 'bin', 'ringcast.js');
const SHARDS = 4;
const CHANNELS = 32;
const SECRET = 'log-test-secret-42';

function env(): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env };
  for (const k of [...Object.keys(ENV_VARS), ...Object.keys(APP_ENV_VARS), 'NODE_OPTIONS']) delete e[k];
  for (const k of Object.keys(e)) if (k.startsWith('TAP') || k.startsWith('RINGCAST_')) delete e[k];
  return e;
}

function up(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/up', agent: false, timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
  });
}

/** Runs the server with this `log:` section, drives traffic, stops it; its whole stdout. */
async function runWith(t: Test, log: string): Promise<string> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-log-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const port = await freePort();
  const file = path.join(dir, 'config.yaml');
  writeFileSync(file, `host: 127.0.0.1\nport: ${port}\nworkers: ${SHARDS}\nshutdown_grace_period: 3000\nlog: ${log}\napps: [{id: log-app, key: log-key, secret: ${SECRET}}]\n`);
  const child = spawn(process.execPath, [BIN, 'start', '--config', file], { cwd: dir, env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (b: Buffer) => { out += b.toString(); });
  child.stderr.on('data', (b: Buffer) => { err += b.toString(); });
  // 'close', not 'exit': 'exit' can come before the last of stdout has been read
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL'); });
  const until = Date.now() + 30_000;
  while (!(await up(port))) {
    if (child.exitCode !== null || Date.now() > until) throw new Error(`did not start: ${err}${out}`);
    await sleep(100);
  }
  const clients = await Promise.all(Array.from({ length: 4 }, () => RawClient.connect(`ws://127.0.0.1:${port}/app/log-key?protocol=7`)));
  await Promise.all(clients.map(async (c, i) => {
    for (let ch = i; ch < CHANNELS; ch += clients.length) await c.subscribe(`log-channel-${ch}`);
  }));
  for (const c of clients) await c.close();
  child.kill('SIGTERM');
  t.equal(await exited, 0, 'exit 0 after SIGTERM');
  // Node's own coverage writer (NODE_V8_COVERAGE, set by make test's coverage run and
  // inherited by this child) may report on stderr at exit; that line is not the server's.
  t.equal(err.replace(/^Failed to stringify coverage profile result\n/gm, ''), '', 'nothing on stderr');
  t.notMatch(out, SECRET, 'the app secret is never logged');
  return out;
}

const lines = (out: string) => out.split('\n').filter((l) => l !== '');
const ANSI = /\x1b\[/; // eslint-disable-line no-control-regex

t.test('json (default): one JSON object per line from every thread, no target', async (t) => {
  const out = await runWith(t, '{level: debug}');
  const objs = lines(out).map((l) => JSON.parse(l) as Record<string, unknown>);
  t.ok(objs.length > CHANNELS, `${objs.length} lines, each a whole JSON object`);
  const occupied = objs.filter((o) => o.msg === 'channel occupied');
  t.equal(occupied.length, CHANNELS, 'one `channel occupied` per channel, from the owner shards');
  t.ok(new Set(occupied.map((o) => o.shard)).size >= 2, 'from several shards');
  t.notOk(objs.some((o) => 'thread' in o || 'module' in o), 'no thread/module without include_target');
  const start = objs.find((o) => o.msg === 'ringcast listening');
  t.match(start, {
    addresses: [/^http:\/\/127\.0\.0\.1:\d+ /], shards: SHARDS, adapter: 'local',
    drivers: { cache: 'memory', queue: 'sync', rate_limiter: 'memory', metrics: 'off' }, apps: ['log-app'],
  }, 'the startup line: addresses, shards, adapter, drivers, apps by id');
  t.notOk(ANSI.test(out));
});

t.test('json with include_target: thread and module on every line', async (t) => {
  const out = await runWith(t, '{level: debug, include_target: true}');
  const objs = lines(out).map((l) => JSON.parse(l) as Record<string, unknown>);
  t.ok(objs.every((o) => typeof o.thread === 'string'), 'every line has its thread');
  const occupied = objs.filter((o) => o.msg === 'channel occupied');
  t.ok(occupied.every((o) => /^shard-\d$/.test(o.thread as string) && o.module === 'channels'), 'shard-N, module channels');
  t.equal(objs.find((o) => o.msg === 'ringcast listening')?.thread, 'primary');
});

t.test('human with include_target: readable lines with a [thread module] prefix, no colour', async (t) => {
  const out = await runWith(t, '{level: debug, output_format: human, include_target: true}');
  const all = lines(out);
  const shape = /^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\] (TRACE|DEBUG|INFO|WARN|ERROR|FATAL): \[(primary|shard-\d)( [a-z]+)?\] \S/;
  t.same(all.filter((l) => !shape.test(l)), [], 'every line is one whole human line');
  const occupied = all.filter((l) => / DEBUG: \[shard-\d channels\] channel occupied/.test(l));
  t.equal(occupied.length, CHANNELS, 'the shards\' lines are there, formatted');
  t.ok(all.some((l) => /INFO: \[primary\] ringcast listening .*"apps":\["log-app"\]/.test(l)), 'startup line');
  t.notOk(ANSI.test(out), 'no colour without colors_enabled');
  t.notOk(all.some((l) => l.startsWith('{')), 'no JSON');
});

t.test('human with colors_enabled: ANSI colours; without include_target: no prefix', async (t) => {
  const out = await runWith(t, '{level: info, output_format: human, colors_enabled: true}');
  t.ok(ANSI.test(out), 'coloured');
  const plain = lines(out.replace(/\x1b\[[0-9;]*m/g, '')); // eslint-disable-line no-control-regex
  t.ok(plain.some((l) => /INFO: ringcast listening/.test(l)), 'no [thread] prefix');
});
