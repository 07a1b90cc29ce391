// Client addresses and the per-address connection cap (limits.max_connections_per_ip,
// http.trusted_proxies), from outside: WebSockets (`ws`) and HTTP fallback sessions (raw
// HTTP) from two source addresses on loopback (127.0.0.1 and 127.0.0.2), and from a
// trusted proxy that sends X-Forwarded-For / Forwarded. Workers 1 and 4
// (RINGCAST_TEST_WORKERS): with 4 the connections spread over the shards and the cap holds
// for the process.

import http from 'node:http';
import t from 'tap';
import WebSocket from 'ws';
import { counterValue, RawReceive } from '../helpers/fallback';
import { signedGet, type RawResponse } from '../helpers/http';
import { APP, RawClient, WORKERS, eventually, startServer, type TestServer } from '../helpers/server';

t.setTimeout(180_000);

let seq = 0;
const sid = () => `c${process.pid.toString(32)}${(++seq).toString(32)}`.slice(-8).padStart(8, '0');

interface Refused { code: number; message: string; closeCode: number }

/** A WebSocket from `from` with `headers`: its socket_id, or the pusher:error and close code it was refused with. */
function connect(srv: TestServer, from: string, headers: Record<string, string> = {}): Promise<{ ws: WebSocket; socketId: string } | Refused> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(srv.wsUrl(), { localAddress: from, headers });
    let error: { code: number; message: string } | null = null;
    ws.on('message', (m) => {
      const f = JSON.parse(m.toString()) as { event: string; data: string };
      if (f.event === 'pusher:connection_established') resolve({ ws, socketId: JSON.parse(f.data).socket_id });
      else if (f.event === 'pusher:error') error = typeof f.data === 'string' ? JSON.parse(f.data) : f.data;
    });
    ws.on('close', (closeCode) => resolve({ ...(error ?? { code: 0, message: '' }), closeCode }));
    ws.on('error', reject);
  });
}

/** A streaming session from `from`: resolves once it is established, or with the answer that refused it. */
async function session(srv: TestServer, from: string, headers: Record<string, string> = {}): Promise<{ r: RawReceive; status: number; json: unknown }> {
  const r = new RawReceive(srv.port, `/pusher/app/${APP.key}/1/${sid()}/xhr_streaming`, headers, from);
  await eventually(() => r.ended || r.frames().length > 0, 5000, 'the session to open or be refused');
  return { r, status: r.status, json: r.ended && r.status !== 200 ? JSON.parse(r.text) : null };
}

const isOpen = (c: { socketId: string } | Refused): c is { ws: WebSocket; socketId: string } => 'socketId' in c;

t.test(`limits.max_connections_per_ip: WebSockets and HTTP sessions together, per address, freed on close (workers ${WORKERS})`, async (t) => {
  const srv = await startServer({ limits: { max_connections_per_ip: 4 }, http_fallback: { disconnect_delay: 1 }, metrics: { enabled: true, host: '127.0.0.1', port: 0 } });
  t.teardown(() => srv.stop());
  const held: WebSocket[] = [];
  const streams: RawReceive[] = [];
  t.teardown(() => {
    for (const w of held) w.close();
    for (const r of streams) r.abort();
  });

  for (let i = 0; i < 3; i++) {
    const c = await connect(srv, '127.0.0.1');
    if (!isOpen(c)) return t.fail(`connection ${i} refused: ${JSON.stringify(c)}`);
    held.push(c.ws);
  }
  const s = await session(srv, '127.0.0.1');
  t.equal(s.status, 200, 'the fourth, an HTTP session, is admitted');
  streams.push(s.r);

  const over = await connect(srv, '127.0.0.1');
  t.notOk(isOpen(over), 'a fifth WebSocket from the address is refused');
  if (!isOpen(over)) {
    t.equal(over.code, 4100, 'pusher:error 4100');
    t.match(over.message, /at most 4 connections from one address \(limits\.max_connections_per_ip\)/);
    t.equal(over.closeCode, 4100, 'closed with 4100');
  }
  const overSession = await session(srv, '127.0.0.1');
  t.equal(overSession.status, 429, 'a fifth, an HTTP session, is refused with 429');
  t.match((overSession.json as { error: string }).error, /Too many connections from this address: at most 4 .*limits\.max_connections_per_ip/);

  const other = await connect(srv, '127.0.0.2');
  t.ok(isOpen(other), 'another address still connects');
  if (isOpen(other)) held.push(other.ws);
  const otherSession = await session(srv, '127.0.0.2');
  t.equal(otherSession.status, 200, 'and opens an HTTP session');
  streams.push(otherSession.r);

  t.equal(await counterValue(srv.server.metricsPort!, 'connections_refused_per_ip_total', 'transport="ws"'), 1, 'counted: ws');
  t.equal(await counterValue(srv.server.metricsPort!, 'connections_refused_per_ip_total', 'transport="http"'), 1, 'counted: http');

  // a WebSocket closed gives its place back
  held.shift()!.close();
  let again: Awaited<ReturnType<typeof connect>> | null = null;
  await eventually(async () => {
    again = await connect(srv, '127.0.0.1');
    return isOpen(again);
  }, 10_000, 'a place freed by a closed WebSocket');
  held.push((again as unknown as { ws: WebSocket }).ws);
  // and an HTTP session that ended (disconnect_delay after its stream went) gives its place back too
  s.r.abort();
  await eventually(async () => {
    const c = await connect(srv, '127.0.0.1');
    if (isOpen(c)) held.push(c.ws);
    return isOpen(c);
  }, 10_000, 'a place freed by an ended HTTP session');
});

