// history.driver redis / redis-cluster (history/redis.ts) with real ringcast nodes and a
// real redis-server or 3-master redis cluster: every node numbers and stores one sequence
// per channel. A pusher-js client with the plug-in, cut off node A (TCP reset), resumes
// exactly on node B after 200 messages per channel published on both nodes; both nodes
// deliver the same serials in the same order; a stock client gets the rewind on the other
// node; REST history on B sees A's messages. On one node: Redis down answers 503 (API) and
// pusher:error (client event) on history channels while other channels go on, and a Redis
// restart (AOF, fsync always: its data survives) changes the epoch, told as epoch_changed;
// a serial that never reached the node is reported as a gap (unavailable).
// Workers 1 and 4 (RINGCAST_TEST_WORKERS).
import { createRequire } from 'node:module';
import path from 'node:path';
import t from 'tap';
import type { ConfigInput } from '../../src/config';
import { startBackend } from '../adapter/backends';
import { startNodePair } from '../helpers/cluster';
import { cutProxy } from '../helpers/cut-proxy';
import { connected, pusherJs, subscribeNumbered } from '../helpers/pusher-js';
import { RedisServer } from '../helpers/redis';
import { APP, RawClient, WORKERS, eventually, startServer, type Frame, type TestServer } from '../helpers/server';

type ClientModule = typeof import('../../client/index.js');
const CLIENT = path.resolve(__dirname, '..', '..', '..', 'client', 'index.js');
const load = (): ClientModule => createRequire(__filename)(CLIENT) as ClientModule;

// a 3-master cluster and two nodes per backend
t.setTimeout(300_000);

const HISTORY = { 'room-*': { size: 500, ttl: 120 }, 'rw-*': { size: 50, ttl: 120, rewind: 5 }, 'private-h-*': { size: 10, ttl: 120 } };
const CHANNELS = ['room-1', 'room-2', 'room-3'];
const BEFORE = 10;
const DURING = 200;

type Serial = Frame & { __serial: number };
const iOf = (f: Frame): number => (typeof f.data === 'string' ? JSON.parse(f.data) : f.data).i as number;

