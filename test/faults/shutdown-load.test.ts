// Graceful shutdown under load: 2,000 subscribers while a publisher streams events, then
// RunningServer.stop() (in process) or SIGTERM (`ringcast start` as a child process):
//  - every client gets close 4200;
//  - every frame any client received is complete JSON (a half-written frame would fail
//    the `ws` client's framing, or JSON.parse, or end the socket with 1006);
//  - stop() resolves / the process exits 0 within shutdown_grace_period.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';

import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import WebSocket from 'ws';
import { freePort, listensOn } from '../helpers/net';
import { APP, WORKERS, startServer } from '../helpers/server';
import { publish } from './api';

const CLIENTS = 2000;
const CHANNELS = 4;
const GRACE_MS = 10_000;
const ROOT = path.resolve(__dirname, '..', '..', '..');

/** A subscriber that keeps only counts: frames, unparseable ones, events, close code. */
class Sub {
  frames = 0;
  bad = 0;
  events = 0;
  closeCode: number | null = null;
  readonly closed: Promise<number>;
  private constructor(readonly ws: WebSocket) {
    this.closed = new Promise((resolve) => ws.on('close', (code) => { this.closeCode = code; resolve(code); }));
    ws.on('error', () => { this.bad++; });
  }

  static open(port: number, channel: string): Promise<Sub> {
    const s = new Sub(new WebSocket(`ws://127.0.0.1:${port}/app/${APP.key}?protocol=7`, { perMessageDeflate: false }));
    return new Promise((resolve, reject) => {
      s.ws.once('error', reject);
      s.ws.on('message', (raw) => {
        s.frames++;
        let f: { event?: string; data?: unknown };
        try {
          f = JSON.parse(raw.toString());
          if (f.event === 'load') JSON.parse(f.data as string);
        } catch {
          s.bad++;
          return;
        }
        if (f.event === 'pusher:connection_established') s.ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel } }));
        else if (f.event === 'pusher_internal:subscription_succeeded') resolve(s);
        else if (f.event === 'load') s.events++;
      });
      void s.closed.then(() => reject(new Error('closed before subscribing')));
    });
  }
}

async function openMany(port: number): Promise<Sub[]> {
  const subs: Sub[] = [];
  for (let i = 0; i < CLIENTS; i += 100) {
    subs.push(...await Promise.all(Array.from({ length: Math.min(100, CLIENTS - i) }, (_, k) => Sub.open(port, `load-${(i + k) % CHANNELS}`))));
  }
  return subs;
}

