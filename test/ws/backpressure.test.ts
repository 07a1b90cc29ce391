// The slow-consumer watch (src/ws/backpressure.ts) against fake uWS sockets: which sockets
// it looks at, when a socket is full, drop (mute, count, unmute) and close (4100), and
// the counts it gives the metrics sink; filtered and delta subscriptions (paused in their
// stage). End to end: test/faults/slow-consumer.test.ts, slow-delta-filtered.test.ts.

import t from 'tap';
import { Backpressure, type BackpressureAction } from '../../src/ws/backpressure';
import type { BoundCounter, BoundGauge, Labels, MetricsSink } from '../../src/metrics/types';
import type { Socket, SocketData, Subscription } from '../../src/ws/types';
import { topicOf } from '../../src/channels/topic';
import { createFilteredSubscriptions } from '../../src/channels/filtered';
import { compileFilter } from '../../src/filter/compile';
import { parseFilter } from '../../src/filter/parse';
import { TAGS_ALL } from '../../src/bus/messages';
import { metersFor } from '../../src/metrics/meters';
import { noMetrics } from '../../src/metrics/types';
import type { DeltaShard } from '../../src/delta/shard';

/** A sink that adds up counters by name{labels}. */
function recordingSink(): MetricsSink & { counts: Map<string, number> } {
  const counts = new Map<string, number>();
  const key = (name: string, labels?: Labels) => name + (labels ? JSON.stringify(labels) : '');
  const add = (k: string, by = 1) => counts.set(k, (counts.get(k) ?? 0) + by);
  const gauge: BoundGauge = { set() {}, inc() {}, dec() {} };
  return {
    counts,
    inc: (name, labels, by) => add(key(name, labels), by),
    set() {}, add() {}, observe() {}, remove() {},
    counter: (name, labels): BoundCounter => ({ inc: (by?: number) => add(key(name, labels), by) }),
    gauge: () => gauge,
  };
}

const DROPPED = 'websocket_messages_dropped_total';
const FULL_DROP = 'websocket_buffer_full_total{"action":"drop"}';
const FULL_CLOSE = 'websocket_buffer_full_total{"action":"close"}';

class FakeSocket {
  buffered = 0;
  readonly topics = new Set<string>();
  ended: number | null = null;
  constructor(readonly d: SocketData) {}
  getUserData() { return this.d; }
  getBufferedAmount() {
    if (this.d.closed) throw new Error('Invalid access of closed uWS.WebSocket');
    return this.buffered;
  }
  subscribe(t: string) { this.topics.add(t); return true; }
  unsubscribe(t: string) { return this.topics.delete(t); }
  end(code: number) { this.ended = code; this.d.closed = true; }
}

let seq = 0;
let sockets = new Map<string, Socket>();
function socket(channels: string[], joined = true): { ws: FakeSocket; sock: Socket } {
  const subs = new Map<string, Subscription>();
  for (const c of channels) subs.set(c, { type: 'public', userKey: null, userId: null, joined });
  const d = { id: `1.${++seq}`, app: { id: 'app' }, closed: false, channels: subs } as unknown as SocketData;
  const ws = new FakeSocket(d);
  for (const c of channels) if (joined) ws.subscribe(topicOf('app', c));
  sockets.set(d.id, ws as unknown as Socket);
  return { ws, sock: ws as unknown as Socket };
}

/** The scan gap's clock: moves only when a test moves it (a real clock made test 1 flaky). */
const clock = { ms: 1_000, step: 0 };
function now() {
  clock.ms += clock.step;
  return clock.ms;
}

function setup(action: BackpressureAction, maxBytes = 10_000, maxMessages = 1_000_000) {
  const metrics = recordingSink();
  sockets = new Map();
  clock.step = 0;
  const bp = new Backpressure({ maxBytes, maxMessages, action, metrics, sockets, now });
  return { bp, metrics };
}

const A = topicOf('app', 'a');
const B = topicOf('app', 'b');