for (const name of ['redis', 'redis-cluster'] as const) {
  t.test(`history.driver ${name}: one sequence per channel across 2 nodes (${WORKERS} workers each)`, async (t) => {
    const backend = await startBackend(name);
    t.teardown(() => backend.stop());
    const cfg: ConfigInput = { ...backend.config(), history: { driver: name }, apps: [{ ...APP, channel_history: HISTORY as never }] };
    const [a, b] = await startNodePair(t, cfg);
    const sdks = [a.sdk(), b.sdk()];
    /** Message i goes to node A when i is odd, B when even: the numbering is shared or the order breaks. */
    const publish = async (channels: string[], from: number, to: number) => {
      for (let i = from; i <= to; i++) {
        await sdks[i % 2].triggerBatch(channels.map((channel) => ({ channel, name: 'msg', data: JSON.stringify({ i }) })));
      }
    };

    await t.test('a plug-in client cut off node A resumes exactly on node B', async (t) => {
      const px = await cutProxy(a.port);
      t.teardown(() => px.close());
      const pusher = a.track(pusherJs(px.port));
      const failed: unknown[] = [];
      const recovery = load().withRecovery(pusher, { onFailed: (c, info) => failed.push([c, info]) });
      await connected(pusher);
      const got = await subscribeNumbered(pusher, CHANNELS);
      await eventually(() => CHANNELS.every((c) => recovery.positions.has(c)), 5000, 'positions');
      await publish(CHANNELS, 1, BEFORE);
      await eventually(() => CHANNELS.every((c) => got.get(c)!.length === BEFORE), 5000, 'the first messages');

      px.cut();
      await publish(CHANNELS, BEFORE + 1, BEFORE + DURING);
      px.retarget(b.port);
      const before = px.accepted();
      px.allow();
      await eventually(() => px.accepted() > before && pusher.connection.state === 'connected', 30_000, 'the reconnect to node B');
      await eventually(() => CHANNELS.every((c) => got.get(c)!.length >= BEFORE + DURING), 15_000, 'the missed messages');
      // a live one after the replay: the marker that nothing else is on its way
      await publish(CHANNELS, BEFORE + DURING + 1, BEFORE + DURING + 1);
      await eventually(() => CHANNELS.every((c) => got.get(c)!.includes(BEFORE + DURING + 1)), 5000, 'the live message after');
      const want = Array.from({ length: BEFORE + DURING + 1 }, (_, i) => i + 1);
      for (const c of CHANNELS) t.same(got.get(c), want, `${c}: every message once, in order, across the two nodes`);
      t.same(failed, [], 'no recovery failed');
      for (const c of CHANNELS) t.equal(recovery.positions.get(c)?.serial, BEFORE + DURING + 1, `${c}: the position is the shared serial`);
      pusher.disconnect();
    });

    await t.test('publishes racing on both nodes: both nodes deliver the same serials in the same order', async (t) => {
      const ca = a.track(await RawClient.connect(a.wsUrl()));
      const cb = b.track(await RawClient.connect(b.wsUrl()));
      await ca.subscribe('room-race', { recover: {} });
      await cb.subscribe('room-race', { recover: {} });
      const ra = await ca.event('pusher_internal:recovery', 'room-race');
      const rb = await cb.event('pusher_internal:recovery', 'room-race');
      t.equal(ra.data.epoch, rb.data.epoch, 'one epoch on both nodes');
      const N = 40;
      await Promise.all([0, 1].map(async (node) => {
        for (let i = node + 1; i <= N; i += 2) await sdks[node].trigger('room-race', 'msg', { i });
      }));
      const all = (c: RawClient) => c.frames.filter((f) => f.channel === 'room-race' && f.event === 'msg') as Serial[];
      await eventually(() => all(ca).length === N && all(cb).length === N, 10_000, 'every message on both nodes');
      t.same(all(ca).map((f) => f.__serial), Array.from({ length: N }, (_, k) => k + 1), 'node A: serials 1…40, in order');
      t.same(all(cb).map((f) => [f.__serial, iOf(f)]), all(ca).map((f) => [f.__serial, iOf(f)]), 'node B: the same messages under the same serials');
    });

    await t.test('rewind for a stock pusher-js client on the other node', async (t) => {
      await publish(['rw-a'], 1, 8);
      const pusher = b.track(pusherJs(b.port));
      await connected(pusher);
      const got = (await subscribeNumbered(pusher, ['rw-a'])).get('rw-a')!;
      await publish(['rw-a'], 9, 9); // node A: live after the rewind
      await eventually(() => got.includes(9), 5000, 'the live message');
      t.same(got, [4, 5, 6, 7, 8, 9], 'the last 5 (published on both nodes), then live');
      pusher.disconnect();
    });

    await t.test('REST history on node B sees the messages published on node A', async (t) => {
      for (let i = 1; i <= 30; i++) await sdks[0].trigger('room-rest', 'msg', { i });
      const res = await sdks[1].get({ path: '/channels/room-rest/history', params: { direction: 'forwards', limit: 20 } });
      const page = await res.json() as { epoch: string; items: { serial: number; event: string; data: string }[]; next_cursor: string | null };
      t.same(page.items.map((x) => [x.serial, JSON.parse(x.data).i]), Array.from({ length: 20 }, (_, k) => [k + 1, k + 1]));
      t.type(page.next_cursor, 'string');
      const rest = await (await sdks[1].get({ path: '/channels/room-rest/history', params: { limit: 20, cursor: page.next_cursor } })).json() as typeof page;
      t.same(rest.items.map((x) => x.serial), Array.from({ length: 10 }, (_, k) => k + 21), 'the next page, from node B as well');
      t.equal(rest.next_cursor, null);
      const back = await (await sdks[0].get({ path: '/channels/room-rest/history', params: { limit: 3 } })).json() as typeof page;
      t.same(back.items.map((x) => x.serial), [30, 29, 28], 'node A, backwards: the same numbering');
      t.equal(back.epoch, page.epoch);
    });
  });
}

/** Publishes until the answer is `status` (Redis going down or coming back is noticed within a second or so). */
async function triggerUntil(srv: TestServer, channel: string, status: number, data: unknown): Promise<{ status: number; body: string }> {
  const sdk = srv.sdk();
  let last = { status: 0, body: '' };
  await eventually(async () => {
    last = await sdk.trigger(channel, 'msg', data).then((r) => ({ status: r.status, body: '' }), (e: { status: number; body: string }) => ({ status: e.status, body: e.body }));
    return last.status === status;
  }, 15_000, `a publish answered ${status}`);
  return last;
}

