// delta/streams.ts without threads: numbering, full-or-delta decisions, FIFO bounds,
// the cache-sync state and expiry.

import t from 'tap';
import { StreamTable } from '../../src/delta/streams';
import type { ChannelDelta } from '../../src/delta/settings';
import { Force } from '../../src/delta/wire';

const ch = (o: Partial<ChannelDelta> = {}): ChannelDelta => ({ enabled: null, algorithm: null, conflationKey: null, maxMessagesPerKey: 10, maxConflationKeys: 100, ...o });
const table = () => new StreamTable({ fullMessageInterval: 3, minMessageSize: 100, maxStateAgeMs: 1000 });

t.test('numbers per (event, value) from 0; full first, then deltas, a full after every 3 deltas', async (t) => {
  const s = table();
  const d = (ev: string, bytes = 500, force: Force = Force.None) => s.next('a c', ev, '', `{"event":"${ev}"}`, bytes, ch(), force, 0);
  const seq = [0, 1, 2, 3, 4, 5].map(() => d('x'));
  t.same(seq.map((x) => x.seq), [0, 1, 2, 3, 4, 5]);
  t.same(seq.map((x) => x.base?.seq ?? null), [null, 0, 1, 2, null, 4], 'full at 0 and after 3 deltas');
  t.equal(d('y').seq, 0, 'another event: its own stream');
  t.equal(d('x', 50).base, null, 'below min_message_size: full');
  t.equal(d('x', 50, Force.Delta).base?.seq, 6, '"delta": true: a delta below the minimum');
  t.equal(d('x', 500, Force.Full).base, null, '"delta": false: full');
});

t.test('max_messages_per_key evicts bases FIFO; max_conflation_keys evicts groups and reports their streams', async (t) => {
  const s = table();
  const c = ch({ maxMessagesPerKey: 2, maxConflationKeys: 2 });
  const n = (ev: string, v: string) => s.next('a c', ev, v, `{"event":"${ev}","v":"${v}"}`, 500, c, Force.None, 0);
  n('a', 'K');
  n('b', 'K');
  n('c', 'K'); // evicts a's only message
  t.equal(n('a', 'K').base, null, "a's base was evicted: full");
  const first = n('x', 'L');
  const third = n('x', 'M'); // a third group: K (oldest) goes
  t.ok(third.dropped.length >= 3, `K's streams are dropped (${third.dropped.join(',')})`);
  t.equal(n('a', 'K').seq, 0, 'K starts again at 0');
  t.ok(first.stream > 0);
  const st = s.states('a c');
  t.same(Object.keys(st.states).sort(), ['K', 'M'], 'two groups kept');
  t.same(st.states.M.map((e) => e.seq), [0], 'each stream\'s latest message');
  t.equal(st.streams.length, 2);
});

t.test('state older than max_state_age_secs goes', async (t) => {
  const s = table();
  s.next('a c', 'x', '', '{}', 500, ch(), Force.None, 0);
  s.sweep(500);
  t.equal(s.next('a c', 'x', '', '{}', 500, ch(), Force.None, 600).seq, 1, 'still there at 0.6 s');
  s.sweep(1700);
  const d = s.next('a c', 'x', '', '{}', 500, ch(), Force.None, 1800);
  t.equal(d.seq, 0, 'swept: restarts at 0');
  t.equal(d.base, null, 'in full');
  t.not(d.stream, 1, 'a new stream id (the shards forget the old one by their own sweep)');
});

t.test('cluster positions (cluster_coordination): the seq is the position, full on every (interval + 1)-th one', async (t) => {
  const s = table();
  const d = (p: number | null, bytes = 500, force: Force = Force.None) => s.next('a c', 'x', '', `{"p":${p}}`, bytes, ch(), force, 0, p);
  // a node that starts at position 6: its first message is full (no base), then it aligns
  const got = [6, 7, 8, 9, 10, 11, 12].map((p) => d(p));
  t.same(got.map((x) => x.seq), [6, 7, 8, 9, 10, 11, 12], 'seq = position');
  t.same(got.map((x) => x.base?.seq ?? null), [null, 6, null, 8, 9, 10, null], 'full: no base (6), then 8 and 12 (multiples of 4)');
  t.equal(d(13, 50).base, null, 'below min_message_size: full');
  t.equal(d(14, 500, Force.Full).base, null, '"delta": false: full');
  t.equal(d(15, 500, Force.Delta).base?.seq, 14, '"delta": true: a delta');
  t.equal(d(2).base, null, 'a position not after the base (the numbering restarted): full');
  t.equal(d(3).base?.seq, 2, 'and deltas again from there');
  const local = d(null);
  t.equal(local.seq, 4, 'no position (a fallback): numbered locally after the last one');
  t.equal(local.base?.seq, 3, 'and decided locally');
});
