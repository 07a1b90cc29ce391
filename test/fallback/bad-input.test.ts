// test-modes: once (the fallback routes' answers to bad input, the same code on every shard)
// The HTTP fallback endpoints against raw HTTP: every bad input gets a clear status and
// message, the session it names (if any) is untouched, and client-controlled resources are
// bounded. Workers 1 and 4 (RINGCAST_TEST_WORKERS): with 4, most requests are relayed to
// the session's home shard.

import t from 'tap';
import { RawReceive } from '../helpers/fallback';
import { rawRequest } from '../helpers/http';
import { APP, eventually, startServer } from '../helpers/server';

// Many real sessions and servers in one file: more than tap's default 120 s on a loaded 2-core machine.
t.setTimeout(360_000);

const OTHER = { id: 'other-id', key: 'other-key', secret: 'other-secret' };
const STRICT = { id: 'strict-id', key: 'strict-key', secret: 'strict-secret', allowed_origins: ['https://good.example'] };

let seq = 0;
/** A fresh session id (pusher-js's shape: 8 of [0-9a-v]). */
const sid = () => `t${process.pid.toString(32)}${(++seq).toString(32)}`.slice(-8).padStart(8, '0');
const base = (key: string, id: string) => `/pusher/app/${key}/123/${id}`;
const sendTo = (port: number, key: string, id: string, body: string | undefined, headers: Record<string, string> = {}) =>
  rawRequest(port, 'POST', `${base(key, id)}/xhr_send?t=1&n=1`, body, body === undefined ? { 'content-length': '0', ...headers } : headers);

