// fallback/session.ts and fallback/frames.ts without threads or sockets: the session's
// invariants (one `o`, nothing written twice, no write past pusher-js's 256 KiB reopen
// point, a poll ended by its first write, nothing written under backpressure), the config
// keys' errors and the unknown-session throttle.

import t from 'tap';
import { loadConfig } from '../../src/config';
import { nativeFanout } from '../../src/channels/fanout';
import { CLIENT_STREAM_LIMIT, homeShard, parseSendBody } from '../../src/fallback/frames';
import { createSessionTopics } from '../../src/fallback/hub';
import { Session, type Receiver } from '../../src/fallback/session';
import { createUnknownThrottle } from '../../src/fallback/throttle';
import { newSocketData } from '../../src/ws/connection';

const tick = () => new Promise((r) => setImmediate(r));

function session(maxQueueBytes = 1 << 24) {
  const topics = createSessionTopics(nativeFanout({ publish: () => true, numSubscribers: () => 0 }));
  const closed: number[] = [];
  const s = new Session('abc', 'key', { ip: '127.0.0.1', ua: '' }, newSocketData('1.1', null, null), {
    handlers: { open() {}, message() {}, close: () => void closed.push(1) },
    topics, maxQueueBytes, closeOnOverflow: false, onClosed() {}, now: Date.now,
  });
  return { s, topics, closed };
}

function receiver(streaming: boolean) {
  const r = { streaming, text: '', ended: false, write(x: string) { r.text += x; }, end(x: string) { r.text += x; r.ended = true; } };
  return r as Receiver & { text: string; ended: boolean };
}

t.test('a stream is not written past the 256 KiB reopen point; the rest goes to the reopened stream, once', async (t) => {
  const { s } = session();
  const a = receiver(true);
  s.attach(a);
  const frame = JSON.stringify({ event: 'e', data: 'x'.repeat(1000) });
  let n = 0;
  while (a.text.length <= CLIENT_STREAM_LIMIT) {
    s.send(JSON.stringify({ event: 'e', data: String(n++) + 'x'.repeat(1000) }));
    await tick();
  }
  const atLimit = a.text.length;
  for (let i = 0; i < 10; i++) s.send(frame);
  await tick();
  t.equal(a.text.length, atLimit, 'nothing written after the limit');
  t.equal(s.getBufferedAmount() > 0, true, 'queued meanwhile');
  s.detach(a); // the client aborted
  const b = receiver(true);
  s.attach(b);
  await tick();
  t.notOk(b.text.startsWith('o'), 'no second o');
  t.equal(b.text.split('\n').filter(Boolean).length, 1, 'the queue in one a line');
  t.equal(JSON.parse(b.text.slice(1)).length, 10, 'the ten queued frames');
  t.equal(a.text.split('\n').filter((l) => l === 'o').length, 1, 'o once on the first stream');
});

t.test('a poll ends at its first write; a second receiver ends the first with c[2010]', async (t) => {
  const { s } = session();
  const p = receiver(false);
  s.attach(p);
  await tick();
  t.equal(p.text, 'o\n');
  t.ok(p.ended);
  const q1 = receiver(false);
  s.attach(q1);
  const q2 = receiver(false);
  s.attach(q2);
  t.equal(q1.text, 'c[2010,"Another connection still open"]\n');
  s.send('{"event":"x"}');
  await tick();
  t.equal(q2.text, 'a["{\\"event\\":\\"x\\"}"]\n');
});

t.test('the queue is bounded: past maxQueueBytes a frame is dropped (2)', async (t) => {
  const { s } = session(100);
  t.equal(s.send('x'.repeat(50)), 0, 'queued without a receiver');
  t.equal(s.send('y'.repeat(60)), 2, 'dropped over the bound');
  t.ok(s.getBufferedAmount() <= 100);
});

t.test('end writes the queue and c[code]; the close handler runs once; a later receiver gets the c line', async (t) => {
  const { s, closed } = session();
  s.send('{"event":"last"}');
  s.end(4200, 'Server shutting down');
  s.end(4200, 'again');
  t.same(closed, [1]);
  const late = receiver(false);
  s.attach(late);
  t.equal(late.text, 'o\na["{\\"event\\":\\"last\\"}"]\nc[4200,"Server shutting down"]\n', 'the queued frame, then the close');
});