t.test('sockets with nothing queued are read by scans only, not per publish', async (t) => {
  const { bp } = setup('drop', 10_000);
  const { ws, sock } = socket(['a']);
  let reads = 0;
  const read = ws.getBufferedAmount.bind(ws);
  ws.getBufferedAmount = () => { reads++; return read(); };
  bp.sweep(sock, ws.d);
  t.equal(reads, 1, 'one read per sweep');
  for (let i = 0; i < 49; i++) bp.beforePublish(A, 100, '');
  t.equal(reads, 1, 'no read per publish while nothing lags');
  bp.beforePublish(A, 100, '');
  t.equal(reads, 2, 'a scan once max_bytes / 2 was published');
  for (let i = 0; i < 100; i++) bp.beforePublish(A, 100, '');
  clock.ms += 19.9;
  bp.beforePublish(A, 5_000, '');
  t.equal(reads, 2, 'at most one scan per 20 ms');
  clock.ms += 0.1;
  ws.buffered = 3;
  bp.beforePublish(A, 100, '');
  t.equal(reads, 4, 'the bytes published meanwhile count: a scan, then the check of a lagging socket');
  t.same(bp.stats(), { lagging: 1, muted: 0 }, 'the scan flagged the socket with bytes queued');
});

t.test('a slow scan spaces the next ones out (at most 2% of the time in scans)', async (t) => {
  const { bp } = setup('drop', 10_000);
  const { ws } = socket(['a']);
  let reads = 0;
  const read = ws.getBufferedAmount.bind(ws);
  ws.getBufferedAmount = () => { reads++; return read(); };
  clock.step = 0.5; // each clock read moves 0.5 ms: the scan takes 0.5 ms → gap 25 ms
  bp.beforePublish(A, 5_000, '');
  t.equal(reads, 1, 'first scan');
  clock.step = 0;
  clock.ms += 24;
  bp.beforePublish(A, 5_000, '');
  t.equal(reads, 1, 'not 20 ms but 25 ms after a scan that took 0.5 ms');
  clock.ms += 0.5;
  bp.beforePublish(A, 5_000, '');
  t.equal(reads, 2, 'scanned again once the longer gap passed');
});

t.test('drop: flagged at the sweep, muted when the next message would pass the limit, every skipped message counted, unmuted at half', async (t) => {
  const { bp, metrics } = setup('drop', 10_000);
  const slow = socket(['a', 'b']);
  const fast = socket(['a']);
  slow.ws.buffered = 1;
  bp.sweep(slow.sock, slow.ws.d);
  bp.sweep(fast.sock, fast.ws.d);
  t.same(bp.stats(), { lagging: 1, muted: 0 }, 'only the socket with queued bytes lags');

  slow.ws.buffered = 9_950;
  bp.beforePublish(A, 40, ''); // 9 990 ≤ 10 000: goes out
  t.ok(slow.ws.topics.has(A));
  bp.beforePublish(A, 100, ''); // 10 050 > 10 000: full
  t.notOk(slow.ws.topics.has(A), 'unsubscribed natively before uWS publishes');
  t.notOk(slow.ws.topics.has(B));
  t.ok(fast.ws.topics.has(A), 'others untouched');
  t.same(bp.stats(), { lagging: 1, muted: 1 });
  bp.beforePublish(A, 100, '');
  bp.beforePublish(B, 100, '');
  bp.beforePublish(topicOf('app', 'other'), 100, '');
  bp.beforePublish(A, 100, slow.ws.d.id); // excluded sender: not a drop
  t.equal(metrics.counts.get(FULL_DROP), 1, 'one buffer-full episode');

  slow.ws.buffered = 6_000;
  bp.drained(slow.sock);
  t.same(bp.stats(), { lagging: 1, muted: 1 }, 'still over half the limit');
  slow.ws.buffered = 5_000;
  bp.drained(slow.sock);
  t.same(bp.stats(), { lagging: 1, muted: 0 }, 'unmuted at half the limit');
  t.ok(slow.ws.topics.has(A) && slow.ws.topics.has(B), 'subscribed again');
  t.equal(metrics.counts.get(DROPPED), 3, 'three messages skipped (a, a, b), counted when unmuted');

  slow.ws.buffered = 0;
  bp.drained(slow.sock);
  t.same(bp.stats(), { lagging: 0, muted: 0 }, 'forgotten once its queue is empty');
});

