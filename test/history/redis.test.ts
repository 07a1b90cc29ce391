// history.driver redis / redis-cluster (history/redis.ts) with real ringcast nodes and a
// real redis-server or 3-master redis cluster: every node numbers and stores one sequence
// per channel. A pusher-js client with the plug-in, cut off node A (TCP reset), resumes
// exactly on node B after 200 messages per channel published on both nodes; both nodes
// deliver the same serials in the same order; a stock client gets the rewind on the other
// node; REST history on B sees A's messages. On one node: Redis down answers 503 (API) and
// pusher:error (client event) on history channels while other channels go on, and a Redis
// restart (AOF, fsync always: its data survives) changes the epoch, told as epoch_changed;
// messages numbered in Redis that never reached the node are fetched again (after its
// subscription to Redis broke, and on a gap in the stream), more than max_recover of them
// reported as a gap (unavailable).
// Workers 1 and 4 (RINGCAST_TEST_WORKERS).
import { createRequire } from 'node:module';
import path from 'node:path';
import { Redis } from 'ioredis';
import t, { type Test } from 'tap';
import type { ConfigInput } from '../../src/config';
import { subjectIndexOf } from '../../src/history/redis';
import { startBackend } from '../adapter/backends';
import { startNodePair } from '../helpers/cluster';
import { cutProxy } from '../helpers/cut-proxy';
import { rawRequest, signedGet } from '../helpers/http';
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
/** An app without history channels: its /up/{appId} does not depend on the history Redis. */
const OTHER = { id: 'other-id', key: 'other-key', secret: 'other-secret' };
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

    // the question must reach Redis before the client can publish on seeing
    // subscription_succeeded (a rare race remains: see docs/history.md)
    for (let k = 0; k < 1; k++) await t.test('rewind for a stock pusher-js client on the other node', async (t) => {
      const ch = 'rw-a' + k;
      await publish([ch], 1, 8);
      const pusher = b.track(pusherJs(b.port));
      await connected(pusher);
      const got = (await subscribeNumbered(pusher, [ch])).get(ch)!;
      await publish([ch], 9, 9); // node A: live after the rewind
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
/** A redis-server and one node on it with the history driver redis (both stopped when `t` ends). */
async function oneNode(t: Test): Promise<{ redis: RedisServer; srv: TestServer }> {
  const redis = await RedisServer.start();
  t.teardown(() => redis.stop());
  const srv = await startServer({
    database: { redis: { host: '127.0.0.1', port: redis.port } }, history: { driver: 'redis' },
    apps: [{ ...APP, channel_history: HISTORY as never }],
  });
  t.teardown(() => srv.stop());
  return { redis, srv };
}

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
    database: { redis: { host: '127.0.0.1', port: redis.port } }, history: { driver: 'redis', max_recover: 3 },
    apps: [{ ...APP, enable_client_messages: true, channel_history: HISTORY as never }, OTHER],
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

  t.equal((await rawRequest(srv.port, 'GET', `/up/${APP.id}`)).status, 200, '/up/{appId} 200 while Redis is up');
  await redis.kill();
  const down = await triggerUntil(srv, 'room-r', 503, { i: -1 });
  // every shard sees it: whichever answers /up
  await eventually(async () => (await rawRequest(srv.port, 'GET', `/up/${APP.id}`)).status === 503, 10_000, '/up/{appId} to answer 503');
  t.match((await rawRequest(srv.port, 'GET', `/up/${APP.id}`)).text, /App app-id is not available: the history store \(history.driver redis\) cannot be reached/, '/up/{appId} names the history store');
  const other = await rawRequest(srv.port, 'GET', `/up/${OTHER.id}`);
  t.equal(other.status, 200, '/up/{appId} of an app without history channels: 200');
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
  await eventually(async () => (await rawRequest(srv.port, 'GET', `/up/${APP.id}`)).status === 200, 10_000, '/up/{appId} to answer 200 again');
  const changed = await c.next((f) => f.event === 'pusher_internal:recovery' && f.channel === 'room-r', 5000);
  t.match(changed.data, { recovered: false, reason: 'epoch_changed', serial: 0 }, 'the open subscription is told epoch_changed');
  t.not(changed.data.epoch, first.data.epoch, 'a new epoch');
  const live = await c.next((f) => f.event === 'msg' && iOf(f) === 4, 5000) as Serial;
  t.equal(live.__serial, 1, 'the new epoch starts at 1');

  // messages numbered and stored in Redis that never reached this node (as while its
  // subscription was down): numbered here by hand, without the publish
  const store = new Redis({ host: '127.0.0.1', port: redis.port });
  t.teardown(() => store.disconnect());
  const lost = (first: number, n: number) => store.eval(`for k = 0, tonumber(ARGV[1]) - 1 do
      redis.call('HINCRBY', KEYS[1], 's', 1)
      redis.call('RPUSH', KEYS[2], ARGV[2] .. ' ' .. cjson.encode({event = 'msg', channel = 'room-r', data = cjson.encode({i = tonumber(ARGV[3]) + k})}))
    end
    return redis.call('HGET', KEYS[1], 's')`, 2, 'hist:{hist.0}:m:app-id:room-r', 'hist:{hist.0}:l:app-id:room-r', n, Date.now(), first);
  /** The next frames of room-r after `from`: msg i and recovery notices, until message `until`. */
  const upTo = async (from: number, until: number) => {
    await eventually(() => c.frames.slice(from).some((f) => f.event === 'msg' && f.channel === 'room-r' && iOf(f) === until), 5000, `message ${until}`);
    return c.frames.slice(from).filter((f) => f.channel === 'room-r' && (f.event === 'msg' || f.event === 'pusher_internal:recovery'))
      .map((f) => (f.event === 'msg' ? `${iOf(f)}@${(f as Serial).__serial}` : `${(f.data as { reason: string }).reason}@${(f.data as { serial: number }).serial}`));
  };
  t.equal(await lost(41, 2), '3');
  // the subscription to Redis breaks: once it is back, what was numbered meanwhile is fetched
  let from = c.frames.length;
  t.match(await redis.command('CLIENT KILL TYPE pubsub'), /^:[1-9]/);
  t.same(await upTo(from, 42), ['41@2', '42@3'], 'missed while the subscription to Redis was down: fetched once it is back, no new publish needed');
  // a gap seen in the stream: the missing messages fetched before the next one
  t.equal(await lost(45, 1), '4');
  from = c.frames.length;
  // a shard whose Redis subscriber is still coming back from the kill above answers 503 (nothing published)
  await triggerUntil(srv, 'room-r', 200, { i: 5 });
  t.same(await upTo(from, 5), ['45@4', '5@5'], 'a gap in the stream: the missing message fetched, in order, no notice');
  // more than max_recover missed: reported, not fetched
  t.equal(await lost(51, 4), '9');
  from = c.frames.length;
  await sdk.trigger('room-r', 'msg', { i: 6 });
  t.same(await upTo(from, 6), ['unavailable@9', '6@10'], 'more than max_recover missed: the gap is reported before the next message');
  const gap = c.frames.slice(from).find((f) => f.event === 'pusher_internal:recovery')!;
  t.match(gap.data, { epoch: changed.data.epoch, serial: 9, recovered: false, reason: 'unavailable', error: /messages 6 to 9 did not reach this server/ });

  const again = srv.track(await RawClient.connect(srv.wsUrl()));
  await again.subscribe('room-r', { recover: { epoch: first.data.epoch, serial: 3 } });
  const rec = await again.event('pusher_internal:recovery', 'room-r');
  t.match(rec.data, { recovered: false, reason: 'epoch_changed', epoch: changed.data.epoch, serial: 10 }, 'a resume from the old epoch is refused');
});