/** An API request from 127.0.0.1 with headers. */
const apiFrom = (srv: TestServer, headers: Record<string, string>): Promise<RawResponse> => signedGet(srv.port, APP, 'channels', {}, headers);

t.test(`http.trusted_proxies: the client address from X-Forwarded-For / Forwarded, only from a trusted peer (workers ${WORKERS})`, async (t) => {
  const srv = await startServer({
    http: { trusted_proxies: ['127.0.0.1/32'] },
    limits: { max_connections_per_ip: 2 },
    rate_limiter: { api: { max_requests: 2, window_seconds: 60 } },
  });
  t.teardown(() => srv.stop());
  const held: WebSocket[] = [];
  t.teardown(() => { for (const w of held) w.close(); });
  const keep = (c: Awaited<ReturnType<typeof connect>>) => {
    if (isOpen(c)) held.push(c.ws);
    return isOpen(c);
  };

  // through the proxy (127.0.0.1): each client address has its own cap; a forged entry left of it is not read
  t.ok(keep(await connect(srv, '127.0.0.1', { 'x-forwarded-for': '203.0.113.5' })));
  t.ok(keep(await connect(srv, '127.0.0.1', { 'x-forwarded-for': '198.51.100.9, 203.0.113.5' })));
  const third = await connect(srv, '127.0.0.1', { 'x-forwarded-for': '203.0.113.5' });
  t.notOk(keep(third), 'the third from 203.0.113.5 is refused');
  t.ok(keep(await connect(srv, '127.0.0.1', { 'x-forwarded-for': '203.0.113.6' })), 'another client behind the same proxy connects');
  t.ok(keep(await connect(srv, '127.0.0.1', { forwarded: 'for="[2001:db8::1]:4711";proto=http' })), 'Forwarded: for= is read when there is no X-Forwarded-For');
  const s = await session(srv, '127.0.0.1', { 'x-forwarded-for': '203.0.113.5' });
  t.equal(s.status, 429, 'an HTTP session from 203.0.113.5 counts with its WebSockets');

  // a peer that is not a trusted proxy: its header is its own to forge, and ignored
  t.ok(keep(await connect(srv, '127.0.0.2', { 'x-forwarded-for': '203.0.113.5' })), 'from 127.0.0.2 the header is ignored: 127.0.0.2 has room');
  t.ok(keep(await connect(srv, '127.0.0.2', { 'x-forwarded-for': '203.0.113.5' })));
  t.notOk(keep(await connect(srv, '127.0.0.2', { 'x-forwarded-for': '192.0.2.1' })), '127.0.0.2 itself is capped, whatever it claims');

  // the API's per-IP window uses the same address
  t.equal((await apiFrom(srv, { 'x-forwarded-for': '192.0.2.10' })).status, 200);
  t.equal((await apiFrom(srv, { 'x-forwarded-for': '192.0.2.10' })).status, 200);
  const limited = await apiFrom(srv, { 'x-forwarded-for': '192.0.2.10' });
  t.equal(limited.status, 429, 'the third request from 192.0.2.10 in the window');
  t.equal((await apiFrom(srv, { 'x-forwarded-for': '192.0.2.11' })).status, 200, 'another client behind the proxy is not limited');
});

t.test(`hooks see the client address a trusted proxy names (workers ${WORKERS})`, async (t) => {
  const calls: { connection?: { ip: string } }[] = [];
  const backend = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => { body += c.toString(); });
    req.on('end', () => {
      calls.push(JSON.parse(body));
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"allow":true}');
    });
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(backend.address() as { port: number }).port}/hooks`;
  const srv = await startServer({ http: { trusted_proxies: ['127.0.0.1'] }, apps: [{ ...APP, hooks: { url, connect: { enabled: true } } }] });
  t.teardown(async () => {
    await srv.stop();
    await new Promise((r) => backend.close(r));
  });
  const c = srv.track(await RawClient.connect(srv.wsUrl(), { headers: { 'x-forwarded-for': '203.0.113.77' } }));
  t.ok(c.socketId, 'connected after the connect hook');
  const s = await session(srv, '127.0.0.1', { 'x-forwarded-for': '203.0.113.78' });
  t.teardown(() => s.r.abort());
  await eventually(() => calls.length >= 2, 5000, 'both connect hooks');
  t.same(calls.map((x) => x.connection?.ip).sort(), ['203.0.113.77', '203.0.113.78'], 'WebSocket and HTTP session alike');
});
