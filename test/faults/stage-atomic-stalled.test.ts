// test-modes: once (its servers have at least 2 shards: max(2, workers))
// All or nothing with every stage of the publish pipeline (channels/publisher.ts), the full
// ring being a stage's own target while every shard reads (stage-atomic.test.ts stalls a
// shard): a publish or batch answered 503 has reached nobody, and its retry arrives once
// (the scenario: atomic.ts).
//  - the delta sequencer stalls (testPauseBus(shards + 1)): the delta route's copy to it
//    is refused; plain and delta subscribers of the delta channel on two shards;
//  - the primary stalls (testPauseBus(shards)), two nodes on one redis-server: the
//    adapter-out stage's copy (and cluster_coordination's delta_origin) is refused; local
//    plain and delta subscribers, and the other node's.
// And a stalled shard's ring full of delta frames: the sequencer keeps them and stops
// reading, so publishes are refused 503 (nothing delivered) instead of frames dropped after
// a 200; the client decodes every accepted publish once the shard reads again.
// Runs with 2 shards (4 under RINGCAST_TEST_WORKERS=4).

import t from 'tap';
import { eventually, startServer } from '../helpers/server';
import { metric, publish } from './api';
import { BUS, CHANNEL, DELTA, PAUSED, PRIMARY, SEQUENCER, SHARDS, clusterCase, drainingAgent, event, refusedReachesNobody, seqs, subscriber } from './atomic';

t.test('one node: the delta sequencer\'s ring is full', async (t) => {
  // The publishes fill the queue from the API's shard to the sequencer; every shard reads.
  // Before the fix the plain subscribers got a refused publish.
  const srv = await startServer({ workers: SHARDS, bus: BUS, delta_compression: DELTA });
  t.teardown(() => srv.stop());
  const subs = [
    await subscriber(srv, 'local delta', true, (s) => s === 0),
    await subscriber(srv, 'local plain', false, (s) => s === 0),
    await subscriber(srv, 'local delta, another shard', true, (s) => s === 1),
    await subscriber(srv, 'local plain, another shard', false, (s) => s === 1),
  ];
  await refusedReachesNobody(t, srv, subs, [CHANNEL], SEQUENCER);
});

t.test('one node: a shard\'s ring full of delta frames holds the sequencer back: 503, nothing dropped after a 200', async (t) => {
  // The channel's one subscriber (delta) is on the stalled shard: a publish goes to the
  // sequencer alone, whose ring to that shard fills; the sequencer keeps the frames it
  // cannot write and stops reading, its own ring and spill fill, and the publishes are
  // refused 503 (delta/backlog.ts). Nothing is dropped (bus_full_total{source="delta_frame"}):
  // once the shard reads again the client decodes every publish answered 200, in order,
  // without a resynchronisation. (Before: every publish 200, frames dropped.)
  const srv = await startServer({ workers: SHARDS, bus: BUS, delta_compression: DELTA, metrics: { enabled: true, port: 0, host: '127.0.0.1' } });
  t.teardown(() => srv.stop());
  const s = await subscriber(srv, 'delta on the stalled shard', true, (x) => x === PAUSED);
  const dropped = () => metric(srv.server.metricsPort!, 'bus_full_total', { source: 'delta_frame' });
  const before = await dropped();
  await srv.server.testPauseBus(PAUSED, 60_000);
  const { agent } = await drainingAgent(t, srv);
  const ev = event([CHANNEL]);
  const accepted: number[] = [];
  let refused = 0;
  let seq = 0;
  for (; seq < 5000 && refused < 20; seq++) {
    const r = await publish(srv.port, ev(seq), { agent });
    if (r.status === 200) accepted.push(seq);
    else if (r.status === 503) refused++;
    else throw new Error(`publish ${seq} answered ${r.status}: ${r.text}`);
  }
  t.equal(refused, 20, `after ${accepted.length} publishes answered 200, the next are refused 503`);
  t.equal(await dropped(), before, 'no delta frame dropped');
  await srv.server.testPauseBus(PAUSED, 0);
  // a marker publish once the backlog is written: everything answered 200 arrives before it
  let marker = -1;
  await eventually(async () => {
    const r = await publish(srv.port, ev(seq), { agent });
    if (r.status === 200) marker = seq;
    seq++;
    return marker >= 0;
  }, 20_000, 'a publish accepted again once the shard reads');
  await eventually(() => seqs(s).includes(marker), 20_000, 'the marker');
  t.same(seqs(s).filter((x) => x !== marker), accepted, 'the client decoded every publish answered 200, in order, and none refused');
  t.equal(s.client.decoder!.stats.syncErrors, 0, 'no resynchronisation');
  t.equal(await dropped(), before, 'still none dropped');
});

t.test('two nodes: the primary\'s ring is full (adapter-out stage)', (t) => clusterCase(t, {}, PRIMARY));

t.test('two nodes, cluster_coordination: the primary\'s ring is full (adapter-out, delta_origin)', (t) =>
  clusterCase(t, { delta_compression: { cluster_coordination: true } }, PRIMARY));