t.test('bad input and bounds', async (t) => {
  const srv = await startServer({
    apps: [{ ...APP }, { ...OTHER }, { ...STRICT }],
    http_fallback: { disconnect_delay: 2 },
    websocket: { max_payload_kb: 4 },
  });
  t.teardown(() => srv.stop());
  const sdk = srv.sdk();

  /** A streaming session, established. */
  async function open(key: string = APP.key, id = sid(), headers: Record<string, string> = {}) {
    const r = new RawReceive(srv.port, `${base(key, id)}/xhr_streaming?protocol=7&client=js&version=8.6.0&t=1&n=1`, headers);
    t.teardown(() => r.abort());
    await eventually(() => r.text.includes('\n'), 5000, 'the stream to open');
    return { r, id };
  }

  t.test('a session opens with o then connection_established, as pusher-js needs', async (t) => {
    const { r } = await open();
    await eventually(() => r.frames().length > 0, 5000, 'connection_established');
    t.equal(r.status, 200);
    t.match(r.headers['content-type'], /application\/javascript/);
    t.match(r.headers['cache-control'], /no-store/);
    t.equal(r.lines()[0], 'o', 'first line o');
    t.equal(r.frames()[0].event, 'pusher:connection_established');
    t.ok(JSON.parse(r.frames()[0].data).activity_timeout > 0);
  });

  t.test('an unknown app key: o, pusher:error 4001, c[4001], end', async (t) => {
    const r = new RawReceive(srv.port, `${base('nope', sid())}/xhr_streaming`);
    await eventually(() => r.ended, 5000, 'the answer to end');
    t.same(r.lines()[0], 'o');
    t.equal(r.frames()[0].event, 'pusher:error');
    t.equal(r.frames()[0].data.code, 4001);
    t.match(r.lines().at(-1), /^c\[4001,/);
  });

  t.test('xhr_send to an unknown session: 404', async (t) => {
    const res = await sendTo(srv.port, APP.key, sid(), '[]');
    t.equal(res.status, 404);
    t.match(res.json.error, /Unknown session/);
  });

  t.test('malformed session id: 400 on receive and send', async (t) => {
    const r = await rawRequest(srv.port, 'POST', `${base(APP.key, 'bad%21id')}/xhr`, undefined, { 'content-length': '0' });
    t.equal(r.status, 400);
    t.match(r.json.error, /Malformed session id/);
    const s = await sendTo(srv.port, APP.key, 'x'.repeat(65), '[]');
    t.equal(s.status, 400);
  });

  t.test('xhr_send bodies: empty, broken JSON, not an array, a non-string element, oversized', async (t) => {
    const { id } = await open();
    const cases: [string | undefined, number, RegExp][] = [
      [undefined, 400, /Payload expected/],
      ['[', 400, /Broken JSON encoding/],
      ['{"event":"pusher:ping"}', 400, /must be a JSON array of strings/],
      ['["{}", 5]', 400, /element 1 is not a string/],
      [JSON.stringify(['x'.repeat(20_000)]), 413, /xhr_send body over \d+ bytes/],
    ];
    for (const [body, status, re] of cases) {
      const res = await sendTo(srv.port, APP.key, id, body);
      t.equal(res.status, status, `${String(body).slice(0, 30)}: ${status}`);
      t.match(res.json.error, re);
    }
    t.equal((await sendTo(srv.port, APP.key, id, '[]')).status, 204, 'the session is still there: [] is a heartbeat');
  });

  t.test('a frame over max_payload_kb closes the session with 1009, like a WebSocket', async (t) => {
    const { r, id } = await open();
    const big = JSON.stringify({ event: 'client-x', channel: 'private-a', data: 'y'.repeat(5000) });
    t.equal((await sendTo(srv.port, APP.key, id, JSON.stringify([big]))).status, 204);
    await eventually(() => r.ended, 5000, 'the stream to end');
    t.match(r.lines().at(-1), /^c\[1009,"Message too big"\]$/);
  });

  t.test('a session of another app key: the unknown-session 404 on send and receive (no oracle), nothing reaches it', async (t) => {
    const { r, id } = await open(APP.key);
    await eventually(() => r.frames().length > 0, 5000, 'connection_established');
    const sub = JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'wrong-way' } });
    const s = await sendTo(srv.port, OTHER.key, id, JSON.stringify([sub]));
    t.equal(s.status, 404);
    t.equal(s.json.error, `Unknown session ${id}`, 'the answer of an id that does not exist');
    const hijack = await rawRequest(srv.port, 'POST', `${base(OTHER.key, id)}/xhr`, undefined, { 'content-length': '0' });
    t.equal(hijack.status, 404);
    t.equal(hijack.json.error, `Unknown session ${id}`);
    // the marker: a subscribe of its own app goes through; the other one never did
    const ok = JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'right-way' } });
    t.equal((await sendTo(srv.port, APP.key, id, JSON.stringify([ok]))).status, 204);
    await eventually(() => r.frames().some((f) => f.channel === 'right-way'), 5000, 'the marker subscription');
    t.notOk(r.frames().some((f) => f.channel === 'wrong-way'), 'nothing from the other key reached the session');
    t.notOk(r.ended, 'the stream is still open');
  });

  t.test('two receiving requests at once: the older ends with c[2010], the newer gets what follows', async (t) => {
    const { r: first, id } = await open();
    const sub = JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'two' } });
    await sendTo(srv.port, APP.key, id, JSON.stringify([sub]));
    await eventually(() => first.frames().some((f) => f.channel === 'two'), 5000, 'subscribed');
    const second = new RawReceive(srv.port, `${base(APP.key, id)}/xhr_streaming`);
    t.teardown(() => second.abort());
    await eventually(() => first.ended, 5000, 'the first request to end');
    t.match(first.lines().at(-1), /^c\[2010,"Another connection still open"\]$/);
    await sdk.trigger('two', 'ev', { n: 1 });
    await eventually(() => second.frames().some((f) => f.event === 'ev'), 5000, 'the event on the second request');
    t.notOk(second.text.startsWith('o'), 'no second o on the session');
  });

  t.test('CORS: preflight and ACAO honour allowed_origins', async (t) => {
    const path = `${base(STRICT.key, sid())}/xhr_streaming?t=1&n=2`;
    const good = await rawRequest(srv.port, 'OPTIONS', path, undefined, { origin: 'https://good.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' });
    t.equal(good.status, 204);
    t.equal(good.headers['access-control-allow-origin'], 'https://good.example');
    t.match(good.headers['access-control-allow-methods'], /POST/);
    t.match(good.headers['access-control-allow-headers'], /content-type/);
    const bad = await rawRequest(srv.port, 'OPTIONS', path, undefined, { origin: 'https://evil.example', 'access-control-request-method': 'POST' });
    t.equal(bad.status, 403);
    t.match(bad.json.error, /Origin https:\/\/evil.example is not allowed/);
    t.notOk(bad.headers['access-control-allow-origin']);
    // a POST from the wrong origin (a client that skips preflight) is refused in-band with 4009
    const r = new RawReceive(srv.port, `${base(STRICT.key, sid())}/xhr_streaming`, { origin: 'https://evil.example' });
    await eventually(() => r.ended, 5000, 'the refusal');
    t.notOk(r.headers['access-control-allow-origin']);
    t.match(r.lines().at(-1), /^c\[4009,/);
    const { r: ok } = await open(STRICT.key, sid(), { origin: 'https://good.example' });
    t.equal(ok.headers['access-control-allow-origin'], 'https://good.example');
    await eventually(() => ok.frames().some((f) => f.event === 'pusher:connection_established'), 5000, 'established');
  });

  t.test('the grace period: a session survives a gap shorter than disconnect_delay, then ends', async (t) => {
    const { r, id } = await open();
    await eventually(() => r.frames().length > 0, 5000, 'connection_established');
    r.abort();
    t.equal((await sendTo(srv.port, APP.key, id, '[]')).status, 204, 'alive right after the abort');
    await eventually(async () => (await sendTo(srv.port, APP.key, id, '[]')).status === 404, 10_000, 'the session to end');
    const again = new RawReceive(srv.port, `${base(APP.key, id)}/xhr`);
    await eventually(() => again.ended, 5000, 'the answer');
    t.ok(again.text.startsWith('o\n'), 'a new session on the same id (pusher-js: "Server lost session", it reconnects)');
  });

  t.test('polling: a poll waits for a message, then answers with it', async (t) => {
    const id = sid();
    const first = new RawReceive(srv.port, `${base(APP.key, id)}/xhr`);
    await eventually(() => first.ended, 5000, 'the first poll');
    t.match(first.text, /^o\na\[/, 'o and connection_established in one answer');
    const sub = JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'polled' } });
    await sendTo(srv.port, APP.key, id, JSON.stringify([sub]));
    const second = new RawReceive(srv.port, `${base(APP.key, id)}/xhr`);
    await eventually(() => second.ended, 5000, 'the second poll');
    t.ok(second.frames().some((f) => f.event === 'pusher_internal:subscription_succeeded'));
    const third = new RawReceive(srv.port, `${base(APP.key, id)}/xhr`);
    t.notOk(third.ended, 'an empty poll is held');
    await sdk.trigger('polled', 'ev', { n: 1 });
    await eventually(() => third.ended, 5000, 'the poll to be answered');
    t.same(third.frames().map((f) => f.event), ['ev']);
  });
});

