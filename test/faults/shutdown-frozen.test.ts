// shutdown_grace_period bounds the stop when clients stop reading. A child process opens
// WebSocket clients (on several shards when there are several) and/or an idle HTTP
// keep-alive connection, and is frozen with SIGSTOP: its TCP connections stay open, but
// it never answers the 4200 close frame, never reads what is queued for it, never closes.
// Before shard/shutdown.ts the shard threads lingered until uWS's own timers dropped
// those sockets (~15 s for an ended WebSocket, 10 s for an idle HTTP connection)
// whatever the grace period; now SIGTERM to `ringcast start` exits, and stop() resolves,
// within the grace period (the cut comes at half of it).

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { signedPost, rawRequest } from '../helpers/http';
import { freePort, listensOn } from '../helpers/net';
import { APP, WORKERS, startServer } from '../helpers/server';
import { CUT_SHARE } from '../../src/shard/shutdown';

const GRACE_MS = 2000;
const CUT_MS = GRACE_MS * CUT_SHARE;
/** What the exit may take beyond the grace period (thread and process teardown on a busy machine). */
// the process's own exit after the cut (threads, coverage writers) on a loaded 2-core machine;
// without the cut the frozen clients hold it for the 20 s this test waits
const MARGIN_MS = 3000;
const ROOT = path.resolve(__dirname, '..', '..', '..');
const FIXTURE = path.join(__dirname, 'fixtures', 'frozen-clients.js');

function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const k of ['PATH', 'HOME', 'TMPDIR', 'LANG']) if (process.env[k] !== undefined) env[k] = process.env[k];
  return env;
}

interface Child {
  proc: ChildProcess;
  out(): string;
  exited: Promise<number | string>;
  done(): boolean;
}

function run(t: Test, args: string[]): Child {
  const proc = spawn(process.execPath, args, { cwd: ROOT, env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.on('data', (b: Buffer) => { out += b.toString(); });
  proc.stderr!.on('data', (b: Buffer) => { out += b.toString(); });
  let ended = false;
  const exited = new Promise<number | string>((resolve) => proc.once('exit', (code, sig) => { ended = true; resolve(code ?? sig ?? -1); }));
  t.teardown(async () => {
    if (ended) return;
    proc.kill('SIGCONT');
    proc.kill('SIGKILL');
    await exited;
  });
  return { proc, out: () => out, exited, done: () => ended };
}

/**
 * Starts the fixture against `port`, waits until everything it opens is open, freezes it
 * and fills what the server queues for its WebSocket clients. Teardown thaws and kills it.
 */
async function frozenClients(t: Test, port: number, what: 'ws' | 'http' | 'both'): Promise<{ sockets: string[] }> {
  const c = run(t, [FIXTURE, String(port), what, String(WORKERS)]);
  const line = await new Promise<string>((resolve, reject) => {
    c.proc.stdout!.on('data', () => {
      const nl = c.out().indexOf('\n');
      if (nl >= 0) resolve(c.out().slice(0, nl));
    });
    void c.exited.then((code) => reject(new Error(`fixture exited (${code}): ${c.out()}`)));
  });
  const opened = JSON.parse(line) as { sockets: string[] };
  c.proc.kill('SIGSTOP');
  if (what !== 'http') {
    // Output the frozen clients never read: more than the kernel buffers of a loopback
    // connection take, so part of it waits in uWS (dropped past websocket.max_bytes).
    const data = 'x'.repeat(90 * 1024);
    for (let i = 0; i < 20; i++) {
      const r = await signedPost(port, APP, 'events', { name: 'fill', channel: 'frozen', data });
      if (r.status !== 200) throw new Error(`publish answered ${r.status}: ${r.text}`);
    }
  }
  return opened;
}

function configFile(t: Test, port: number): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-frozen-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'config.yaml');
  writeFileSync(file, [
    'host: 127.0.0.1', `port: ${port}`, `workers: ${WORKERS}`, `shutdown_grace_period: ${GRACE_MS}`,
    'log:', '  level: warn', 'apps:', `  - id: ${APP.id}`, `    key: ${APP.key}`, `    secret: ${APP.secret}`, '',
  ].join('\n'));
  return file;
}

class ExitedBeforeListening extends Error {}

/** Until `server` itself listens on `port` (not another process that took the port) and answers /up. */
async function waitUp(port: number, server: Child): Promise<void> {
  for (const until = Date.now() + 20_000; Date.now() < until;) {
    if (server.done()) throw new ExitedBeforeListening(`ringcast exited before listening: ${server.out()}`);
    const ok = listensOn(server.proc.pid!, port) && await rawRequest(port, 'GET', '/up', undefined, {}, 1000).then((r) => r.status === 200, () => false);
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('ringcast did not answer /up');
}

/**
 * `ringcast start` on a free port, up; on another port when it exits before it listens
 * (another process took the port between freePort and its bind: it boots for a second).
 */
async function startRingcast(t: Test): Promise<{ port: number; server: Child }> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const server = run(t, [path.join(ROOT, 'bin', 'ringcast.js'), 'start', '--config', configFile(t, port)]);
    try {
      await waitUp(port, server);
      return { port, server };
    } catch (err) {
      if (!(err instanceof ExitedBeforeListening) || !/could not listen/.test(server.out()) || attempt >= 5) throw err;
    }
  }
}

async function sigtermWith(t: Test, what: 'ws' | 'http' | 'both'): Promise<void> {
  const { port, server } = await startRingcast(t);
  const { sockets } = await frozenClients(t, port, what);
  const t0 = Date.now();
  server.proc.kill('SIGTERM');
  const limit = GRACE_MS + MARGIN_MS;
  let timer: NodeJS.Timeout | undefined;
  const code = await Promise.race([server.exited, new Promise((r) => { timer = setTimeout(() => r('still running'), 20_000); })]);
  clearTimeout(timer);
  const took = Date.now() - t0;
  t.equal(code, 0, `exit code 0 (output: ${server.out().slice(0, 500)})`);
  t.ok(took <= limit, `exited ${took} ms after SIGTERM (grace ${GRACE_MS} ms, limit ${limit} ms)`);
  // The frozen connections held the process until the cut: the test is not vacuous.
  t.ok(took >= CUT_MS - 50, `not before the cut at half the grace period (${CUT_MS} ms)`);
  t.comment(`${sockets.length} frozen WebSocket client(s), HTTP keep-alive: ${what !== 'ws'}`);
}

t.test('SIGTERM: frozen WebSocket clients with output queued', (t) => sigtermWith(t, 'ws'));
t.test('SIGTERM: an idle HTTP keep-alive connection of a frozen client', (t) => sigtermWith(t, 'http'));
t.test('SIGTERM: both', (t) => sigtermWith(t, 'both'));

t.test('stop() in process: frozen WebSocket clients and an HTTP keep-alive connection', async (t) => {
  const srv = await startServer({ shutdown_grace_period: GRACE_MS });
  let stopped = false;
  t.teardown(() => (stopped ? undefined : srv.server.stop()));
  await frozenClients(t, srv.port, 'both');
  const t0 = Date.now();
  await srv.server.stop();
  stopped = true;
  const took = Date.now() - t0;
  t.ok(took <= GRACE_MS + MARGIN_MS, `stop() resolved in ${took} ms (grace ${GRACE_MS} ms)`);
  t.ok(took >= CUT_MS - 50, `not before the cut at half the grace period (${CUT_MS} ms): the frozen clients held it until then`);
});