t.test(`history.driver redis: a subscription answered while its topic fetches missed messages is asked again, exactly once for both (${WORKERS} workers)`, async (t) => {
  const { redis, srv } = await oneNode(t);
  const sdk = srv.sdk();
  const store = new Redis({ host: '127.0.0.1', port: redis.port });
  t.teardown(() => store.disconnect());
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  await c.subscribe('room-d', { recover: {} });
  const first = await c.event('pusher_internal:recovery', 'room-d');
  for (let i = 1; i <= 3; i++) await sdk.trigger('room-d', 'msg', { i });
  await eventually(() => c.frames.some((f) => f.event === 'msg' && iOf(f) === 3), 5000, 'message 3');
  // Redis busy for 400 ms, then: message 4 numbered and stored but never published (as if
  // lost on the way), message 5 published: a gap in this node's stream. A subscription's
  // question sent meanwhile is answered behind message 5, while the node fetches 4 again.
  const busy = store.eval(`local function ms() local t = redis.call('TIME') return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) end
    local start = ms()
    repeat until ms() - start >= 400
    local epoch = redis.call('HGET', KEYS[1], 'e')
    local s = 0
    for i = 4, 5 do
      s = redis.call('HINCRBY', KEYS[1], 's', 1)
      local f = cjson.encode({event = 'msg', channel = 'room-d', data = cjson.encode({i = i})})
      redis.call('RPUSH', KEYS[2], ARGV[1] .. ' ' .. f)
      if i == 5 then redis.call('PUBLISH', ARGV[2], 'p\\n' .. epoch .. '\\n' .. s .. '\\n["app-id","room-d","",null]\\n' .. f) end
    end
    return s`, 2, 'hist:{hist.0}:m:app-id:room-d', 'hist:{hist.0}:l:app-id:room-d', Date.now(), `hist:{hist.0}:${subjectIndexOf('app-id', 'room-d')}`);
  await new Promise((r) => setTimeout(r, 100)); // (the script runs; the subscribe below reaches Redis behind it)
  const d = srv.track(await RawClient.connect(srv.wsUrl()));
  await d.subscribe('room-d', { recover: { epoch: first.data.epoch, serial: 1 } });
  t.equal(await busy, 5);
  const rec = await d.event('pusher_internal:recovery', 'room-d', 5000);
  t.match(rec.data, { epoch: first.data.epoch, recovered: true, serial: 5, missed: 4 }, 'the newcomer: recovered up to 5');
  await sdk.trigger('room-d', 'msg', { i: 6 });
  const msgs = (x: RawClient) => eventually(() => x.frames.some((f) => f.event === 'msg' && iOf(f) === 6), 5000, 'message 6')
    .then(() => x.frames.filter((f) => f.event === 'msg' || f.event === 'pusher_internal:recovery').map((f) => (f.event === 'msg' ? `${iOf(f)}@${(f as Serial).__serial}` : f.event)));
  t.same(await msgs(c), ['1@1', '2@2', '3@3', '4@4', '5@5', '6@6'], 'the subscriber: message 4 fetched before 5, each once, no notice');
  t.same(await msgs(d), ['2@2', '3@3', '4@4', '5@5', '6@6'], 'the newcomer: its replay and the live messages, each once');
});

