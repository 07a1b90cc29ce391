// test-modes: once (its nodes have fixed shard counts)
// test-split: LOGIC_BACKENDS (every test is inside the loop over the backends: one process per backend)
// Watchlists across nodes (adapter/watchlist.ts), for every backend: a user is online
// while it has a signed-in connection on any node; each watcher, whatever its node, hears
// `online` once when the first connection of the cluster signs in and `offline` once when
// the last one goes; the state a watcher gets at sign-in counts every node, a node that
// joins later included; a node killed with -9 takes its users offline within
// node_timeout_ms + cleanup_interval_ms, once; transitions lost while the backend was
// down are made good when it is back.
//
// "Once" is checked with a positive marker: a later transition of the same user, whose
// event comes after anything the earlier ones could have caused.
//
// The bound on "once" (adapter/watchlist.ts): a node learns of another node's sign-in one
// backend hop later; a tab closed on it within that hop makes its watchers hear
// offline + online. The test waits out the hop with a barrier user: one owned by the same
// shard as bob, signed in on node A after bob; once node B's watcher hears of it, node B's
// owner of bob has node A's sign-in of bob too (one owner, one ordered path).

import t, { type Test } from 'tap';
import { userOwnerOf } from '../../src/channels/users';
import { APP, eventually, RawClient, startServer, type Frame, type TestServer } from '../helpers/server';
import { startNodePair } from '../helpers/cluster';
import { LOGIC_BACKENDS as BACKENDS, startBackend, type Backend } from './backends';
import { HEALTH, startChild } from './child';

const WATCH_APP = { ...APP, enable_watchlist_events: true };

function nodeConfig(backend: Backend) {
  const cfg = { ...backend.config(), workers: 2, apps: [WATCH_APP] };
  return { ...cfg, adapter: { ...cfg.adapter, cluster_health: HEALTH } };
}

async function connect(t: Test, url: string): Promise<RawClient> {
  const c = await RawClient.connect(url);
  t.teardown(() => c.close().catch(() => undefined));
  return c;
}

/** Signs `c` in as `user` (signed with `srv`'s app secret: every node has the same app). */
async function signin(srv: TestServer, c: RawClient, user: { id: string; watchlist?: string[] }): Promise<void> {
  c.send({ event: 'pusher:signin', data: srv.sdk().authenticateUser(c.socketId, user) });
  await c.event('pusher:signin_success', undefined, 5000);
}

/** The watchlist events a client got, in order: "online:bob,carol". */
function watchEvents(c: RawClient): string[] {
  const out: string[] = [];
  for (const f of c.frames as Frame[]) {
    if (f.event !== 'pusher_internal:watchlist_events') continue;
    for (const e of JSON.parse(f.data as string).events as { name: string; user_ids: string[] }[]) out.push(`${e.name}:${[...e.user_ids].sort().join(',')}`);
  }
  return out;
}

/** A user id owned by the same shard as `userId` (with 2 shards per node). */
function sameOwner(userId: string): string {
  for (let i = 0; ; i++) if (userOwnerOf(APP.id, `barrier-${i}`, 2) === userOwnerOf(APP.id, userId, 2)) return `barrier-${i}`;
}

/** Waits until `c` got `n` watchlist events. */
const until = (c: RawClient, n: number, what: string) => eventually(() => watchEvents(c).length >= n, 10_000, what);

