// The shipped balancer configurations, ops/nginx/ringcast.conf and ops/haproxy/ringcast.cfg,
// run by real nginx and HAProxy (started here on an ephemeral port, pid/logs/temp files in a
// temp dir; only the listen port and the server addresses are changed) in front of three
// ringcast nodes on a real Redis. Through each balancer:
//  - /up answers 200; the `pusher` SDK publishes through the HTTP API;
//  - pusher-js over WebSockets (/app/) and over xhr_streaming (/pusher/: every request of a
//    session must reach the node holding it) receive what is published;
//  - a node stopped with a paced drain (503 on /up, then 4200 over the window): every client
//    reconnects through the balancer to the nodes left and receives again;
//  - the timeouts are longer than the heartbeats (websocket.activity_timeout + pusher-js's
//    30 s pong wait, http_fallback.heartbeat_interval).
//  - the client address passes through: with `http.trusted_proxies: [127.0.0.1]` (the
//    balancers' address) a WebSocket opened from 127.0.0.2 reaches the app's connect hook
//    with ip 127.0.0.2, taken from the X-Forwarded-For the balancer added.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import Pusher from 'pusher';
import type PusherJS from 'pusher-js';
import { defaultConfig } from '../../src/config';
import { startNode } from '../helpers/cluster';
import { fallbackClient } from '../helpers/fallback';
import { freePort } from '../helpers/net';
import { connected, pusherJs } from '../helpers/pusher-js';
import { RedisServer } from '../helpers/redis';
import { startHookBackend } from '../helpers/hook-backend';
import { APP, RawClient, WORKERS, eventually, type TestServer } from '../helpers/server';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const NGINX = readFileSync(path.join(ROOT, 'ops', 'nginx', 'ringcast.conf'), 'utf8');
const HAPROXY = readFileSync(path.join(ROOT, 'ops', 'haproxy', 'ringcast.cfg'), 'utf8');
const SHIPPED_NODES = ['10.0.0.1:6001', '10.0.0.2:6001', '10.0.0.3:6001'];

/** The shipped file with the test's port and nodes. */
function adapt(text: string, listen: [RegExp, string], ports: number[]): string {
  if (!listen[0].test(text)) throw new Error(`no ${listen[0]} in the shipped file`);
  let out = text.replace(listen[0], listen[1]);
  SHIPPED_NODES.forEach((n, i) => { out = out.split(n).join(`127.0.0.1:${ports[i]}`); });
  return out;
}

interface Balancer { port: number; stop(): Promise<void> }

async function run(t: Test, cmd: string, args: string[], port: number, dir: string, logFile: string): Promise<Balancer> {
  const proc: ChildProcess = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  proc.stderr!.on('data', (b: Buffer) => { err += b.toString(); });
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) { proc.kill('SIGTERM'); await exited; }
    rmSync(dir, { recursive: true, force: true });
  };
  t.teardown(stop);
  await eventually(async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`${cmd} exited: ${err}${safeRead(logFile)}`);
    return (await get(port, '/up').catch(() => 0)) === 200;
  }, 10_000, `${cmd} to answer /up`);
  return { port, stop };
}

function safeRead(file: string): string {
  try { return readFileSync(file, 'utf8'); } catch { return ''; }
}

async function startNginx(t: Test, ports: number[]): Promise<Balancer> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-nginx-'));
  const port = await freePort();
  writeFileSync(path.join(dir, 'ringcast.conf'), adapt(NGINX, [/listen 80;/, `listen 127.0.0.1:${port};`], ports));
  writeFileSync(path.join(dir, 'nginx.conf'), [
    'daemon off;', 'master_process off;', `pid ${dir}/nginx.pid;`, `error_log ${dir}/error.log warn;`,
    'events { worker_connections 4096; }',
    'http {', '  access_log off;',
    ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((k) => `  ${k}_temp_path ${dir}/${k};`),
    `  include ${dir}/ringcast.conf;`, '}', '',
  ].join('\n'));
  return run(t, 'nginx', ['-p', dir, '-e', `${dir}/error.log`, '-c', `${dir}/nginx.conf`], port, dir, `${dir}/error.log`);
}