t.test('max_messages: the limit is max_messages × the average message size', async (t) => {
  const { bp } = setup('drop', 1_000_000, 10);
  for (let i = 0; i < 200; i++) bp.beforePublish(topicOf('app', 'x'), 100, '');
  t.equal(Math.round(bp.limit()), 1_000, '10 messages of 100 bytes');
  const slow = socket(['a']);
  slow.ws.buffered = 850;
  bp.sweep(slow.sock, slow.ws.d);
  bp.beforePublish(A, 100, '');
  t.same(bp.stats().muted, 0, '9.5 messages queued');
  slow.ws.buffered = 950;
  bp.beforePublish(A, 100, '');
  t.same(bp.stats().muted, 1, 'the 11th does not fit');
});

t.test('the sweep catches a socket already over the limit, and follows its subscriptions', async (t) => {
  const { bp, metrics } = setup('drop', 10_000);
  const slow = socket(['a']);
  slow.ws.buffered = 20_000;
  bp.sweep(slow.sock, slow.ws.d);
  t.same(bp.stats(), { lagging: 1, muted: 1 });
  t.equal(metrics.counts.get(FULL_DROP), 1);
  // subscribed to b while muted (subscribe.ts subscribes natively): the next sweep mutes it too
  slow.ws.d.channels.set('b', { type: 'public', userKey: null, userId: null, joined: true });
  slow.ws.subscribe(B);
  bp.sweep(slow.sock, slow.ws.d);
  t.notOk(slow.ws.topics.has(B));
  bp.beforePublish(B, 10, '');
  // left a while muted: not subscribed again
  slow.ws.d.channels.delete('a');
  slow.ws.buffered = 0;
  bp.sweep(slow.sock, slow.ws.d);
  t.same([...slow.ws.topics], [B]);
  t.equal(metrics.counts.get(DROPPED), 1);
  bp.sweep(slow.sock, slow.ws.d);
  t.same(bp.stats(), { lagging: 0, muted: 0 });
});

t.test('presence subscriptions not joined yet are left alone', async (t) => {
  const { bp } = setup('drop', 10_000);
  const slow = socket(['presence-a'], false);
  slow.ws.buffered = 20_000;
  bp.sweep(slow.sock, slow.ws.d);
  slow.ws.buffered = 0;
  bp.sweep(slow.sock, slow.ws.d);
  t.same([...slow.ws.topics], [], 'not subscribed by the unmute');
});

t.test('close: closed with 4100 on the next turn, counted once, forgotten on close', async (t) => {
  const { bp, metrics } = setup('close', 10_000);
  const slow = socket(['a']);
  slow.ws.buffered = 5;
  bp.sweep(slow.sock, slow.ws.d);
  slow.ws.buffered = 10_000;
  bp.beforePublish(A, 100, '');
  t.equal(slow.ws.ended, null, 'not inside the publish');
  t.notOk(slow.ws.topics.has(A), 'but skipped by it');
  bp.beforePublish(A, 100, '');
  await new Promise((r) => setImmediate(r));
  t.equal(slow.ws.ended, 4100);
  bp.closed(slow.ws.d);
  t.same(bp.stats(), { lagging: 0, muted: 0 });
  t.equal(metrics.counts.get(FULL_CLOSE), 1);
  t.equal(metrics.counts.get(DROPPED), 2);
  bp.beforePublish(A, 100, ''); // nothing left to touch (a closed socket would throw)
});

t.test('a socket closed while lagging is forgotten', async (t) => {
  const { bp } = setup('drop', 10_000);
  const slow = socket(['a']);
  slow.ws.buffered = 5;
  bp.sweep(slow.sock, slow.ws.d);
  slow.ws.d.closed = true;
  bp.closed(slow.ws.d);
  bp.beforePublish(A, 100, '');
  t.same(bp.stats(), { lagging: 0, muted: 0 });
});