t.test(`history.driver redis: a channel's numbering is kept while it has subscribers (with positions or stock), then lapses after meta_ttl (${WORKERS} workers)`, async (t) => {
  const redis = await RedisServer.start();
  t.teardown(() => redis.stop());
  const META_TTL = 2;
  const srv = await startServer({
    database: { redis: { host: '127.0.0.1', port: redis.port } }, history: { driver: 'redis', meta_ttl: META_TTL },
    apps: [{ ...APP, channel_history: HISTORY as never }],
  });
  t.teardown(() => srv.stop());
  const sdk = srv.sdk();
  const meta = 'hist:{hist.0}:m:app-id:room-k';
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  await c.subscribe('room-k', { recover: {} });
  const first = await c.event('pusher_internal:recovery', 'room-k');
  await sdk.trigger('room-k', 'msg', { i: 1 });
  t.equal((await c.next((f) => f.event === 'msg' && iOf(f) === 1, 5000) as Serial).__serial, 1);
  /** Quiet for three meta_ttl, checking every 500 ms that the key is still there (touched meanwhile). */
  const quiet = async (key: string) => {
    const until = Date.now() + 3 * META_TTL * 1000;
    while (Date.now() < until) {
      const there = /^:1/.test(await redis.command(`EXISTS ${key}`));
      t.ok(there, `${key} is there`);
      if (!there) break;
      await new Promise((r) => setTimeout(r, 500));
    }
  };
  await quiet(meta); // the subscriber's shard touches the meta meanwhile
  await sdk.trigger('room-k', 'msg', { i: 2 });
  const next = await c.next((f) => (f.event === 'msg' && iOf(f) === 2) || (f.event === 'pusher_internal:recovery' && f.channel === 'room-k'), 5000);
  t.equal(next.event, 'msg', 'no epoch_changed before it');
  t.equal((next as Serial).__serial, 2, 'the same epoch goes on at 2');
  // without a subscription with positions the meta lapses after meta_ttl: the touches were what kept it
  await c.close();
  await eventually(async () => /^:0/.test(await redis.command(`EXISTS ${meta}`)), 10 * META_TTL * 1000, 'the meta to lapse');
  const d = srv.track(await RawClient.connect(srv.wsUrl()));
  await d.subscribe('room-k', { recover: { epoch: first.data.epoch, serial: 2 } });
  t.match((await d.event('pusher_internal:recovery', 'room-k')).data, { recovered: false, reason: 'epoch_changed' }, 'a resume after it lapsed: epoch_changed');

  // a stock subscriber (no recover) keeps it too (the protocol: kept while it has subscribers)
  const stockMeta = 'hist:{hist.0}:m:app-id:room-s';
  const s = srv.track(await RawClient.connect(srv.wsUrl()));
  await s.subscribe('room-s');
  const page = async () => (await signedGet(srv.port, APP, 'channels/room-s/history', { direction: 'forwards' })).json as { epoch: string; items: { serial: number }[] };
  await sdk.trigger('room-s', 'msg', { i: 1 });
  await s.next((f) => f.event === 'msg' && iOf(f) === 1, 5000);
  const before = await page();
  await quiet(stockMeta);
  await sdk.trigger('room-s', 'msg', { i: 2 });
  await s.next((f) => f.event === 'msg' && iOf(f) === 2, 5000);
  const after = await page();
  t.equal(after.epoch, before.epoch, 'a stock subscriber kept the epoch (REST history)');
  t.same(after.items.map((x) => x.serial), [1, 2], 'the same epoch goes on at 2');
  await s.close();
  await eventually(async () => /^:0/.test(await redis.command(`EXISTS ${stockMeta}`)), 10 * META_TTL * 1000, 'the meta to lapse once the stock subscriber left');
});

