// test-modes: once (its nodes have fixed shard counts)
// test-split: BACKENDS (every test is inside the loop over the backends: one process per backend)
// Two ringcast nodes (each with 2 shards) behind one backend, for every backend: a
// publish on either node reaches both nodes' subscribers once and in order, socket_id
// exclusion crosses nodes, client events cross nodes, nodes see each other and forget a
// stopped one, and a backend outage never stops local delivery (cross-node delivery comes
// back by itself once the backend does).

import t, { type Test } from 'tap';
import { APP, startServer, eventually, RawClient, type Frame, type TestServer } from '../helpers/server';
import { startNodePair } from '../helpers/cluster';
import { rawRequest, signedGet, signedPost } from '../helpers/http';
import { settle } from '../helpers/settle';
import { BACKENDS, startBackend, type Backend } from './backends';

const NODE_WORKERS = 2;
/** An app limited to 4 connections over the cluster. */
const LIMITED = { id: 'limited-id', key: 'limited-key', secret: 'limited-secret', max_connections: 4 } as const;

async function twoNodes(t: Test, backend: Backend): Promise<[TestServer, TestServer]> {
  const cfg = {
    ...backend.config(), workers: NODE_WORKERS, tag_filtering: { enabled: true },
    apps: [{ ...APP, subscription_count_events: true }, { ...LIMITED }],
  };
  return startNodePair(t, cfg);
}

const data = (f: Frame): unknown => typeof f.data === 'string' ? JSON.parse(f.data) : f.data;
const named = (c: RawClient, event: string) => c.frames.filter((f: Frame) => f.event === event);

