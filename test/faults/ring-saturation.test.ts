// Ring saturation: a publisher far faster than a shard can drain. Shard 1 stops reading
// its rings (test hook RINGCAST_TEST_HOOKS=1 → RunningServer.testPauseBus) while an API
// client on another shard publishes as fast as it can, with a small bus (64 KiB rings,
// 1 MiB spill bound):
//  - the ring fills, then the writer's spill queue, then the API answers 503 {"error"};
//  - the memory held stays within the bound (bus_spill_bytes), bus_full_total counts;
//  - once shard 1 reads again, each of its subscribers gets every event that got 200,
//    in order, and none that got 503 (nor does any other shard's: all or nothing);
//  - publishes succeed again afterwards.
// Runs with 2 shards (4 under RINGCAST_TEST_WORKERS=4).

import t from 'tap';
import { RawClient, WORKERS, eventually, startServer } from '../helpers/server';
import { settle } from '../helpers/settle';
import { MiB, drainingConnection, metric, publish, rssSampler, signedGet } from './api';

process.env.RINGCAST_TEST_HOOKS = '1';
const SHARDS = Math.max(2, WORKERS);
const PAUSED = 1;
const RING_BYTES = 64 * 1024;
const MAX_SPILL = 1 * MiB;
const PAD = 'p'.repeat(1000);

t.test('ring saturation', async (t) => {
  const srv = await startServer({
    workers: SHARDS,
    bus: { ring_bytes: RING_BYTES, max_spill_bytes: MAX_SPILL },
    metrics: { enabled: true, port: 0, host: '127.0.0.1' },
  });
  t.teardown(() => srv.stop());
  const prefixes = srv.server.testShardPrefixes!();
  const shardOf = (c: RawClient) => prefixes.indexOf(c.socketId.split('.')[0]);

  // subscribers on every shard, at least two on the one that will stall
  const subs: RawClient[] = [];
  const on = (s: number) => subs.filter((c) => shardOf(c) === s).length;
  for (let i = 0; i < 200 && (on(PAUSED) < 2 || new Set(subs.map(shardOf)).size < SHARDS); i++) {
    const c = srv.track(await RawClient.connect(srv.wsUrl()));
    await c.subscribe('sat');
    subs.push(c);
  }
  t.ok(on(PAUSED) >= 2, `${on(PAUSED)} subscribers on shard ${PAUSED}, ${subs.length} in all`);
  await eventually(async () => (await signedGet(srv.port, 'channels/sat', { params: { info: 'subscription_count' } })).json?.subscription_count === subs.length,
    5000, 'the owner to count every subscriber');

  const paused = await srv.server.testPauseBus(PAUSED, 60_000);
  t.equal(paused.socketIdPrefix, prefixes[PAUSED]);

  // A keep-alive connection that does not land on the stalled shard: a question to a
  // channel owned by shard 0 is answered at once there and on every shard but the
  // stalled one (whose reply ring it does not read).
  const found = await drainingConnection(srv.port, SHARDS);
  t.ok(found, 'an API connection on a shard that drains');
  const agent = found?.agent ?? null;
  const conn = found?.conn ?? null;
  t.teardown(() => agent?.destroy());

  const rss = rssSampler();
  const base = process.memoryUsage().rss;
  const ok: number[] = [];
  const refused: number[] = [];
  let firstRefusal: { status: number; json: unknown } | null = null;
  for (let seq = 0; seq < 20_000 && refused.length < 50; seq++) {
    const r = await publish(srv.port, { name: 'e', channel: 'sat', data: JSON.stringify({ seq, pad: PAD }) }, { agent: agent! });
    if (r.socket !== conn) throw new Error('the API connection changed');
    if (r.status === 200) ok.push(seq);
    else {
      firstRefusal ??= { status: r.status, json: r.json };
      refused.push(seq);
      if (r.status !== 503) throw new Error(`unexpected ${r.status}: ${r.text}`);
    }
  }
  t.ok(ok.length > 500, `${ok.length} publishes answered 200 before the queue to shard ${PAUSED} was full`);
  t.ok(ok.length < 2000, 'then refused: the queue is bounded');
  t.same(firstRefusal, { status: 503, json: { error: 'server busy: internal queues are full, retry later' } }, '503 with {"error"}');
  t.ok(refused.every((s) => s > ok[ok.length - 1]), 'once full, every later publish is refused');
  const spilled = await metric(srv.server.metricsPort!, 'bus_spill_bytes');
  t.ok(spilled > 0 && spilled <= MAX_SPILL, `spilled bytes ${spilled} within the bound ${MAX_SPILL}`);
  t.ok(await metric(srv.server.metricsPort!, 'bus_full_total', { source: 'api' }) >= refused.length, 'bus_full_total counts the refusals');
  // The exact measure of what the bus holds is bus_spill_bytes above; RSS also counts the
  // test's own clients keeping every frame they received.
  t.comment(`RSS grew ${((rss.stop() - base) / MiB).toFixed(1)} MiB (test clients included)`);

  // nothing refused went anywhere, also not to the shards that were reading
  for (const c of subs) if (shardOf(c) !== PAUSED) {
    await eventually(() => c.frames.filter((f) => f.event === 'e').length >= ok.length, 10_000, 'the reading shards');
  }

  await srv.server.testPauseBus(PAUSED, 0); // reads again
  const seqs = (c: RawClient) => c.frames.filter((f) => f.event === 'e').map((f) => (JSON.parse(f.data) as { seq: number }).seq);
  for (const c of subs) {
    await eventually(() => seqs(c).length >= ok.length, 20_000, `subscriber ${c.socketId} to catch up`);
  }
  await settle(srv, subs, 'sat'); // a refused publish that went somewhere would be here before the marker
  for (const s of new Set(subs.map(shardOf))) {
    const mine = subs.filter((c) => shardOf(c) === s);
    t.ok(mine.every((c) => JSON.stringify(seqs(c)) === JSON.stringify(ok)),
      `shard ${s}${s === PAUSED ? ' (stalled)' : ''}: its ${mine.length} subscriber(s) got every event answered 200, in order, none refused`);
  }

  // and it recovers
  const after: number[] = [];
  const statuses = new Set<number>();
  for (let seq = 100_000; seq < 100_020; seq++) {
    const r = await publish(srv.port, { name: 'e', channel: 'sat', data: JSON.stringify({ seq }) }, { agent: agent! });
    statuses.add(r.status);
    after.push(seq);
  }
  t.same([...statuses], [200], 'publishes after the stall are answered 200');
  for (const c of subs) await eventually(() => seqs(c).slice(-20).join() === after.join(), 5000, 'the events after the stall');
  t.pass('every subscriber got the events after the stall');
  const left = await metric(srv.server.metricsPort!, 'bus_spill_bytes');
  t.equal(left, 0, 'spill queues empty again');
});