t.test('a filtered subscription: paused in the filter stage, a drop only for events its filter matches', async (t) => {
  const { bp, metrics } = setup('drop', 10_000);
  const filters = createFilteredSubscriptions<Socket>({ uws: null, sockets, meters: metersFor(noMetrics) });
  bp.attach({ filters, delta: null });
  const slow = socket([]);
  const parsed = parseFilter({ key: 'region', cmp: 'eq', val: 'eu' }, 10);
  if (!parsed.ok) throw new Error(parsed.error);
  const sub: Subscription = { type: 'public', userKey: null, userId: null, joined: true };
  sub.tagFilter = compileFilter(parsed.filter);
  sub.filter = filters.add(A, slow.sock, sub.tagFilter);
  slow.ws.d.channels.set('a', sub);
  const native = [...slow.ws.topics];
  t.equal(native.length, 2, 'on its pair topic and the channel\'s all-filtered topic, not on the channel topic');
  t.notOk(slow.ws.topics.has(A));
  slow.ws.buffered = 9_990;
  bp.sweep(slow.sock, slow.ws.d);
  bp.beforePublish(A, 100, '', '{"region":"us"}');
  bp.beforePublish(A, 100, '', null);
  t.same(bp.stats().muted, 0, 'events it would not get do not fill it');
  bp.beforePublish(A, 100, '', '{"region":"eu"}');
  t.same(bp.stats().muted, 1, 'a matching one does: full');
  t.same([...slow.ws.topics], [], 'off its filter topics');
  bp.beforePublish(A, 100, '', '{"region":"eu","x":"1"}'); // dropped
  bp.beforePublish(A, 100, '', '{"region":"us"}'); // not for it
  bp.beforePublish(A, 100, '', null); // untagged: not for it
  bp.beforePublish(A, 100, '', TAGS_ALL); // subscription count: for every filtered socket
  slow.ws.buffered = 0;
  bp.drained(slow.sock);
  t.same([...slow.ws.topics].sort(), native.sort(), 'back on its filter topics');
  t.equal(metrics.counts.get(DROPPED), 3, 'three drops: the matching event that filled it, the next matching one, the count');
  filters.remove(A, slow.sock, sub.filter);
  t.same([...slow.ws.topics], []);
});

t.test('a delta subscription: registered under the delta topic, paused and resumed in the delta shard', async (t) => {
  const { bp, metrics } = setup('drop', 10_000);
  const calls: string[] = [];
  const delta = {
    pause: (_ws: Socket, _d: SocketData, channel: string) => calls.push(`pause ${channel}`),
    resume: (_ws: Socket, _d: SocketData, channel: string) => calls.push(`resume ${channel}`),
  } as unknown as DeltaShard<Socket>;
  bp.attach({ filters: null, delta });
  const slow = socket(['a', 'b']);
  slow.ws.unsubscribe(A); // 'a' takes deltas: on the delta topics, not the plain one
  slow.ws.d.delta = { algo: 'fossil', channels: new Map([['a', 'fossil']]), filtered: new Map() };
  slow.ws.buffered = 9_990;
  bp.sweep(slow.sock, slow.ws.d);
  bp.beforePublish(A, 100, '');
  t.same(bp.stats().muted, 0, 'the plain frame of a delta channel is not what a delta socket gets');
  bp.check(A + '\x01', 100, '');
  t.same(bp.stats().muted, 1, 'the delta shard\'s check: full');
  t.same(calls, ['pause a'], 'paused in the delta shard');
  t.notOk(slow.ws.topics.has(B), 'its plain channel muted as ever');
  bp.check(A + '\x01', 100, '');
  bp.beforePublish(B, 100, '');
  slow.ws.buffered = 0;
  bp.drained(slow.sock);
  t.same(calls, ['pause a', 'resume a']);
  t.ok(slow.ws.topics.has(B));
  t.equal(metrics.counts.get(DROPPED), 3, 'the delta frame that filled it, one more, one on b');
});