async function startHaproxy(t: Test, ports: number[]): Promise<Balancer> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-haproxy-'));
  const port = await freePort();
  const cfg = adapt(HAPROXY, [/bind :80\n/, `bind 127.0.0.1:${port}\n`], ports).replace(/^\s*log .*\n/gm, '');
  writeFileSync(path.join(dir, 'haproxy.cfg'), cfg);
  return run(t, 'haproxy', ['-db', '-f', `${dir}/haproxy.cfg`], port, dir, '');
}

function get(port: number, p: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: p, agent: false }, (res) => { res.resume(); resolve(res.statusCode!); }).on('error', reject);
  });
}

const sdkVia = (port: number) => new Pusher({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1', port: String(port), useTLS: false });

/** Subscribes every client to `channel`, counting the `ping` events each receives. */
async function listen(clients: PusherJS[], channel: string): Promise<number[]> {
  const got = clients.map(() => 0);
  await Promise.all(clients.map((c, i) => new Promise<void>((resolve) => {
    const ch = c.subscribe(channel);
    ch.bind('ping', () => { got[i]++; });
    ch.bind('pusher:subscription_succeeded', () => resolve());
  })));
  return got;
}

/** Publishes through the balancer until every client received one more `ping`. */
async function everyoneReceives(port: number, channel: string, got: number[]): Promise<void> {
  const before = [...got];
  const sdk = sdkVia(port);
  await eventually(async () => {
    await sdk.trigger(channel, 'ping', {});
    return got.every((n, i) => n > before[i]);
  }, 15_000, `every client to receive on ${channel}`);
}

t.test(`nginx and HAProxy with the shipped configs in front of 3 nodes (${WORKERS} workers)`, async (t) => {
  const redis = await RedisServer.start();
  t.teardown(() => redis.stop());
  const backend = await startHookBackend();
  t.teardown(() => backend.close());
  const cfg = {
    adapter: { driver: 'redis' as const },
    database: { redis: { host: '127.0.0.1', port: redis.port } },
    // the balancers run on 127.0.0.1: the client address is the one they add to X-Forwarded-For
    http: { trusted_proxies: ['127.0.0.1'] },
    apps: [{ ...APP, hooks: { url: backend.url, connect: { enabled: true } } } as never],
    shutdown_grace_period: 8000,
    shutdown_unready_delay: 1500,
    shutdown_drain_window: 500,
  };
  const nodes: TestServer[] = [];
  for (let i = 0; i < 3; i++) nodes.push(await startNode(t, cfg));
  await eventually(() => nodes.every((n) => n.server.cluster!.nodes().length === 3), 10_000, 'the nodes to see each other');
  const ports = nodes.map((n) => n.port);
  const balancers: [string, Balancer][] = [['HAProxy', await startHaproxy(t, ports)], ['nginx', await startNginx(t, ports)]];

  for (const [name, lb] of balancers) {
    await t.test(`${name}: WebSockets, the HTTP API and fallback sessions`, async (t) => {
      t.equal(await get(lb.port, '/up'), 200, '/up through the balancer');
      const ws = Array.from({ length: 6 }, () => pusherJs(lb.port));
      const fb = Array.from({ length: 3 }, () => fallbackClient(lb.port, 'xhr_streaming'));
      const all = [...ws, ...fb];
      t.teardown(() => { for (const c of all) c.disconnect(); });
      await Promise.all(ws.map((c) => connected(c)));
      await Promise.all(fb.map((c) => connected(c, 15_000)));
      const got = await listen(all, `lb-${name}`);
      await everyoneReceives(lb.port, `lb-${name}`, got);
      t.pass('6 WebSocket and 3 xhr_streaming clients received what the SDK published through the balancer');
    });

    await t.test(`${name}: the client address reaches the node`, async (t) => {
      const c = await RawClient.connect(`ws://127.0.0.1:${lb.port}/app/${APP.key}?protocol=7`, { localAddress: '127.0.0.2' });
      t.teardown(() => c.close());
      t.ok(c.socketId, 'connected from 127.0.0.2 through the balancer');
      await backend.until((calls) => calls.some((k) => k.body.hook === 'connect' && k.body.socket_id === c.socketId), 10_000, 'the connect hook call');
      const call = backend.calls.find((k) => k.body.hook === 'connect' && k.body.socket_id === c.socketId)!;
      t.equal(call.body.connection?.ip, '127.0.0.2', 'the connect hook sees the client address, not the balancer\'s');
    });
  }

  // HAProxy: node C drains (3 nodes up); nginx: node B drains (A left, C already stopped)
  for (const [name, lb, node] of [['HAProxy', balancers[0][1], nodes[2]], ['nginx', balancers[1][1], nodes[1]]] as const) {
    await t.test(`${name}: a draining node's clients reconnect to the others`, async (t) => {
      const clients = Array.from({ length: 8 }, () => pusherJs(lb.port));
      t.teardown(() => { for (const c of clients) c.disconnect(); });
      await Promise.all(clients.map((c) => connected(c)));
      const got = await listen(clients, `drain-${name}`);
      const ids = clients.map((c) => c.connection.socket_id);
      const t0 = Date.now();
      await node.server.stop();
      t.comment(`the node stopped in ${Date.now() - t0} ms`);
      const moved = clients.filter((c, i) => c.connection.socket_id !== ids[i]).length;
      t.ok(moved > 0, `${moved} of ${clients.length} clients were on the drained node and got another connection`);
      await eventually(() => clients.every((c) => c.connection.state === 'connected'), 15_000, 'every client connected')
        .catch((e: Error) => { throw new Error(`${e.message}: ${clients.map((c, i) => `${ids[i]}→${c.connection.state}/${c.connection.socket_id}`).join(' ')}`); });
      await everyoneReceives(lb.port, `drain-${name}`, got);
      t.pass('every client receives again through the balancer');
    });
  }

  t.test('timeouts are longer than the heartbeats', async (t) => {
    const d = defaultConfig();
    const wsSilence = d.websocket.activity_timeout + 30; // pusher-js pings after activity_timeout, waits 30 s for the pong
    const fbSilence = d.http_fallback.heartbeat_interval;
    const secs = (re: RegExp, text: string) => [...text.matchAll(re)].map((m) => Number(m[1]));
    const appBlock = NGINX.slice(NGINX.indexOf('location /app/'), NGINX.indexOf('location /pusher/'));
    const fbBlock = NGINX.slice(NGINX.indexOf('location /pusher/'), NGINX.indexOf('location / {'));
    t.ok(secs(/proxy_read_timeout (\d+)s;/g, appBlock).every((s) => s > wsSilence), `nginx /app/: proxy_read_timeout over ${wsSilence} s`);
    t.ok(secs(/proxy_send_timeout (\d+)s;/g, appBlock).every((s) => s > wsSilence), `nginx /app/: proxy_send_timeout over ${wsSilence} s`);
    t.ok(secs(/proxy_read_timeout (\d+)s;/g, fbBlock)[0] > fbSilence, `nginx /pusher/: proxy_read_timeout over ${fbSilence} s`);
    t.ok(secs(/timeout tunnel (\d+)s/g, HAPROXY)[0] > wsSilence, `HAProxy: timeout tunnel over ${wsSilence} s`);
    t.ok(secs(/timeout server (\d+)s/g, HAPROXY)[0] > fbSilence, `HAProxy: timeout server over ${fbSilence} s`);
    t.ok(secs(/timeout client (\d+)s/g, HAPROXY)[0] > fbSilence, `HAProxy: timeout client over ${fbSilence} s`);
  });
});