t.test('heartbeats: h on a quiet stream, a quiet poll is answered with h', async (t) => {
  const srv = await startServer({ http_fallback: { heartbeat_interval: 1 } });
  t.teardown(() => srv.stop());
  const s = new RawReceive(srv.port, `${base(APP.key, sid())}/xhr_streaming`);
  t.teardown(() => s.abort());
  await eventually(() => s.lines().includes('h'), 5000, 'a heartbeat on the stream');
  const id = sid();
  const first = new RawReceive(srv.port, `${base(APP.key, id)}/xhr`);
  await eventually(() => first.ended, 5000, 'the first poll');
  const quiet = new RawReceive(srv.port, `${base(APP.key, id)}/xhr`);
  await eventually(() => quiet.ended, 5000, 'the quiet poll to be answered');
  t.equal(quiet.text, 'h\n');
});

t.test('a flood of new sessions is bounded by http_fallback.max_sessions (503)', async (t) => {
  const srv = await startServer({ http_fallback: { max_sessions: 4 } });
  t.teardown(() => srv.stop());
  const answers = [];
  for (let i = 0; i < 40; i++) answers.push(await rawRequest(srv.port, 'POST', `${base(APP.key, sid())}/xhr`, undefined, { 'content-length': '0' }));
  const opened = answers.filter((a) => a.status === 200);
  const refused = answers.filter((a) => a.status === 503);
  t.ok(opened.length >= 1 && opened.length <= 4, `${opened.length} sessions opened, at most 4`);
  t.equal(opened.length + refused.length, 40, 'the rest answered 503');
  t.match(refused[0].json.error, /Too many HTTP fallback sessions \(http_fallback.max_sessions 4\)/);
});

t.test('a slow session: its queue is bounded; on_backpressure close ends it with 4100', async (t) => {
  const srv = await startServer({ websocket: { max_bytes: 8192, on_backpressure: 'close' }, http_fallback: { disconnect_delay: 30 } });
  t.teardown(() => srv.stop());
  const id = sid();
  const first = new RawReceive(srv.port, `${base(APP.key, id)}/xhr`);
  await eventually(() => first.ended, 5000, 'the first poll');
  await sendTo(srv.port, APP.key, id, JSON.stringify([JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'flood' } })]));
  // no receiving request now: what is published queues up in the session
  const sdk = srv.sdk();
  for (let i = 0; i < 30; i++) await sdk.trigger('flood', 'ev', { i, pad: 'z'.repeat(1000) });
  await eventually(async () => (await sendTo(srv.port, APP.key, id, '[]')).status === 404, 10_000, 'the session to be closed');
  const late = new RawReceive(srv.port, `${base(APP.key, id)}/xhr`);
  await eventually(() => late.ended, 5000, 'the answer');
  t.match(late.text, /c\[4100,"Slow consumer: send buffer full"\]\n$/, 'the next poll learns why');
});

t.test('shutdown: an open stream gets c[4200]', async (t) => {
  const srv = await startServer();
  const r = new RawReceive(srv.port, `${base(APP.key, sid())}/xhr_streaming`);
  await eventually(() => r.frames().length > 0, 5000, 'established');
  await srv.stop();
  await eventually(() => r.ended, 5000, 'the stream to end');
  t.match(r.lines().at(-1), /^c\[4200,/);
});
