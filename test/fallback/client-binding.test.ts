// An HTTP fallback session answers only the client that opened it: its client address
// (127.0.0.2 is another client on loopback) and User-Agent. Another client naming the id
// gets the answer of an id that does not exist (xhr_send and receive alike), nothing it
// sends reaches the session, and nothing of the session reaches it; those answers are
// throttled per address. Hooks see the session's address, origin and user agent.
// Workers 1 and 4 (RINGCAST_TEST_WORKERS): with 4, most requests are relayed to the
// session's home shard, and the answers are the same.

import http from 'node:http';
import t from 'tap';
import { startHookBackend } from '../helpers/hook-backend';
import { RawReceive } from '../helpers/fallback';
import { readResponse, type RawResponse } from '../helpers/http';
import { APP, eventually, startServer, WORKERS } from '../helpers/server';
import { UNKNOWN_PER_WINDOW } from '../../src/fallback/throttle';

t.setTimeout(180_000);

let seq = 0;
const sid = () => `b${process.pid.toString(32)}${(++seq).toString(32)}`.slice(-8).padStart(8, '0');
const base = (id: string) => `/pusher/app/${APP.key}/123/${id}`;
const UA = 'binding-test/1.0';

/** A POST from `from` (source address) with `ua`. */
function post(port: number, path: string, body: string, from: string, ua = UA): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1', port, method: 'POST', path, agent: false, localAddress: from,
      headers: { connection: 'close', 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), 'user-agent': ua },
    }, (res) => readResponse(res).then(resolve, reject));
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error(`POST ${path} timed out`)));
    req.end(body);
  });
}

const send = (port: number, id: string, frames: unknown[], from: string, ua = UA) =>
  post(port, `${base(id)}/xhr_send?t=1&n=1`, JSON.stringify(frames.map((f) => JSON.stringify(f))), from, ua);

t.test(`sessions bound to their client, workers ${WORKERS}`, async (t) => {
  const backend = await startHookBackend();
  const srv = await startServer({
    apps: [{ ...APP, hooks: { url: backend.url, timeout_ms: 2000, on_failure: 'deny', subscribe: { enabled: true, channels: ['hooked-*'] } } }],
    http_fallback: { disconnect_delay: 2 },
  });
  t.teardown(async () => {
    await srv.stop();
    await backend.close();
  });

  async function open(id = sid()) {
    const r = new RawReceive(srv.port, `${base(id)}/xhr_streaming?t=1&n=1`, { 'user-agent': UA, origin: 'https://page.example' }, '127.0.0.1');
    t.teardown(() => r.abort());
    await eventually(() => r.frames().length > 0, 5000, 'connection_established');
    return { r, id };
  }

  t.test('another address or user agent gets the unknown-session answer; nothing crosses', async (t) => {
    const { r, id } = await open();
    const sub = (channel: string) => ({ event: 'pusher:subscribe', data: { channel } });
    for (const [from, ua] of [['127.0.0.2', UA], ['127.0.0.1', 'other-agent/2.0']]) {
      const s = await send(srv.port, id, [sub(`stolen-${from}`)], from, ua);
      t.equal(s.status, 404, `xhr_send from ${from} ${ua}: 404`);
      t.equal(s.json.error, `Unknown session ${id}`, 'the answer of an id that does not exist');
      const poll = await post(srv.port, `${base(id)}/xhr?t=1&n=2`, '', from, ua);
      t.equal(poll.status, 404, `poll from ${from} ${ua}: 404`);
      t.equal(poll.json.error, `Unknown session ${id}`);
    }
    // an id that does not exist: the same answer
    const none = sid();
    const s = await send(srv.port, none, [], '127.0.0.2');
    t.same([s.status, s.json.error], [404, `Unknown session ${none}`]);

    // the marker: the owner's own subscribe and an event on it arrive; the strangers' subscribes never did
    t.equal((await send(srv.port, id, [sub('mine')], '127.0.0.1')).status, 204);
    await eventually(() => r.frames().some((f) => f.channel === 'mine'), 5000, 'the owner\'s subscription');
    await srv.sdk().trigger('mine', 'ev', { n: 1 });
    await eventually(() => r.frames().some((f) => f.event === 'ev'), 5000, 'the event');
    t.notOk(r.frames().some((f) => String(f.channel).startsWith('stolen-')), 'nothing sent by another client reached the session');
    t.notOk(r.ended, 'the owner\'s stream is still open');
  });

  t.test('a hook sees the session\'s address, origin and user agent', async (t) => {
    const { r, id } = await open();
    t.equal((await send(srv.port, id, [{ event: 'pusher:subscribe', data: { channel: 'hooked-a' } }], '127.0.0.1')).status, 204);
    await eventually(() => r.frames().some((f) => f.channel === 'hooked-a'), 5000, 'the hooked subscription');
    const call = backend.calls.find((c) => c.body.channel === 'hooked-a');
    t.same(call?.body.connection, { ip: '127.0.0.1', origin: 'https://page.example', user_agent: UA });
  });

  t.test(`unknown-session answers are throttled per address (${UNKNOWN_PER_WINDOW} a minute per shard)`, async (t) => {
    const from = '127.0.0.3';
    let throttled: RawResponse | null = null;
    let misses = 0;
    // each shard counts its own: with N shards the (N × limit + 1)th answer is a 429 at the latest
    for (let i = 0; i < WORKERS * UNKNOWN_PER_WINDOW + 1 && throttled === null; i++) {
      const res = await send(srv.port, sid(), [], from);
      if (res.status === 429) throttled = res;
      else if (res.status === 404) misses++;
      else t.fail(`unexpected ${res.status}`);
    }
    t.ok(throttled !== null, `a 429 after ${misses} unknown-session answers`);
    t.ok(misses >= UNKNOWN_PER_WINDOW, 'not before the limit');
    t.match(throttled!.json.error, /Too many requests for unknown HTTP sessions from this address: retry in \d+ s/);
    // another address is not throttled, and neither is the owner of a real session
    t.equal((await send(srv.port, sid(), [], '127.0.0.4')).status, 404, 'another address still gets 404');
    const { id } = await open();
    t.equal((await send(srv.port, id, [], '127.0.0.1')).status, 204, 'a real session still answers its client');
  });
});
