// HTTP/1.1 pipelining on the API: several signed publishes written at once on one
// connection are all answered, in order, and delivered in order, whether an answer is
// written inside the uWS callback (publishes with the memory limiter: http/maybe.ts) or
// later (a GET that asks the channel's owner shard).
import net from 'node:net';
import t from 'tap';
import { signApiQuery } from '../../src/protocol/api-auth';
import { now } from '../helpers/http';
import { APP, RawClient, startServer } from '../helpers/server';

function publishRequest(i: number): string {
  const body = JSON.stringify({ name: 'seq', channel: 'pipe', data: String(i) });
  const path = `/apps/${APP.id}/events`;
  const q = signApiQuery(APP.key, APP.secret, 'POST', path, {}, body, now());
  return `POST ${path}?${q} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

/** Writes `raw` at once and collects what comes back until `count` status lines arrived (or 5 s). */
function exchange(port: number, raw: string, count: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => s.write(raw));
    let buf = '';
    const done = () => { clearTimeout(timer); s.destroy(); resolve(buf); };
    s.on('data', (d) => {
      buf += d;
      const answers = buf.match(/HTTP\/1\.1 \d{3}/g) ?? [];
      if (answers.length >= count && /\}$/.test(buf)) done();
    });
    s.on('error', reject);
    s.on('close', done);
    const timer = setTimeout(done, 5000);
  });
}

t.test('pipelined publishes are all answered 200, in order, and delivered in order', async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.stop());
  const sub = await RawClient.connect(`ws://127.0.0.1:${srv.port}/app/${APP.key}`);
  t.teardown(() => sub.ws.close());
  sub.send({ event: 'pusher:subscribe', data: { channel: 'pipe' } });
  await sub.next((f) => f.event === 'pusher_internal:subscription_succeeded');

  const N = 20;
  let raw = '';
  for (let i = 0; i < N; i++) raw += publishRequest(i);
  const reply = await exchange(srv.port, raw, N);
  const statuses = reply.match(/HTTP\/1\.1 \d{3}/g) ?? [];
  t.equal(statuses.length, N, `${N} answers on one connection (got ${statuses.length})`);
  t.ok(statuses.every((s) => s === 'HTTP/1.1 200'), 'every answer is 200');
  t.equal((reply.match(/\{"ok":true\}/g) ?? []).length, N, 'every body is {"ok":true}');

  const got: string[] = [];
  for (let i = 0; i < N; i++) got.push((await sub.next((f) => f.event === 'seq')).data as string);
  t.same(got, Array.from({ length: N }, (_, i) => String(i)), 'delivered once each, in publish order');
});

t.test('a pipelined async request after sync ones still gets its answer', async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.stop());
  const path = `/apps/${APP.id}/channels/pipe`;
  const q = signApiQuery(APP.key, APP.secret, 'GET', path, { info: 'subscription_count' }, '', now());
  const raw = publishRequest(0) + publishRequest(1) + `GET ${path}?${q} HTTP/1.1\r\nHost: x\r\n\r\n`;
  const reply = await exchange(srv.port, raw, 3);
  const statuses = reply.match(/HTTP\/1\.1 \d{3}/g) ?? [];
  t.same(statuses, ['HTTP/1.1 200', 'HTTP/1.1 200', 'HTTP/1.1 200'], 'three answers, in order');
  t.match(reply, /"occupied":false/, 'the GET answer is the last one');
});