/** Publishes to the load channels from 4 keep-alive connections until stop(); tallies the outcomes. */
function publisher(port: number) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
  const outcomes = new Map<string, number>();
  const tally = (k: string) => outcomes.set(k, (outcomes.get(k) ?? 0) + 1);
  let running = true;
  let seq = 0;
  const loops = Array.from({ length: 4 }, async () => {
    while (running) {
      const n = seq++;
      try {
        const r = await publish(port, { name: 'load', channel: `load-${n % CHANNELS}`, data: JSON.stringify({ n, pad: 'z'.repeat(200) }) }, { agent, timeoutMs: 5000 });
        tally(String(r.status));
      } catch {
        tally('connection error');
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  });
  return {
    outcomes,
    async stop() {
      running = false;
      await Promise.all(loops);
      agent.destroy();
      return outcomes;
    },
  };
}

async function loaded(t: Test, subs: Sub[]): Promise<void> {
  const until = Date.now() + 20_000;
  while (subs.some((s) => s.events === 0) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
  t.ok(subs.every((s) => s.events > 0), 'every subscriber is receiving the stream');
  await new Promise((r) => setTimeout(r, 1000)); // then stop in the middle of the stream
}

async function checkClients(t: Test, subs: Sub[]): Promise<void> {
  await Promise.race([Promise.all(subs.map((s) => s.closed)), new Promise((r) => setTimeout(r, 5000))]);
  const codes: Record<string, number> = {};
  for (const s of subs) codes[String(s.closeCode)] = (codes[String(s.closeCode)] ?? 0) + 1;
  t.same(codes, { 4200: CLIENTS }, `all ${CLIENTS} clients got close 4200`);
  t.equal(subs.reduce((n, s) => n + s.bad, 0), 0, 'no frame that is not complete JSON, no socket error');
  const frames = subs.reduce((n, s) => n + s.frames, 0);
  t.comment(`${frames} frames received in all`);
}

function checkPublisher(t: Test, outcomes: Map<string, number>): void {
  t.comment(`publisher: ${JSON.stringify(Object.fromEntries(outcomes))}`);
  t.ok((outcomes.get('200') ?? 0) > 0, 'publishes were answered');
  t.ok([...outcomes.keys()].every((k) => ['200', '503', 'connection error'].includes(k)), 'only 200, 503 or a closed connection');
}

t.test('stop() with 2,000 subscribers under load', async (t) => {
  // the 2,000 subscribers all come from 127.0.0.1
  const srv = await startServer({ shutdown_grace_period: GRACE_MS, limits: { max_connections_per_ip: 10_000 } });
  let stopped = false;
  t.teardown(() => (stopped ? undefined : srv.server.stop()));
  const subs = await openMany(srv.port);
  const pub = publisher(srv.port);
  await loaded(t, subs);
  const t0 = Date.now();
  await srv.server.stop();
  stopped = true;
  const took = Date.now() - t0;
  t.ok(took < GRACE_MS, `stop() resolved in ${took} ms (grace ${GRACE_MS} ms)`);
  checkPublisher(t, await pub.stop());
  await checkClients(t, subs);
});

/** Until process `pid` itself listens on `port` (not another process that took the port) and answers /up; false: it exited first. */
async function waitUp(port: number, pid: number, exited: () => boolean): Promise<boolean> {
  for (const until = Date.now() + 20_000; Date.now() < until;) {
    if (exited()) return false;
    const ok = listensOn(pid, port) && await new Promise<boolean>((resolve) => {
      http.get({ host: '127.0.0.1', port, path: '/up', agent: false, timeout: 1000 }, (res) => { res.resume(); resolve(res.statusCode === 200); })
        .on('error', () => resolve(false)).on('timeout', function (this: http.ClientRequest) { this.destroy(); });
    });
    if (ok) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('ringcast did not answer /up');
}

t.test('SIGTERM to `ringcast start` with 2,000 subscribers under load', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-shutdown-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const env: NodeJS.ProcessEnv = {};
  for (const k of ['PATH', 'HOME', 'TMPDIR', 'LANG']) if (process.env[k] !== undefined) env[k] = process.env[k];
  const file = path.join(dir, 'config.yaml');
  let port = 0;
  let child!: ChildProcess;
  let stderr = '';
  let exitCode: number | string | null = null;
  let exited!: Promise<number | string>;
  // another port when it exits before it listens (another process took the port between
  // freePort and its bind: it boots for a second)
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    writeFileSync(file, [
      'host: 127.0.0.1', `port: ${port}`, `workers: ${WORKERS}`, `shutdown_grace_period: ${GRACE_MS}`,
      // the 2,000 subscribers all come from 127.0.0.1
      'limits:', '  max_connections_per_ip: 10000',
      'shutdown_drain_window: 0', // every client at once: the paced drain is test/faults/drain.test.ts
      'log:', '  level: warn', 'apps:', `  - id: ${APP.id}`, `    key: ${APP.key}`, `    secret: ${APP.secret}`, '',
    ].join('\n'));
    const proc = spawn(process.execPath, [path.join(ROOT, 'bin', 'ringcast.js'), 'start', '--config', file], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    child = proc;
    stderr = '';
    exitCode = null;
    proc.stderr!.on('data', (b: Buffer) => { stderr += b.toString(); });
    proc.stdout!.resume();
    const done = new Promise<number | string>((resolve) => proc.once('exit', (code, sig) => { exitCode = code ?? sig ?? -1; resolve(exitCode); }));
    exited = done;
    t.teardown(async () => {
      if (proc.exitCode === null && proc.signalCode === null) { proc.kill('SIGKILL'); await done; }
    });
    if (await waitUp(port, proc.pid!, () => exitCode !== null)) break;
    if (!/could not listen/.test(stderr) || attempt >= 5) throw new Error(`ringcast exited before listening: ${stderr}`);
  }
  const subs = await openMany(port);
  const pub = publisher(port);
  await loaded(t, subs);
  const t0 = Date.now();
  child.kill('SIGTERM');
  const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('still running'), GRACE_MS + 5000))]);
  const took = Date.now() - t0;
  t.equal(code, 0, `exit code 0${stderr ? `; stderr: ${stderr.slice(0, 500)}` : ''}`);
  t.ok(took < GRACE_MS, `exited ${took} ms after SIGTERM (grace ${GRACE_MS} ms)`);
  checkPublisher(t, await pub.stop());
  await checkClients(t, subs);
});