t.test('xhr_send bodies and the home shard', async (t) => {
  t.same(parseSendBody('["a","b"]'), { frames: ['a', 'b'] });
  t.same(parseSendBody('[]'), { frames: [] });
  t.match(parseSendBody(''), { status: 400, error: /Payload expected/ });
  t.match(parseSendBody('{'), { status: 400, error: /Broken JSON/ });
  t.match(parseSendBody('"x"'), { status: 400, error: /JSON array of strings/ });
  t.match(parseSendBody('["a",{}]'), { status: 400, error: /element 1 is not a string/ });
  const counts = [0, 0, 0, 0];
  for (let i = 0; i < 4000; i++) counts[homeShard(Math.random().toString(32).slice(2, 10), 4)]++;
  for (const c of counts) t.ok(c > 800 && c < 1200, `sessions spread over the shards: ${counts.join(', ')}`);
  t.equal(homeShard('k3v0a9tq', 4), homeShard('k3v0a9tq', 4), 'the same id, the same shard');
});

t.test('http_fallback config errors name the key and the rule', async (t) => {
  const load = (http_fallback: Record<string, unknown>) => loadConfig({ env: {}, overrides: { apps: [{ id: 'a', key: 'k', secret: 's' }], http_fallback } });
  t.throws(() => load({ path: 'pusher' }), /http_fallback.path must be a path like \/pusher/);
  t.throws(() => load({ path: '/pusher/' }), /http_fallback.path must be a path like \/pusher/);
  t.throws(() => load({ heartbeat_interval: 30 }), /http_fallback.heartbeat_interval must be an integer between 1 and 29/);
  t.throws(() => load({ disconnect_delay: 0 }), /http_fallback.disconnect_delay must be an integer between 1 and 3600/);
  t.throws(() => load({ max_sessions: 0 }), /http_fallback.max_sessions must be a positive integer/);
  t.equal(load({}).http_fallback.path, '/pusher');
});

t.test('a stream under backpressure is not written to: frames wait in the queue (its bound applies) until it is writable', async (t) => {
  const { s } = session(4000);
  let ready = true;
  let drained: (() => void) | null = null;
  const a = Object.assign(receiver(true), { ready: () => ready, whenReady: (cb: () => void) => { drained = cb; } });
  s.attach(a);
  await tick();
  ready = false; // uWS reported backpressure on the last write
  const frame = JSON.stringify({ event: 'e', data: 'x'.repeat(1000) });
  const before = a.text.length;
  s.send(frame);
  s.send(frame);
  await tick();
  t.equal(a.text.length, before, 'nothing written while the client has not read');
  t.ok(s.getBufferedAmount() > 2000, 'the frames count as the session\'s buffered amount (the slow-consumer watch sees them)');
  t.equal(s.send(frame), 1, 'queued');
  t.equal(s.send(frame), 2, 'past the queue\'s bound: dropped, as uWS drops for a WebSocket');
  s.tick(Date.now() + 60_000, 1000, 60_000);
  t.equal(a.text.length, before, 'no heartbeat either');
  ready = true;
  drained!();
  await tick();
  t.equal(JSON.parse(a.text.slice(before + 1)).length, 3, 'the three queued frames once writable, in one a line');
  t.equal(s.getBufferedAmount(), 0);
});

t.test('the unknown-session throttle: per address, per window, the table bounded', async (t) => {
  const th = createUnknownThrottle(3, 1000, 4);
  for (let i = 0; i < 3; i++) {
    t.equal(th.blocked('a', 0), 0);
    th.missed('a', 0);
  }
  t.equal(th.blocked('a', 10), 1, 'past 3 answers: wait (whole seconds, at least 1)');
  t.equal(th.blocked('b', 10), 0, 'another address is not throttled');
  t.equal(th.blocked('a', 1000), 0, 'a new window');
  for (const ip of ['b', 'c', 'd', 'e', 'f', 'g']) th.missed(ip, 1000);
  t.equal(th.size, 4, 'at most 4 addresses kept: the oldest windows go first');
  th.missed('g', 1001);
  th.missed('g', 1002);
  t.equal(th.blocked('g', 1003), 1, 'a kept address is still counted');
  t.equal(th.blocked('b', 1003), 0, 'an evicted one starts again');
});