t.test('order across rings: spilled frames are not overtaken', async (t) => {
  // Publishes on fresh connections land on any shard; while shard 1 is stalled, what the
  // others send it spills, and its own publishes wait in it. Once it reads again, its
  // subscribers must still see the publishes in the order they were answered.
  const srv = await startServer({
    workers: SHARDS,
    bus: { ring_bytes: RING_BYTES, max_spill_bytes: MAX_SPILL },
  });
  t.teardown(() => srv.stop());
  const prefixes = srv.server.testShardPrefixes!();
  const shardOf = (c: RawClient) => prefixes.indexOf(c.socketId.split('.')[0]);
  const subs: RawClient[] = [];
  for (let i = 0; i < 200 && !subs.some((c) => shardOf(c) === PAUSED); i++) {
    const c = srv.track(await RawClient.connect(srv.wsUrl()));
    await c.subscribe('order');
    subs.push(c);
  }
  await eventually(async () => (await signedGet(srv.port, 'channels/order', { params: { info: 'subscription_count' } })).json?.subscription_count === subs.length,
    5000, 'the owner to count every subscriber');
  await srv.server.testPauseBus(PAUSED, 60_000);
  const ok: number[] = [];
  let refused = 0;
  for (let seq = 0; seq < 400; seq++) {
    const r = await publish(srv.port, { name: 'e', channel: 'order', data: JSON.stringify({ seq, pad: 'q'.repeat(2000) }) });
    if (r.status === 200) ok.push(seq);
    else if (r.status === 503) refused++;
    else throw new Error(`unexpected ${r.status}: ${r.text}`);
  }
  t.ok(ok.length > 0, `${ok.length} answered 200, ${refused} refused`);
  await srv.server.testPauseBus(PAUSED, 0);
  const seqs = (c: RawClient) => c.frames.filter((f) => f.event === 'e').map((f) => (JSON.parse(f.data) as { seq: number }).seq);
  for (const c of subs) await eventually(() => seqs(c).length >= ok.length, 20_000, `subscriber ${c.socketId} to catch up`);
  await settle(srv, subs, 'order'); // nor one of the refused ones after them
  for (const c of subs) {
    t.same(seqs(c), ok, `shard ${shardOf(c)}${shardOf(c) === PAUSED ? ' (stalled)' : ''}: every publish answered 200, in that order`);
  }
});