for (const name of BACKENDS) {
  t.test(`${name}`, async (t) => {
    const backend = await startBackend(name);
    t.teardown(() => backend.stop());
    const [a, b] = await twoNodes(t, backend);

    t.test('a publish on either node reaches every node once, in the order of its node', async (t) => {
      const ca = a.track(await RawClient.connect(a.wsUrl()));
      const cb = b.track(await RawClient.connect(b.wsUrl()));
      const channel = `order-${name}`;
      await ca.subscribe(channel);
      await cb.subscribe(channel);
      const COUNT = 50;
      const sdkA = a.sdk();
      for (let i = 0; i < COUNT; i++) await sdkA.trigger(channel, 'n', { i });
      const sdkB = b.sdk();
      for (let i = COUNT; i < 2 * COUNT; i++) await sdkB.trigger(channel, 'n', { i });
      // markers from both nodes: whatever either publish made arrive is there by then
      await settle(a, [ca, cb], channel);
      await settle(b, [ca, cb], channel);
      for (const [who, c] of [['node A', ca], ['node B', cb]] as const) {
        const got = named(c, 'n').map((f) => JSON.parse(f.data as string).i as number);
        // order holds per publishing node (not between two nodes' publishes)
        t.same(got.filter((i) => i < COUNT), Array.from({ length: COUNT }, (_, i) => i), `${who}'s client got node A's publishes once, in order`);
        t.same(got.filter((i) => i >= COUNT), Array.from({ length: COUNT }, (_, i) => COUNT + i), `${who}'s client got node B's publishes once, in order`);
        t.equal(got.length, 2 * COUNT, 'and nothing else');
      }
    });

    t.test('socket_id exclusion works across nodes', async (t) => {
      const ca = a.track(await RawClient.connect(a.wsUrl()));
      const cb = b.track(await RawClient.connect(b.wsUrl()));
      const channel = `except-${name}`;
      await ca.subscribe(channel);
      await cb.subscribe(channel);
      t.not(ca.socketId.split('.')[0], cb.socketId.split('.')[0], 'socket ids of the two nodes differ');
      await a.sdk().trigger(channel, 'x', { n: 1 }, { socket_id: cb.socketId });
      await settle(a, [ca, cb], channel);
      t.equal(named(ca, 'x').length, 1, 'the other client got it');
      t.equal(named(cb, 'x').length, 0, 'the excluded client on the other node did not');
    });

    t.test('client events cross nodes', async (t) => {
      const ca = a.track(await RawClient.connect(a.wsUrl()));
      const cb = b.track(await RawClient.connect(b.wsUrl()));
      const channel = `private-client-${name}`;
      t.equal((await ca.subscribeAuthed(channel)).event, 'pusher_internal:subscription_succeeded');
      t.equal((await cb.subscribeAuthed(channel)).event, 'pusher_internal:subscription_succeeded');
      ca.send({ event: 'client-hello', channel, data: { from: 'a' } });
      const got = await cb.event('client-hello', channel, 5000);
      t.same(got.data, { from: 'a' }, 'the client on node B got it');
      await settle(b, [ca, cb], channel);
      t.equal(named(ca, 'client-hello').length, 0, 'not echoed to the sender');
    });

    t.test('channel questions are answered for the whole cluster', async (t) => {
      const channel = `presence-cw-${name}`;
      const a1 = a.track(await RawClient.connect(a.wsUrl()));
      const b1 = b.track(await RawClient.connect(b.wsUrl()));
      const b2 = b.track(await RawClient.connect(b.wsUrl()));
      // user 1 has a tab on each node; user 2 is on node B only
      for (const [c, id] of [[a1, 'u1'], [b1, 'u1'], [b2, 'u2']] as const) {
        t.equal((await c.subscribeAuthed(channel, { user_id: id, user_info: { n: id } })).event, 'pusher_internal:subscription_succeeded');
      }
      const pub = `public-cw-${name}`;
      await b1.subscribe(pub);
      await eventually(async () => {
        const r = await signedGet(a.port, APP, `channels/${channel}`, { info: 'user_count,subscription_count' });
        return r.status === 200 && r.json.user_count === 2 && r.json.subscription_count === 3;
      }, 5000, 'node A to count 2 users and 3 subscriptions over both nodes');
      const one = await signedGet(a.port, APP, `channels/${pub}`, { info: 'subscription_count' });
      t.same(one.json, { occupied: true, subscription_count: 1 }, 'a channel with subscribers on node B only is occupied on node A');
      const list = await signedGet(a.port, APP, 'channels', { filter_by_prefix: 'presence-', info: 'user_count' });
      t.same(list.json.channels[channel], { user_count: 2 }, 'the channel list counts distinct users over the cluster');
      const all = await signedGet(a.port, APP, 'channels', {});
      t.ok(pub in all.json.channels, 'the channel list has node B\'s channels');
      const users = await signedGet(a.port, APP, `channels/${channel}/users`, {});
      t.same(users.json.users.map((u: { id: string }) => u.id).sort(), ['u1', 'u2'], 'users: one entry per user over the cluster');
      // terminate_connections on node A closes the user's socket on node B
      b2.send({ event: 'pusher:signin', data: b.sdk().authenticateUser(b2.socketId, { id: 'u2' }) });
      await b2.event('pusher:signin_success');
      const r = await signedPost(a.port, APP, 'users/u2/terminate_connections', {});
      t.equal(r.status, 200);
      t.equal(await b2.closed(5000), 4009, 'the user\'s socket on node B is closed with 4009');
    });

    t.test('presence across nodes: a user joins once and leaves once in the cluster', async (t) => {
      const channel = `presence-x-${name}`;
      const watcherA = a.track(await RawClient.connect(a.wsUrl()));
      t.equal((await watcherA.subscribeAuthed(channel, { user_id: 'w', user_info: {} })).event, 'pusher_internal:subscription_succeeded');
      const watcherB = b.track(await RawClient.connect(b.wsUrl()));
      const snap = await watcherB.subscribeAuthed(channel, { user_id: 'wb', user_info: {} });
      const known = Object.keys((data(snap) as { presence: { hash: object } }).presence.hash);
      // node A's member reaches node B one backend hop after it joined: in the snapshot, or just after it
      if (!known.includes('w')) await watcherB.next((f) => f.event === 'pusher_internal:member_added' && (data(f) as { user_id: string }).user_id === 'w', 5000);
      t.pass('a joiner on node B knows node A\'s member');
      await watcherA.event('pusher_internal:member_added', channel, 5000); // wb
      // user u: a tab on node A, then a tab on node B
      const tabA = a.track(await RawClient.connect(a.wsUrl()));
      await tabA.subscribeAuthed(channel, { user_id: 'u', user_info: { tab: 'a' } });
      const tabB = b.track(await RawClient.connect(b.wsUrl()));
      await tabB.subscribeAuthed(channel, { user_id: 'u', user_info: { tab: 'b' } });
      await settle(a, [watcherA, watcherB], channel);
      await settle(b, [watcherA, watcherB], channel);
      const adds = (c: RawClient) => named(c, 'pusher_internal:member_added').filter((f) => (data(f) as { user_id: string }).user_id === 'u');
      const removes = (c: RawClient) => named(c, 'pusher_internal:member_removed').filter((f) => (data(f) as { user_id: string }).user_id === 'u');
      t.equal(adds(watcherA).length, 1, 'node A\'s watcher: member_added once');
      t.equal(adds(watcherB).length, 1, 'node B\'s watcher: member_added once');
      // the first tab closes: still a member (the other node has them)
      await tabA.close();
      await tabB.sync();
      await settle(a, [watcherA, watcherB], channel);
      // the last tab closes: member_removed once everywhere
      await tabB.close();
      await eventually(() => removes(watcherA).length > 0 && removes(watcherB).length > 0, 5000, 'member_removed on both nodes');
      await settle(a, [watcherA, watcherB], channel);
      await settle(b, [watcherA, watcherB], channel);
      t.equal(removes(watcherA).length, 1, 'node A\'s watcher: member_removed once');
      t.equal(removes(watcherB).length, 1, 'node B\'s watcher: member_removed once');
    });

    t.test('max_connections is counted over the cluster', async (t) => {
      const open: RawClient[] = [];
      t.teardown(() => Promise.all(open.map((c) => c.close().catch(() => undefined))));
      const connect = async (srv: TestServer) => {
        const c = await RawClient.connect(srv.wsUrl(LIMITED.key));
        open.push(c);
        return c;
      };
      for (const srv of [a, a, b, b]) t.not((await connect(srv)).socketId, '', 'accepted');
      // counts reach the other node within 100 ms + a hop: until then a fifth may get in
      for (const [who, srv] of [['A', a], ['B', b]] as const) {
        let refused: RawClient | null = null;
        await eventually(async () => {
          const c = await connect(srv);
          if (c.socketId === '') refused = c;
          else await c.close();
          return refused !== null;
        }, 5000, `node ${who} to refuse the fifth connection of the app`);
        t.equal(await refused!.closed(), 4004, `node ${who} refuses the fifth connection with 4004`);
      }
      await open[0].close();
      await eventually(async () => {
        const c = await connect(b);
        return c.socketId !== '';
      }, 5000, 'node B to accept once a connection on node A closed');
      t.pass('a freed slot on one node is usable on the other');
    });

    t.test('subscription_count counts the subscribers of every node', async (t) => {
      const channel = `count-${name}`;
      const ca = a.track(await RawClient.connect(a.wsUrl()));
      await ca.subscribe(channel);
      for (let i = 0; i < 2; i++) await b.track(await RawClient.connect(b.wsUrl())).subscribe(channel);
      await ca.next((f) => f.event === 'pusher_internal:subscription_count' && (data(f) as { subscription_count: number }).subscription_count === 3, 5000);
      t.pass('the client on node A was told 3 (1 here, 2 on node B)');
    });

    t.test('cache channels: a publish on one node is the replay on the other', async (t) => {
      const channel = `cache-x-${name}`;
      const ca = a.track(await RawClient.connect(a.wsUrl()));
      await ca.subscribe(channel); // node B's copy of the publish must reach a subscribed node
      await a.sdk().trigger(channel, 'price', { v: 42 });
      await ca.event('price', channel, 5000);
      let late: RawClient | null = null;
      await eventually(async () => {
        late = b.track(await RawClient.connect(b.wsUrl()));
        await late.subscribe(channel);
        await late.sync();
        return late.frames.some((f) => f.event === 'price');
      }, 5000, 'a late subscriber on node B to get the cached event');
      t.same(data(late!.frames.find((f) => f.event === 'price')!), { v: 42 }, 'the replay is the event published on node A');
    });

    t.test('tag filters apply to publishes from another node', async (t) => {
      const channel = `tagged-${name}`;
      const cb = b.track(await RawClient.connect(b.wsUrl()));
      t.equal((await cb.subscribe(channel, { filter: { key: 'region', cmp: 'eq', val: 'eu' } })).event, 'pusher_internal:subscription_succeeded');
      const sdk = a.sdk();
      for (const region of ['us', 'eu']) {
        const r = await signedPost(a.port, APP, 'events', { name: 'px', channel, data: region, tags: { region } });
        t.equal(r.status, 200, `published with region ${region}`);
      }
      void sdk;
      const got = await cb.event('px', channel, 5000);
      t.equal(got.data, 'eu', 'node B\'s filtered subscriber got only the matching event');
      await settle(a, [], channel); // a marker published on node A…
      const ok = await signedPost(a.port, APP, 'events', { name: 'px', channel, data: 'end', tags: { region: 'eu' } });
      t.equal(ok.status, 200);
      await cb.next((f) => f.event === 'px' && f.data === 'end', 5000); // …and a matching end mark after it
      t.equal(named(cb, 'px').length, 0, 'the other region never arrived');
    });

    t.test('server-to-user events reach the user on every node', async (t) => {
      const ua = a.track(await RawClient.connect(a.wsUrl()));
      const ub = b.track(await RawClient.connect(b.wsUrl()));
      for (const [c, srv] of [[ua, a], [ub, b]] as const) {
        c.send({ event: 'pusher:signin', data: srv.sdk().authenticateUser(c.socketId, { id: 'carol' }) });
        await c.event('pusher:signin_success');
        t.equal((await c.subscribe('#server-to-user-carol')).event, 'pusher_internal:subscription_succeeded');
      }
      await a.sdk().sendToUser('carol', 'note', { hi: 1 });
      for (const c of [ua, ub]) t.same((await c.event('note', '#server-to-user-carol', 5000)).data, JSON.stringify({ hi: 1 }), 'both tabs got it');
    });

    t.test('backend outage: publishes answered 503 with nothing delivered anywhere, then cross-node delivery comes back', async (t) => {
      const ca = a.track(await RawClient.connect(a.wsUrl()));
      const cb = b.track(await RawClient.connect(b.wsUrl()));
      const channel = `outage-${name}`;
      await ca.subscribe(channel);
      await cb.subscribe(channel);
      await backend.kill();
      await eventually(() => !a.server.cluster!.isUp() && !b.server.cluster!.isUp(), 10_000, 'both nodes to see the backend down');
      const down = await rawRequest(a.port, 'GET', `/up/${APP.id}`);
      t.equal(down.status, 503, '/up/{appId} answers 503 while the backend is down');
      t.match(down.json.error, /cluster backend/, 'naming the cluster backend');
      const refused = await signedPost(a.port, APP, 'events', { name: 'local', channel, data: '{"n":1}' });
      t.equal(refused.status, 503, 'a publish while the backend is down: 503 (adapter.when_down refuse)');
      t.match(refused.json.error, /cluster backend is down: nothing was delivered/, 'saying nothing was delivered');
      t.equal(refused.headers['retry-after'], '1', 'with Retry-After');
      await backend.resume();
      await eventually(() => a.server.cluster!.isUp() && b.server.cluster!.isUp(), 20_000, 'both nodes to reconnect');
      t.equal((await rawRequest(a.port, 'GET', `/up/${APP.id}`)).status, 200, '/up/{appId} is 200 again');
      // cross-node delivery is back: publish until node B's client gets one
      let n = 0;
      await eventually(async () => {
        await a.sdk().trigger(channel, 'again', { n: ++n });
        return named(cb, 'again').length > 0;
      }, 20_000, 'a cross-node publish after the backend came back');
      t.pass('cross-node delivery resumed');
      await ca.event('again', channel, 5000);
      t.same(named(ca, 'local'), [], 'the refused publish reached no subscriber, also not on its own node (the later one did)');
    });

    t.test('a stopped node is forgotten at once', async (t) => {
      const c = await startServer({ ...backend.config(), workers: NODE_WORKERS });
      await eventually(() => a.server.cluster!.nodes().length === 3, 10_000, 'node A to see the third node');
      await c.stop();
      await eventually(() => a.server.cluster!.nodes().length === 2, 5000, 'node A to forget the stopped node');
      t.pass('forgotten');
    });
  });
}
