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
//    plain one's stalled shard reached the history channel's subscribers before.
// Shard 1 stops reading its rings (RINGCAST_TEST_HOOKS=1 → RunningServer.testPauseBus)
// with a plain subscriber on it, and an API client on another shard publishes until the
// queue to shard 1 is full (503). The stages' own targets are not full: before the fix
// they got the refused publish. Then shard 1 reads again, the refused publishes are
// retried (200), and a marker event is published: once every client has the marker,
// each has every publish answered 200 exactly once, in order, and nothing else.
// Runs with 2 shards (4 under RINGCAST_TEST_WORKERS=4).

import http from 'node:http';
import type { Socket } from 'node:net';
import t, { type Test } from 'tap';
import { ownerOf } from '../../src/channels/owner';
import type { ConfigInput } from '../../src/config';
import { startNodePair } from '../helpers/cluster';
import { RedisServer } from '../helpers/redis';
import { APP, WORKERS, eventually, startServer, type TestServer } from '../helpers/server';
import { core, DeltaClient } from '../delta/clients';
import { publish, signedGet } from './api';

process.env.RINGCAST_TEST_HOOKS = '1';
const SHARDS = Math.max(2, WORKERS);
const PAUSED = 1;
const PAD = 'p'.repeat(1000);
const BUS = { ring_bytes: 64 * 1024, max_spill_bytes: 1024 * 1024 };
const CHANNEL = 'atomic';
/** channel_history of the history case. */
const HISTORY = { 'hist-*': { size: 5000, ttl: 600, rewind: 0 } };
const END = 'end';

/** A client of a channel and the shard it is on. */
interface Sub { name: string; client: DeltaClient; shard: number; channel: string }

const shardOf = (srv: TestServer, c: DeltaClient) => srv.server.testShardPrefixes!().indexOf(c.socketId.split('.')[0]);

/** A client of `channel` (plain, or with delta compression) on a shard `want` accepts. */
async function subscriber(srv: TestServer, name: string, delta: boolean, want: (shard: number) => boolean, channel = CHANNEL): Promise<Sub> {
  for (let i = 0; i < 200; i++) {
    const c = await DeltaClient.open(srv, delta ? new core.DeltaDecoder() : null);
    if (!want(shardOf(srv, c))) continue; // an extra idle connection, closed with the server
    if (delta) await c.enable();
    await c.subscribe(channel);
    return { name, client: c, shard: shardOf(srv, c), channel };
  }
  throw new Error(`no connection landed on a shard for ${name}`);
}

/**
 * A keep-alive API connection on a shard that drains: a question to a channel owned by
 * shard 0 is answered at once there and on every shard but the stalled one.
 */
async function drainingAgent(t: Test, srv: TestServer): Promise<{ agent: http.Agent; conn: Socket }> {
  const probe = 'abcdefgh'.split('').map((x) => `probe-${x}`).find((c) => ownerOf(APP.id, c, SHARDS) === 0)!;
  for (let i = 0; i < 50; i++) {
    const a = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const r = await signedGet(srv.port, `channels/${probe}`, { agent: a, timeoutMs: 300 }).catch(() => null);
    if (r?.status === 200 && r.socket) {
      t.teardown(() => a.destroy());
      return { agent: a, conn: r.socket };
    }
    a.destroy();
  }
  throw new Error('no API connection on a shard that drains');
}

const event = (channels: string[]) => (seq: number) => ({ name: 'e', channels, data: JSON.stringify({ seq, pad: PAD }) });

/** The seqs a client got on its channel, in order (delta frames decoded); null for the end marker. */
function seqs(s: Sub): (number | null)[] {
  return s.client.events(s.channel).map((env) => {
    const m = JSON.parse(env) as { event: string; data: string };
    return m.event === END ? null : (JSON.parse(m.data) as { seq: number }).seq;
  });
}

/**
 * The scenario on `pub` (whose shard PAUSED holds a plain subscriber): publishes until
 * refused, a batch while full, then the retries once shard PAUSED reads again, then the
 * marker; every client in `subs` must have each accepted seq exactly once, in order.
 */
