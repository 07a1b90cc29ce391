// test-modes: once (its servers have at least 2 shards, the stalled one and another: max(2, workers))
// All or nothing with every stage of the publish pipeline (channels/publisher.ts): a
// publish or batch answered 503 has reached nobody, also not through the stages that write
// elsewhere than the shards:
//  - the delta route (to the delta sequencer, whose delta subscribers then get it),
//  - the adapter-out stage (to the primary, which publishes it to the other nodes),
//  - cluster_coordination's delta_origin (to the primary, which has it numbered by the
//    cluster's coordinator and fed to every node's sequencer),
//  - the history stage's hist_pub (to the channel's owner shard, which numbers it and sends
//    it to the subscribers): an event to a history channel and a plain one refused for the
//    plain one's stalled shard reached the history channel's subscribers before;
//  - the console's tap stage (console/tap.ts): the live log shows a publish once it is
//    written (StageWrites.after), so a refused one did not show there either (it showed
//    before, and its retry a second time).
// Shard 1 stops reading its rings (RINGCAST_TEST_HOOKS=1 → RunningServer.testPauseBus)
// with a plain subscriber on it, and an API client on another shard publishes until the
// queue to shard 1 is full (503). The stages' own targets are not full: before the fix
// they got the refused publish. Then shard 1 reads again, the refused publishes are
// retried (200), and a marker event is published: once every client has the marker,
// each has every publish answered 200 exactly once, in order, and nothing else; each
// delta client decoded them from pusher:delta frames, with no resynchronisation.
// The same with the delta sequencer's or the primary's ring full: stage-atomic-stalled.test.ts.
// Runs with 2 shards (4 under RINGCAST_TEST_WORKERS=4).

import t from 'tap';
import { ownerOf } from '../../src/channels/owner';
import { APP, startServer } from '../helpers/server';
import { LiveLog, TOKEN } from '../helpers/console';
import { publish } from './api';
import { BUS, CHANNEL, DELTA, END, PAUSED, SHARDS, clusterCase, refusedReachesNobody, subscriber } from './atomic';

/** channel_history of the history case. */
const HISTORY = { 'hist-*': { size: 5000, ttl: 600, rewind: 0 } };

t.test('one node: the delta route writes in the publish batch', async (t) => {
  const srv = await startServer({ workers: SHARDS, bus: BUS, delta_compression: DELTA });
  t.teardown(() => srv.stop());
  const subs = [
    await subscriber(srv, 'local plain on the stalled shard', false, (s) => s === PAUSED),
    await subscriber(srv, 'local delta', true, (s) => s !== PAUSED),
    await subscriber(srv, 'local plain', false, (s) => s !== PAUSED),
  ];
  await refusedReachesNobody(t, srv, subs);
});

t.test('one node: a history channel beside a channel of the stalled shard', async (t) => {
  const srv = await startServer({ workers: SHARDS, bus: BUS, delta_compression: DELTA, apps: [{ ...APP, channel_history: HISTORY }] });
  t.teardown(() => srv.stop());
  // its owner (not stalled) numbers and sends its events: the hist_pub to it is taken,
  // the frames to the stalled shard are not
  const hist = 'abcdefgh'.split('').map((x) => `hist-${x}`).find((c) => ownerOf(APP.id, c, SHARDS) !== PAUSED)!;
  const subs = [
    await subscriber(srv, 'local plain on the stalled shard', false, (s) => s === PAUSED),
    await subscriber(srv, 'local history delta', true, (s) => s !== PAUSED, hist),
    await subscriber(srv, 'local history plain', false, (s) => s !== PAUSED, hist),
  ];
  await refusedReachesNobody(t, srv, subs, [hist, CHANNEL]);
});

t.test('one node: the console live log shows no refused publish', async (t) => {
  // The tap passes at most 500 events a second per shard: a spill of 64 KiB fills after
  // ~120 publishes.
  const srv = await startServer({
    workers: SHARDS, bus: { ...BUS, max_spill_bytes: 64 * 1024 }, event_limits: { max_payload_in_kb: 16 },
    console: { enabled: true, host: '127.0.0.1', port: 0, token: TOKEN },
  });
  t.teardown(() => srv.stop());
  const live = new LiveLog(srv.server.consolePort!, APP.id);
  t.teardown(() => live.close());
  // the shards tap the app once a publish shows in the live log (a channel nobody is on)
  for (let i = 0; !live.events.some((e) => e.event === 'warm'); i++) {
    if (i === 50) throw new Error('no publish showed in the live log');
    const r = await publish(srv.port, { name: 'warm', channel: 'warm', data: '{}' });
    if (r.status !== 200) throw new Error(`warm-up publish answered ${r.status}`);
    await live.next((e) => e.event === 'warm', 200).catch(() => undefined);
  }
  const subs = [
    await subscriber(srv, 'local plain on the stalled shard', false, (s) => s === PAUSED),
    await subscriber(srv, 'local plain', false, (s) => s !== PAUSED),
  ];
  const want = await refusedReachesNobody(t, srv, subs);
  await live.next((e) => e.event === END && e.channel === CHANNEL, 30_000);
  const shown = live.events.filter((e) => e.kind === 'api' && e.channel === CHANNEL)
    .map((e) => e.event === END ? null : (JSON.parse(e.data!) as { seq: number }).seq);
  t.same(shown, want, 'the live log: every publish answered 200 once, in order; no refused one');
  t.notOk(live.events.some((e) => e.kind === 'dropped'), 'the live log dropped nothing');
});

t.test('two nodes: the adapter-out stage writes in the publish batch', (t) => clusterCase(t, {}));

t.test('two nodes, cluster_coordination: delta_origin is written in the publish batch', (t) =>
  clusterCase(t, { delta_compression: { cluster_coordination: true } }));
