// bus.max_spill_bytes is a budget per thread (src/bus/spill.ts), shared by all of the
// thread's outgoing rings, not a bound per ring:
//  - writers sharing a budget spill together at most the budget; past it write() refuses
//    (nothing taken) whichever ring it is for, and bytes moving into a ring free budget;
//  - all-or-nothing checks of several rings (wouldTake / wouldTakeAll, as Bus.publishTo and
//    BusBatch.commit ask them) promise the bytes they found: a second ring is not promised
//    the same free bytes, and writes a check allowed are never refused;
//  - a discarded writer (its thread replaced) gives its bytes back;
//  - through a server (4 shards in both test modes): three shards stop reading while
//    a publisher on the fourth fills its three rings to them; the spilled bytes
//    (bus_spill_bytes, sampled all along) never pass the one budget, where a bound per ring
//    held three times as much.

import t from 'tap';
import { createRingBuffer, RingReader, RingWriter } from '../../src/bus/ring';
import { SpillBudget } from '../../src/bus/spill';
import { MiB, drainingConnection, metric, publish, signedGet } from '../faults/api';
import { RawClient, eventually, startServer } from '../helpers/server';

const FRAME = 5; // header bytes a spilled frame counts (ring.ts FRAME_HEADER_BYTES)

function writers(n: number, budget: SpillBudget): { w: RingWriter; r: RingReader }[] {
  return Array.from({ length: n }, () => {
    const sab = createRingBuffer(4096);
    return { w: new RingWriter(sab, { budget }), r: new RingReader(sab) };
  });
}

t.test('writers sharing a budget spill at most the budget together', async (t) => {
  const budget = new SpillBudget(10_000);
  const rings = writers(3, budget);
  t.teardown(() => { for (const { w } of rings) w.close(); });
  const payload = new Uint8Array(1000);
  const taken = [0, 0, 0];
  for (let round = 0; round < 20; round++) {
    for (let i = 0; i < 3; i++) if (rings[i]!.w.write(1, payload)) taken[i]!++;
  }
  const spilled = rings.reduce((s, { w }) => s + w.spilledBytes, 0);
  t.equal(budget.used, spilled, 'the budget counts what the queues hold');
  t.ok(spilled <= 10_000 && spilled > 10_000 - 3 * (1000 + FRAME), `${spilled} bytes spilled in all, within 10000`);
  t.ok(rings.every(({ w }) => w.spilledBytes > 0), 'every ring spilled');
  t.notOk(rings[2]!.w.write(1, payload), 'a ring with little of its own spilled is refused once the thread\'s budget is used');
  // a ring's reader drains: its spill moves into the ring and frees budget for the others
  rings[0]!.r.drain(() => undefined);
  rings[0]!.w.flushSpill();
  t.ok(budget.used < spilled, 'bytes that left a spill queue are given back');
  t.ok(rings[2]!.w.write(1, payload), 'and another ring may spill them');
  // a writer discarded (its thread replaced) gives back what it held
  const before = budget.used;
  const held = rings[1]!.w.spilledBytes;
  rings[1]!.w.discard();
  t.equal(budget.used, before - held, 'a discarded writer gives its bytes back');
});

t.test('all-or-nothing checks of several rings do not promise the same bytes twice', async (t) => {
  const budget = new SpillBudget(8_000);
  const rings = writers(2, budget);
  t.teardown(() => { for (const { w } of rings) w.close(); });
  const fill = new Uint8Array(1000);
  while (rings[0]!.w.spilledBytes === 0) rings[0]!.w.write(1, fill); // ring 0 full: what follows spills
  while (rings[1]!.w.spilledBytes === 0) rings[1]!.w.write(1, fill);
  const free = budget.max - budget.used;
  const each = Math.floor(free / 2) + 100; // each fits alone, both together do not
  t.ok(rings[0]!.w.wouldTakeAll([each - FRAME]), 'ring 0 alone: taken');
  t.notOk(rings[1]!.w.wouldTakeAll([each - FRAME]), 'ring 1 in the same run: refused, the free bytes are promised to ring 0');
  t.ok(rings[0]!.w.write(1, new Uint8Array(each - FRAME)), 'the write ring 0 was promised is taken');
  await Promise.resolve(); // the run ends: promises not written lapse
  const small = Math.floor((budget.max - budget.used) / 2) - FRAME;
  t.ok(rings[0]!.w.wouldTake(small) && rings[1]!.w.wouldTake(small), 'two checks that fit together both pass');
  t.ok(rings[0]!.w.write(1, new Uint8Array(small)) && rings[1]!.w.write(1, new Uint8Array(small)), 'and both writes are taken');
  t.ok(budget.used <= budget.max, `${budget.used} ≤ ${budget.max}`);
  t.throws(() => new SpillBudget(0), /positive integer/);
});

