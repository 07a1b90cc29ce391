// unix_socket.*: the server also listens on a Unix socket (shard 0 accepts its
// connections, listeners/unix.ts). A WebSocket client (ws+unix:) and HTTP clients (the
// `pusher` SDK through an agent that dials the socket, a raw GET /up) use it; a stale
// socket file is replaced, a live one or a regular file is refused, the mode is applied
// and the file goes at stop.

import { lstatSync, mkdtempSync, rmSync, writeFileSync, existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import Pusher from 'pusher';
import t, { type Test } from 'tap';
import uWS from 'uWebSockets.js';
import { APP, RawClient, WORKERS, startServer } from '../helpers/server';

function tmpSocketPath(t: Test): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-unix-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, 'ringcast.sock');
}

/** A socket file with nothing behind it (uWS leaves its file when the listener closes). */
function staleSocket(p: string): void {
  uWS.App().listen_unix((ls) => { if (ls) uWS.us_listen_socket_close(ls); }, p);
}

/** An http.Agent whose connections go to the Unix socket whatever the URL says. */
function unixAgent(socketPath: string): http.Agent {
  const agent = new http.Agent({ keepAlive: false });
  (agent as unknown as { createConnection: () => net.Socket }).createConnection = () => net.connect(socketPath);
  return agent;
}

function getOverSocket(socketPath: string, p: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    http.get({ socketPath, path: p, agent: false }, (res) => {
      let body = '';
      res.on('data', (b: Buffer) => { body += b.toString(); });
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    }).on('error', reject);
  });
}

t.test('WebSocket and HTTP over the socket; a stale file replaced, mode applied, file removed at stop', async (t) => {
  const sock = tmpSocketPath(t);
  staleSocket(sock);
  t.ok(lstatSync(sock).isSocket(), 'a stale socket file is there before start');
  const srv = await startServer({ unix_socket: { enabled: true, path: sock, permission_mode: 0o600 } });
  let stopped = false;
  t.teardown(() => (stopped ? undefined : srv.stop()));
  const st = lstatSync(sock);
  t.ok(st.isSocket());
  t.equal(st.mode & 0o777, 0o600, 'permission_mode applied');

  const up = await getOverSocket(sock, '/up');
  t.equal(up.status, 200);
  t.match(JSON.parse(up.body), { status: 'ok' });

  const overUnix = srv.track(await RawClient.connect(`ws+unix://${sock}:/app/${APP.key}?protocol=7&client=js&version=8.4.0`));
  t.match(overUnix.socketId, /^\d+\.\d+$/, 'connection_established over the socket');
  // Clients on the TCP port land on any shard; they get what is published over the socket.
  const overTcp = await Promise.all(Array.from({ length: 2 * WORKERS }, async () => srv.track(await RawClient.connect(srv.wsUrl()))));
  for (const c of [overUnix, ...overTcp]) t.equal((await c.subscribe('unix-news')).event, 'pusher_internal:subscription_succeeded');

  const sdk = new Pusher({ appId: APP.id, key: APP.key, secret: APP.secret, host: 'localhost', port: '80', useTLS: false, agent: unixAgent(sock) });
  const res = await sdk.trigger('unix-news', 'flash', { n: 1 });
  t.equal(res.status, 200, 'the SDK published through the socket');
  for (const c of [overUnix, ...overTcp]) {
    const f = await c.next((x) => x.event === 'flash');
    t.same(JSON.parse(f.data), { n: 1 });
  }
  // A query over the socket sees the subscriptions of both kinds of clients.
  const info = await sdk.get({ path: '/channels/unix-news', params: { info: 'subscription_count' } });
  t.equal(((await info.json()) as { subscription_count: number }).subscription_count, 1 + overTcp.length, 'counts include the socket client');

  for (const c of [overUnix, ...overTcp]) await c.close();
  await srv.stop();
  stopped = true;
  t.notOk(existsSync(sock), 'socket file removed at stop');
});

t.test('a live socket of another server is not taken', async (t) => {
  const sock = tmpSocketPath(t);
  const first = await startServer({ unix_socket: { enabled: true, path: sock } });
  t.teardown(() => first.stop());
  await t.rejects(startServer({ unix_socket: { enabled: true, path: sock } }), { code: 'RC_ERR_LISTEN', message: /is in use by a running server/ });
  const up = await getOverSocket(sock, '/up');
  t.equal(up.status, 200, 'the first server still answers on it');
});

t.test('a path that is not a socket is refused and left alone', async (t) => {
  const sock = tmpSocketPath(t);
  writeFileSync(sock, 'precious');
  await t.rejects(startServer({ unix_socket: { enabled: true, path: sock } }), { code: 'RC_ERR_LISTEN', message: /exists and is not a socket/ });
  t.equal(readFileSync(sock, 'utf8'), 'precious', 'the file is untouched');
});

t.test('a path in a directory that does not exist is refused, naming it', async (t) => {
  const sock = path.join(tmpSocketPath(t), 'no-such-dir', 'ringcast.sock');
  await t.rejects(startServer({ unix_socket: { enabled: true, path: sock } }), { code: 'RC_ERR_LISTEN', message: /the directory .*no-such-dir does not exist/ });
});