for (const name of BACKENDS) {
  t.test(`${name}: watchlist events count every node`, async (t) => {
    const backend = await startBackend(name);
    t.teardown(() => backend.stop());
    const [a, b] = await startNodePair(t, nodeConfig(backend));

    const onA = await connect(t, a.wsUrl());
    await signin(a, onA, { id: 'alice', watchlist: ['bob', 'carol'] });
    const barrier = sameOwner('bob');
    const onB = await connect(t, b.wsUrl());
    await signin(b, onB, { id: 'erin', watchlist: ['bob', 'carol', barrier] });

    // bob: a tab on node B, then one on node A; B's closes first, then A's
    const bobB = await connect(t, b.wsUrl());
    await signin(b, bobB, { id: 'bob' });
    await until(onA, 1, 'the watcher on node A to hear bob (on node B) come online');
    await until(onB, 1, 'the watcher on node B to hear bob come online');
    const bobA = await connect(t, a.wsUrl());
    await signin(a, bobA, { id: 'bob' });
    const barrierA = await connect(t, a.wsUrl());
    await signin(a, barrierA, { id: barrier });
    await until(onB, 2, 'node B to hear of the barrier user, so of bob\'s tab on node A');
    await bobB.close();
    await bobA.close();
    await until(onA, 2, 'the watcher on node A to hear bob go offline');
    await until(onB, 3, 'the watcher on node B to hear bob go offline');

    // carol on node A; the watcher on node B hears of her, and a watcher signing in on
    // node B afterwards gets her in its initial state
    const carol = await connect(t, a.wsUrl());
    await signin(a, carol, { id: 'carol' });
    await until(onB, 4, 'the watcher on node B to hear carol (on node A) come online');
    const late = await connect(t, b.wsUrl());
    await signin(b, late, { id: 'frank', watchlist: ['bob', 'carol'] });
    await until(late, 1, 'the late watcher\'s initial state');
    t.same(watchEvents(late), ['online:carol'], 'the initial state counts the users of node A');

    // the marker: bob once more, from node B
    const bobAgain = await connect(t, b.wsUrl());
    await signin(b, bobAgain, { id: 'bob' });
    for (const [who, c, n] of [['node A', onA, 4], ['node B', onB, 5], ['the late watcher', late, 2]] as const) {
      await until(c, n, `${who}'s watcher to hear bob's return`);
    }
    t.same(watchEvents(onA), ['online:bob', 'offline:bob', 'online:carol', 'online:bob'], 'node A\'s watcher: each transition of the cluster once');
    t.same(watchEvents(onB), ['online:bob', `online:${barrier}`, 'offline:bob', 'online:carol', 'online:bob'], 'node B\'s watcher: each transition of the cluster once');
    t.same(watchEvents(late), ['online:carol', 'online:bob'], 'the late watcher: its initial state, then bob');
  });

  t.test(`${name}: a joining node learns the online users; a killed node's users go offline once`, async (t) => {
    const backend = await startBackend(name);
    t.teardown(() => backend.stop());
    const cfg = nodeConfig(backend);
    const a = await startServer(cfg);
    t.teardown(() => a.stop());
    const early = await connect(t, a.wsUrl());
    await signin(a, early, { id: 'early' });
    const watcher = await connect(t, a.wsUrl());
    await signin(a, watcher, { id: 'wanda', watchlist: ['doomed'] });

    const { child, port } = await startChild(t, (port) => ({ ...cfg, host: '127.0.0.1', port, log: { level: 'error' } }));
    await eventually(() => a.server.cluster!.nodes().length === 2, 10_000, 'node A to see the child node');
    const childUrl = `ws://127.0.0.1:${port}/app/${APP.key}?protocol=7`;
    const onChild = await connect(t, childUrl);
    await signin(a, onChild, { id: 'walt', watchlist: ['early', 'doomed'] });
    await until(onChild, 1, 'the watcher on the new node to learn that early (on node A) is online');

    const doomed = await connect(t, childUrl);
    await signin(a, doomed, { id: 'doomed' });
    await until(watcher, 1, 'the watcher on node A to hear doomed (on the child) come online');

    const killedAt = Date.now();
    child.kill('SIGKILL');
    await until(watcher, 2, 'the watcher on node A to hear doomed go offline');
    const took = Date.now() - killedAt;
    t.ok(took <= HEALTH.node_timeout_ms + HEALTH.cleanup_interval_ms + HEALTH.heartbeat_interval_ms + 1000,
      `offline within node_timeout + cleanup (+ a heartbeat and slack): ${took} ms`);

    // the marker: doomed signs in again, on node A
    const back = await connect(t, a.wsUrl());
    await signin(a, back, { id: 'doomed' });
    await until(watcher, 3, 'the watcher to hear doomed come back');
    t.same(watchEvents(watcher), ['online:doomed', 'offline:doomed', 'online:doomed'], 'offline once for the killed node');
    t.same(watchEvents(onChild)[0], 'online:early', 'the new node\'s watcher got the user online on node A');
  });
}

for (const name of BACKENDS) {
  t.test(`${name}: transitions lost in a backend outage are made good when it is back`, async (t) => {
    const backend = await startBackend(name);
    t.teardown(() => backend.stop());
    // default cluster health (30 s timeout): nobody is declared failed around the outage
    const cfg = { ...backend.config(), workers: 2, apps: [WATCH_APP] };
    const [a, b] = await startNodePair(t, cfg);

    const watcher = await connect(t, a.wsUrl());
    await signin(a, watcher, { id: 'wendy', watchlist: ['bob', 'carol'] });
    const bob = await connect(t, b.wsUrl());
    await signin(b, bob, { id: 'bob' });
    await until(watcher, 1, 'the watcher on node A to hear bob (on node B) come online');

    await backend.kill();
    await eventually(() => !a.server.cluster!.isUp() && !b.server.cluster!.isUp(), 10_000, 'both nodes to see the backend down');
    await bob.close();
    const carol = await connect(t, b.wsUrl());
    await signin(b, carol, { id: 'carol' });
    await backend.resume();
    await eventually(() => a.server.cluster!.isUp() && b.server.cluster!.isUp(), 20_000, 'both nodes to reconnect');
    await until(watcher, 3, 'the watcher to hear what happened on node B during the outage');

    // the marker: bob once more on node B
    const again = await connect(t, b.wsUrl());
    await signin(b, again, { id: 'bob' });
    await until(watcher, 4, 'the watcher to hear bob come back');
    const got = watchEvents(watcher);
    t.equal(got[0], 'online:bob');
    t.same(got.slice(1, 3).sort(), ['offline:bob', 'online:carol'], 'bob\'s offline and carol\'s online, lost in the outage, once each');
    t.same(got.slice(3), ['online:bob'], 'then bob\'s return, and nothing else');
  });
}