t.test(`history.driver redis: a subscription Redis refused is asked again while connected, not only at the next reconnect (${WORKERS} workers)`, async (t) => {
  const { redis, srv } = await oneNode(t);
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  await c.subscribe('room-acl');
  await triggerUntil(srv, 'room-acl', 200, { i: 1 });
  const admin = new Redis({ host: '127.0.0.1', port: redis.port });
  t.teardown(() => admin.disconnect());
  /** Subscribes of the history subscribers that Redis refused (its ACL LOG: one entry per channel refused, with a count). */
  const refused = async () => {
    let n = 0;
    for (const e of await admin.call('ACL', 'LOG', '100') as string[][]) {
      const f = new Map<string, string>();
      for (let i = 0; i + 1 < e.length; i += 2) f.set(String(e[i]), String(e[i + 1]));
      if (f.get('reason') === 'channel' && f.get('client-info')?.includes('name=ringcast-history-sub')) n += Number(f.get('count'));
    }
    return n;
  };
  // every channel denied: Redis drops the history subscribers; their subscribe after the reconnect is refused (NOPERM)
  t.match(await redis.command('ACL SETUSER default resetchannels'), /^\+OK/);
  await eventually(async () => (await refused()) >= WORKERS, 10_000, 'every shard\'s history subscribe to be refused');
  await triggerUntil(srv, 'room-acl', 503, { i: -1 });
  t.pass('a publish on a history channel: 503 while the numbered messages cannot be heard');
  // allowed again: no reconnect happens; the refused subscribe is asked again
  t.match(await redis.command('ACL SETUSER default allchannels'), /^\+OK/);
  // every shard asks again on its own second: published (200) once one listens, delivered to
  // this stock subscriber once its shard does too (what it missed meanwhile is not fetched)
  let i = 1;
  await eventually(async () => {
    await triggerUntil(srv, 'room-acl', 200, { i: ++i });
    return c.frames.some((f) => f.event === 'msg' && iOf(f) > 1);
  }, 20_000, 'a publish answered 200 and delivered again');
  t.pass('published and delivered again');
});