async function refusedReachesNobody(t: Test, pub: TestServer, subs: Sub[], channels = [CHANNEL]): Promise<void> {
  const ev = event(channels);
  for (const c of channels) {
    const local = subs.filter((s) => s.channel === c && s.name.startsWith('local')).length;
    await eventually(async () => (await signedGet(pub.port, `channels/${c}`, { params: { info: 'subscription_count' } })).json?.subscription_count >= local,
      5000, `the owner of ${c} to count its local subscribers`);
  }
  await pub.server.testPauseBus(PAUSED, 60_000);
  const { agent, conn } = await drainingAgent(t, pub);
  const send = async (body: unknown, batch = false) => {
    const r = await publish(pub.port, body, { agent, batch });
    if (r.socket !== conn) throw new Error('the API connection changed');
    if (r.status !== 200 && r.status !== 503) throw new Error(`unexpected ${r.status}: ${r.text}`);
    return r;
  };
  const ok: number[] = [];
  const refused: number[] = [];
  let seq = 0;
  for (; seq < 5000 && refused.length < 3; seq++) {
    const r = await send(ev(seq));
    (r.status === 200 ? ok : refused).push(seq);
  }
  t.ok(ok.length > 0 && refused.length === 3, `${ok.length} publishes answered 200, then ${refused.length} refused with 503`);
  const batch = [seq, seq + 1];
  const b = await send({ batch: batch.map(ev) }, true);
  t.same({ status: b.status, json: b.json }, { status: 503, json: { error: 'server busy: internal queues are full, retry later' } }, 'a batch while full: 503');

  await pub.server.testPauseBus(PAUSED, 0); // reads again
  // every accepted publish through first (the retries must come after them)
  for (const s of subs) await s.client.until(() => seqs(s).length >= ok.length, `${s.name} to get the accepted publishes`);
  for (const r of refused) t.equal((await send(ev(r))).status, 200, `the retry of ${r}: 200`);
  t.equal((await send({ batch: batch.map(ev) }, true)).status, 200, 'the retry of the batch: 200');
  const marker = await send({ name: END, channels, data: '{}' });
  t.equal(marker.status, 200, 'the marker: 200');
  for (const s of subs) await s.client.until(() => seqs(s).includes(null), `${s.name} to get the marker`);
  const want = [...ok, ...refused, ...batch, null];
  for (const s of subs) {
    t.same(seqs(s), want, `${s.name} (shard ${s.shard}): every publish answered 200 once, in order; no refused one`);
  }
}

t.test('one node: the delta route writes in the publish batch', async (t) => {
  const srv = await startServer({ workers: SHARDS, bus: BUS });
  t.teardown(() => srv.stop());
  const subs = [
    await subscriber(srv, 'local plain on the stalled shard', false, (s) => s === PAUSED),
    await subscriber(srv, 'local delta', true, (s) => s !== PAUSED),
    await subscriber(srv, 'local plain', false, (s) => s !== PAUSED),
  ];
  await refusedReachesNobody(t, srv, subs);
});

t.test('one node: a history channel beside a channel of the stalled shard', async (t) => {
  const srv = await startServer({ workers: SHARDS, bus: BUS, apps: [{ ...APP, channel_history: HISTORY }] });
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

/** Two nodes on one redis-server; node A's shard PAUSED stalls. */
async function clusterCase(t: Test, extra: ConfigInput): Promise<void> {
  const redis = await RedisServer.start();
  t.teardown(() => redis.stop());
  const [a, b] = await startNodePair(t, {
    workers: SHARDS, bus: BUS, adapter: { driver: 'redis' }, database: { redis: { host: '127.0.0.1', port: redis.port } }, ...extra,
  });
  const subs = [
    await subscriber(a, 'local plain on the stalled shard', false, (s) => s === PAUSED),
    await subscriber(a, 'local delta', true, (s) => s !== PAUSED),
    await subscriber(b, 'other node plain', false, () => true),
    await subscriber(b, 'other node delta', true, () => true),
  ];
  await refusedReachesNobody(t, a, subs);
}

t.test('two nodes: the adapter-out stage writes in the publish batch', (t) => clusterCase(t, {}));

t.test('two nodes, cluster_coordination: delta_origin is written in the publish batch', (t) =>
  clusterCase(t, { delta_compression: { cluster_coordination: true } }));
