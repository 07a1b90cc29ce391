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
// And what the sequencer cannot write (a delta frame to a stalled shard, after the 200):
// counted in bus_full_total{source="delta_frame"}, the client resynchronises.
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

t.test('one node: a delta frame the sequencer cannot write to a full shard is counted', async (t) => {
  // The channel's one subscriber (delta) is on the stalled shard: a publish goes to the
  // sequencer alone (200), whose ring to that shard fills; the frames it drops are counted
  // (bus_full_total{source="delta_frame"}, delta/sequencer.ts rule 3), and once the shard
  // reads again the client resynchronises (pusher:delta_sync_error) and decodes what follows.
  const srv = await startServer({ workers: SHARDS, bus: BUS, delta_compression: DELTA, metrics: { enabled: true, port: 0, host: '127.0.0.1' } });
  t.teardown(() => srv.stop());
  const s = await subscriber(srv, 'delta on the stalled shard', true, (x) => x === PAUSED);
  const dropped = () => metric(srv.server.metricsPort!, 'bus_full_total', { source: 'delta_frame' });
  const before = await dropped();
  await srv.server.testPauseBus(PAUSED, 60_000);
  const { agent } = await drainingAgent(t, srv);
  const ev = event([CHANNEL]);
  let seq = 0;
  for (; seq < 5000 && (seq % 50 !== 0 || await dropped() === before); seq++) {
    const r = await publish(srv.port, ev(seq), { agent });
    if (r.status !== 200) throw new Error(`publish ${seq} answered ${r.status}: ${r.text}`);
  }
  t.ok(await dropped() > before, `after ${seq} publishes, bus_full_total{source="delta_frame"} counts the frames the sequencer dropped`);
  await srv.server.testPauseBus(PAUSED, 0);
  // more publishes until one reaches the client: the first ones after the gap are deltas
  // against a base it never got (a sync error, answered by a full message)
  const gap = seq;
  await eventually(async () => {
    if (seqs(s).some((x) => x !== null && x >= gap)) return true;
    const r = await publish(srv.port, ev(seq++), { agent });
    if (r.status !== 200) throw new Error(`publish ${seq - 1} answered ${r.status}: ${r.text}`);
    return false;
  }, 20_000, 'the delta client to get a publish made after the dropped frames');
  const got = seqs(s) as number[];
  t.ok(got.length < seq && got.every((x, i) => i === 0 || x > got[i - 1]), `the client decoded ${got.length} of ${seq} publishes, in order`);
  t.ok(s.client.decoder!.stats.syncErrors > 0, 'it resynchronised (pusher:delta_sync_error)');
});

t.test('two nodes: the primary\'s ring is full (adapter-out stage)', (t) => clusterCase(t, {}, PRIMARY));

t.test('two nodes, cluster_coordination: the primary\'s ring is full (adapter-out, delta_origin)', (t) =>
  clusterCase(t, { delta_compression: { cluster_coordination: true } }, PRIMARY));