t.test(`history.driver redis: Redis down, and a Redis restart changes the epoch (${WORKERS} workers)`, async (t) => {
  // AOF with fsync always: the restarted Redis has the channel's meta back; only its run_id tells
  const redis = await RedisServer.start(['--appendonly', 'yes', '--appendfsync', 'always']);
  t.teardown(() => redis.stop());
  const srv = await startServer({
    database: { redis: { host: '127.0.0.1', port: redis.port } }, history: { driver: 'redis' },
    apps: [{ ...APP, enable_client_messages: true, channel_history: HISTORY as never }],
  });
  t.teardown(() => srv.stop());
  const sdk = srv.sdk();
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  await c.subscribe('room-r', { recover: {} });
  const first = await c.event('pusher_internal:recovery', 'room-r');
  t.match(first.data, { serial: 0, recovered: false });
  await c.subscribeAuthed('private-h-1');
  for (let i = 1; i <= 3; i++) await sdk.trigger('room-r', 'msg', { i });
  await eventually(() => c.frames.filter((f) => f.event === 'msg').length === 3, 5000, 'the first 3');
  t.same((c.frames.filter((f) => f.event === 'msg') as Serial[]).map((f) => f.__serial), [1, 2, 3]);
  t.match(await redis.command('INFO persistence'), /aof_enabled:1/);

  await redis.kill();
  const down = await triggerUntil(srv, 'room-r', 503, { i: -1 });
  t.match(JSON.parse(down.body), { error: /history store unavailable: history.driver redis cannot reach Redis at .*the message was not published/ }, '503 naming the history store');
  const plain = await sdk.trigger('plain-channel', 'msg', { i: 0 });
  t.equal(plain.status, 200, 'a channel without history is published as before (no Redis round trip)');
  c.send({ event: 'client-x', channel: 'private-h-1', data: {} });
  const refused = await c.event('pusher:error', undefined, 5000);
  t.match(refused.data, { message: /history store unavailable/ }, 'a client event on a history channel gets pusher:error');
  const late = srv.track(await RawClient.connect(srv.wsUrl()));
  await late.subscribe('room-r', { recover: { epoch: first.data.epoch, serial: 3 } });
  t.match((await late.event('pusher_internal:recovery', 'room-r')).data, { recovered: false, reason: 'unavailable' }, 'a resume while Redis is down: unavailable');
  await late.close();

  await redis.resume();
  await triggerUntil(srv, 'room-r', 200, { i: 4 });
  const changed = await c.next((f) => f.event === 'pusher_internal:recovery' && f.channel === 'room-r', 5000);
  t.match(changed.data, { recovered: false, reason: 'epoch_changed', serial: 0 }, 'the open subscription is told epoch_changed');
  t.not(changed.data.epoch, first.data.epoch, 'a new epoch');
  const live = await c.next((f) => f.event === 'msg' && iOf(f) === 4, 5000) as Serial;
  t.equal(live.__serial, 1, 'the new epoch starts at 1');

  // a serial given in Redis that never reached this node (as when its subscription was down): reported, not hidden
  t.match(await redis.command('HINCRBY hist:{hist.0}:m:app-id:room-r s 1'), /^:2/);
  await sdk.trigger('room-r', 'msg', { i: 5 });
  const gap = await c.next((f) => f.event === 'pusher_internal:recovery' && f.channel === 'room-r', 5000);
  t.match(gap.data, { epoch: changed.data.epoch, serial: 2, recovered: false, reason: 'unavailable', error: /messages 2 to 2 did not reach this server/ }, 'the gap is reported before the next message');
  t.equal((await c.next((f) => f.event === 'msg' && iOf(f) === 5, 5000) as Serial).__serial, 3);

  const again = srv.track(await RawClient.connect(srv.wsUrl()));
  await again.subscribe('room-r', { recover: { epoch: first.data.epoch, serial: 3 } });
  const rec = await again.event('pusher_internal:recovery', 'room-r');
  t.match(rec.data, { recovered: false, reason: 'epoch_changed', epoch: changed.data.epoch, serial: 3 }, 'a resume from the old epoch is refused');
});
