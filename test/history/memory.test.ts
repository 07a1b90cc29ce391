// The memory history store (history/memory.ts) on its own: numbering, size and ttl per
// channel, the byte budget evicting the channels written least recently (counted), and the
// numbering outliving the messages (meta_ttl, subscribers).
import t from 'tap';
import { MemoryHistoryStore } from '../../src/history/memory';

const S = { size: 3, ttl: 10, rewind: 0 };

t.test('numbering, size, ttl, since, last, page', async (t) => {
  const s = new MemoryHistoryStore({ budgetBytes: 1 << 20, metaTtlMs: 60_000 });
  const p0 = s.position('a', 'c', 0);
  t.equal(p0.serial, 0, 'an empty channel has an epoch and serial 0');
  for (let i = 1; i <= 5; i++) t.same(s.append('a', 'c', S, `m${i}`, i), { epoch: p0.epoch, serial: i });
  t.same(s.last('a', 'c', 10, 5).map((m) => m.message), ['m3', 'm4', 'm5'], 'size 3 keeps the last 3');
  t.same(s.since('a', 'c', 2, 5)!.map((m) => m.serial), [3, 4, 5]);
  t.equal(s.since('a', 'c', 1, 5), null, 'serial 2 is gone: null');
  t.same(s.since('a', 'c', 5, 5), []);
  t.same(s.page('a', 'c', { limit: 2, direction: 'backwards', after: 0, before: Infinity }, 5), { items: [s.last('a', 'c', 1, 5)[0], s.last('a', 'c', 2, 5)[0]], more: true });
  t.same(s.page('a', 'c', { limit: 5, direction: 'forwards', after: 3, before: Infinity }, 5).items.map((m) => m.serial), [4, 5]);
  // ttl 10 s: at t = 10_004 ms messages 1…4 have expired, 5 (t = 5) has too by 10_005
  t.same(s.last('a', 'c', 10, 10_004).map((m) => m.serial), [5]);
  t.same(s.last('a', 'c', 10, 10_005), []);
  t.same(s.append('a', 'c', S, 'm6', 10_006), { epoch: p0.epoch, serial: 6 }, 'the numbering outlives the messages');
  s.rollback('a', 'c');
  t.same(s.append('a', 'c', S, 'm6b', 10_007).serial, 6, 'a rolled-back serial is given again');
});

t.test('meta_ttl: kept while subscribed, then a new epoch', async (t) => {
  const s = new MemoryHistoryStore({ budgetBytes: 1 << 20, metaTtlMs: 1000 });
  const e1 = s.append('a', 'c', { ...S, ttl: 1 }, 'x', 0).epoch;
  s.sweep(5000, () => true);
  t.equal(s.position('a', 'c', 5000).epoch, e1, 'subscribers keep the numbering');
  s.sweep(7000, () => false);
  const p = s.position('a', 'c', 7000);
  t.not(p.epoch, e1, 'idle for meta_ttl without subscribers: numbering gone, new epoch');
  t.equal(p.serial, 0);
});

t.test('memory budget: the channels written least recently go first, counted', async (t) => {
  const evicted: [string, number][] = [];
  const msg = 'x'.repeat(100); // 2 × 100 + 64 = 264 bytes counted
  const s = new MemoryHistoryStore({ budgetBytes: 264 * 10, metaTtlMs: 60_000, events: { evicted: (app, n) => evicted.push([app, n]) } });
  const big = { size: 100, ttl: 100, rewind: 0 };
  for (let i = 0; i < 4; i++) s.append('a', 'old', big, msg, 1);
  for (let i = 0; i < 4; i++) s.append('b', 'mid', big, msg, 2);
  for (let i = 0; i < 3; i++) s.append('a', 'new', big, msg, 3);
  t.same(evicted, [['a', 4]], 'over budget: the oldest-written channel lost its messages');
  t.equal(s.stats().bytes, 264 * 7 + 3 * 200 + 2 * 'a old'.length * 3, 'messages and the 3 entries (200 bytes and the name each)');
  t.same(s.last('b', 'mid', 10, 3).length, 4, 'the others are whole');
  t.equal(s.append('a', 'old', big, msg, 4).serial, 5, 'its numbering goes on');
  // a single channel over the whole budget keeps its newest messages within it
  for (let i = 0; i < 20; i++) s.append('c', 'huge', big, msg, 5);
  t.ok(s.stats().bytes <= 264 * 10, `within budget (${s.stats().bytes})`);
  t.ok(s.last('c', 'huge', 100, 5).length >= 1);
});

t.test('a channel that never had a message holds nothing; its derived epoch goes on at the first message', async (t) => {
  const s = new MemoryHistoryStore({ budgetBytes: 1 << 20, metaTtlMs: 60_000 });
  const seen = new Set<string>();
  for (let i = 0; i < 10_000; i++) seen.add(s.position('a', `history-${Math.random().toString(36).slice(2)}`, 1000 + i).epoch);
  t.same(s.stats(), { channels: 0, messages: 0, bytes: 0 }, '10,000 position reads of empty channels: no entry, no byte');
  t.same(s.since('a', 'history-x', 0, 2000), [], 'nothing to replay');
  const p0 = s.position('a', 'c', 2000);
  t.same(s.append('a', 'c', S, 'm1', 3000), { epoch: p0.epoch, serial: 1 }, 'the first message keeps the epoch read while empty');
  t.equal(s.stats().channels, 1);
  t.not(s.position('a', 'd', 60_000).epoch, s.position('a', 'd', 59_999).epoch, 'another meta_ttl period, another derived epoch');
});

t.test('history.max_channels_per_shard: past it the entry written least recently is forgotten, a new epoch', async (t) => {
  const forgotten: string[] = [];
  const s = new MemoryHistoryStore({ budgetBytes: 1 << 20, metaTtlMs: 60_000, maxChannels: 3, events: { evicted: () => {}, forgotten: (app) => forgotten.push(app) } });
  const e1 = s.append('a', 'c1', S, 'm', 1).epoch;
  s.append('b', 'c2', S, 'm', 2);
  s.append('a', 'c3', S, 'm', 3);
  s.append('a', 'c2x', S, 'm', 4);
  t.same(forgotten, ['a'], 'c1 (written least recently) forgotten, counted');
  t.equal(s.stats().channels, 3);
  t.equal(s.stats().messages, 3);
  t.same(s.since('a', 'c1', 0, 5), [], 'its messages are gone');
  const p = s.position('a', 'c1', 5);
  t.not(p.epoch, e1, 'its numbering is gone: a new epoch in the same period');
  t.equal(p.serial, 0);
  t.equal(s.append('a', 'c1', S, 'm', 6).epoch, p.epoch);
});

t.test('the entries count in the budget: past it, channels without messages are forgotten first-written first', async (t) => {
  const forgotten: string[] = [];
  const s = new MemoryHistoryStore({ budgetBytes: 2000, metaTtlMs: 60_000, events: { evicted: () => {}, forgotten: (app) => forgotten.push(app) } });
  const short = { size: 1, ttl: 1, rewind: 0 };
  for (let i = 0; i < 20; i++) s.append('a', `c${i}`, short, 'm', i * 1000); // each message expired by the next append
  s.sweep(30_000, () => true); // expired messages gone, entries kept (subscribers)
  t.ok(s.stats().bytes <= 2000, `within budget (${s.stats().bytes} bytes, ${s.stats().channels} channels)`);
  t.ok(forgotten.length > 0, 'some were forgotten');
});