t.test('server: a thread writing to three stalled shards spills at most bus.max_spill_bytes in all', async (t) => {
  process.env.RINGCAST_TEST_HOOKS = '1';
  const SHARDS = 4;
  const MAX_SPILL = 1 * MiB;
  const srv = await startServer({
    workers: SHARDS,
    bus: { ring_bytes: 64 * 1024, max_spill_bytes: MAX_SPILL },
    metrics: { enabled: true, port: 0, host: '127.0.0.1' },
  });
  t.teardown(() => srv.stop());
  const prefixes = srv.server.testShardPrefixes!();
  const shardOf = (c: RawClient) => prefixes.indexOf(c.socketId.split('.')[0]!);
  const subs: RawClient[] = [];
  for (let i = 0; i < 200 && new Set(subs.map(shardOf)).size < SHARDS; i++) {
    const c = srv.track(await RawClient.connect(srv.wsUrl()));
    await c.subscribe('spill');
    subs.push(c);
  }
  t.equal(new Set(subs.map(shardOf)).size, SHARDS, 'a subscriber on every shard: each publish goes to every ring');
  await eventually(async () => (await signedGet(srv.port, 'channels/spill', { params: { info: 'subscription_count' } })).json?.subscription_count === subs.length,
    5000, 'the owner to count every subscriber');
  for (const s of [1, 2, 3]) await srv.server.testPauseBus(s, 60_000);
  // a keep-alive API connection on shard 0, the one that reads (a question to a channel it owns is answered)
  const found = await drainingConnection(srv.port, SHARDS);
  t.ok(found, 'an API connection on the shard that reads');
  const agent = found?.agent ?? null;
  const conn = found?.conn ?? null;
  t.teardown(() => agent?.destroy());

  const pad = 'p'.repeat(1000);
  let ok = 0;
  let refused = 0;
  let peak = 0;
  for (let seq = 0; seq < 10_000 && refused < 20; seq++) {
    const r = await publish(srv.port, { name: 'e', channel: 'spill', data: JSON.stringify({ seq, pad }) }, { agent: agent! });
    if (r.socket !== conn) throw new Error('the API connection changed');
    if (r.status === 200) ok++;
    else if (r.status === 503) refused++;
    else throw new Error(`unexpected ${r.status}: ${r.text}`);
    if (seq % 25 === 0 || r.status === 503) peak = Math.max(peak, await metric(srv.server.metricsPort!, 'bus_spill_bytes'));
  }
  t.ok(refused > 0, `refused (503) after ${ok} publishes: the budget is reached`);
  t.ok(peak > MAX_SPILL / 2, `the rings spilled (${peak} bytes at most)`);
  t.ok(peak <= MAX_SPILL, `spilled bytes never passed the thread's budget: ${peak} ≤ ${MAX_SPILL} (a bound per ring allowed ${3 * MAX_SPILL})`);
  t.ok(ok * 3 * (pad.length + 100) > MAX_SPILL, 'more was taken than one ring\'s spill: several rings spilled');

  for (const s of [1, 2, 3]) await srv.server.testPauseBus(s, 0);
  for (const c of subs) await eventually(() => c.frames.filter((f) => f.event === 'e').length >= ok, 20_000, `subscriber ${c.socketId} to catch up`);
  await eventually(async () => await metric(srv.server.metricsPort!, 'bus_spill_bytes') === 0, 5000, 'the spill queues to empty');
  const r = await publish(srv.port, { name: 'e', channel: 'spill', data: 'after' }, { agent: agent! });
  t.equal(r.status, 200, 'publishes are taken again');
});
