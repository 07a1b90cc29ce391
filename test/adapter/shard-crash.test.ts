// test-modes: once (its nodes have fixed shard counts)
// A shard of a cluster node crashes while it owns a presence channel with members on
// another node: its replacement gets the other nodes' members back from the primary
// (before the survivors' restores), so the node's clients hear no false member_removed,
// and a later leave on the other node still reaches them once. The same for watchlists:
// the replacement of a crashed user owner gets the other nodes' online users back, and the
// users that were online only on the crashed shard go offline on the other nodes too.

import t from 'tap';
import { ownerOf } from '../../src/channels/owner';
import { userOwnerOf } from '../../src/channels/users';
import { APP, eventually, RawClient, type Frame, type TestServer } from '../helpers/server';
import { startNodePair } from '../helpers/cluster';
import { settle } from '../helpers/settle';
import { startBackend } from './backends';

process.env.RINGCAST_TEST_HOOKS = '1';
const data = (f: Frame) => (typeof f.data === 'string' ? JSON.parse(f.data) : f.data) as { user_id: string };
const about = (c: RawClient, event: string, user: string) => c.frames.filter((f) => f.event === event && data(f).user_id === user);

t.test('a crashed owner shard gets the other nodes\' members back', async (t) => {
  const backend = await startBackend('redis');
  t.teardown(() => backend.stop());
  const cfg = { ...backend.config(), workers: 2 };
  const [a, b] = await startNodePair(t, cfg);

  const channel = 'presence-crash';
  const owner = ownerOf(APP.id, channel, 2);
  // watchers on node A, on both shards (the one on the crashing shard goes with it)
  const watchers: RawClient[] = [];
  while (new Set(watchers.map((w) => w.socketId.split('.')[0])).size < 2 && watchers.length < 40) {
    watchers.push(a.track(await RawClient.connect(a.wsUrl())));
  }
  for (const [i, w] of watchers.entries()) await w.subscribeAuthed(channel, { user_id: `w${i}`, user_info: {} });
  const remote = b.track(await RawClient.connect(b.wsUrl()));
  await remote.subscribeAuthed(channel, { user_id: 'r', user_info: {} });
  for (const w of watchers) await w.next((f) => f.event === 'pusher_internal:member_added' && data(f).user_id === 'r', 5000);

  const prefixes = a.server.testShardPrefixes!();
  await a.server.testCrashShard!(owner);
  const survivors = watchers.filter((w) => w.socketId.split('.')[0] !== prefixes[owner]);
  t.ok(survivors.length > 0, 'watchers on the surviving shard');
  await settle(a, survivors, channel);
  for (const w of survivors) t.equal(about(w, 'pusher_internal:member_removed', 'r').length, 0, 'no false member_removed of the remote user');

  await remote.close();
  for (const w of survivors) await w.next((f) => f.event === 'pusher_internal:member_removed' && data(f).user_id === 'r', 5000);
  await settle(a, survivors, channel);
  for (const w of survivors) t.equal(about(w, 'pusher_internal:member_removed', 'r').length, 0, 'member_removed once when the remote user leaves');
});

/** The watchlist events a client got, in order: "online:bob". */
function watchEvents(c: RawClient): string[] {
  const out: string[] = [];
  for (const f of c.frames) {
    if (f.event !== 'pusher_internal:watchlist_events') continue;
    for (const e of JSON.parse(f.data as string).events as { name: string; user_ids: string[] }[]) out.push(`${e.name}:${[...e.user_ids].sort().join(',')}`);
  }
  return out;
}
const until = (c: RawClient, n: number, what: string) => eventually(() => watchEvents(c).length >= n, 10_000, what);

async function signin(srv: TestServer, c: RawClient, user: { id: string; watchlist?: string[] }): Promise<void> {
  c.send({ event: 'pusher:signin', data: srv.sdk().authenticateUser(c.socketId, user) });
  await c.event('pusher:signin_success', undefined, 5000);
}

/** A connection to `srv` on (on = true) or off the shard with socket id prefix `prefix`. */
async function connectOn(srv: TestServer, prefix: string, on: boolean): Promise<RawClient> {
  for (let i = 0; i < 40; i++) {
    const c = srv.track(await RawClient.connect(srv.wsUrl()));
    if ((c.socketId.split('.')[0] === prefix) === on) return c;
  }
  throw new Error('no connection landed where wanted');
}

t.test('a crashed user owner gets the other nodes\' online users back; its own users go offline everywhere', async (t) => {
  const backend = await startBackend('redis');
  t.teardown(() => backend.stop());
  const cfg = { ...backend.config(), workers: 2, apps: [{ ...APP, enable_watchlist_events: true }] };
  const [a, b] = await startNodePair(t, cfg);

  const X = 0; // node A's shard that crashes
  const owned = (prefix: string) => {
    for (let k = 0; ; k++) if (userOwnerOf(APP.id, `${prefix}-${k}`, 2) === X) return `${prefix}-${k}`;
  };
  const remoteUser = owned('rbob'); // online on node B, owned on node A by shard X
  const crashedUser = owned('xuser'); // its only connection on shard X of node A, which owns it
  const prefix = a.server.testShardPrefixes!()[X];

  const watcherA = await connectOn(a, prefix, false);
  await signin(a, watcherA, { id: 'aw', watchlist: [remoteUser] });
  const watcherB = b.track(await RawClient.connect(b.wsUrl()));
  await signin(b, watcherB, { id: 'bw', watchlist: [crashedUser] });
  const onB = b.track(await RawClient.connect(b.wsUrl()));
  await signin(b, onB, { id: remoteUser });
  await until(watcherA, 1, 'node A\'s watcher to hear the user on node B come online');
  await signin(a, await connectOn(a, prefix, true), { id: crashedUser });
  await until(watcherB, 1, 'node B\'s watcher to hear the user on shard X of node A come online');

  await a.server.testCrashShard!(X);
  await until(watcherB, 2, 'node B\'s watcher to hear the crashed shard\'s user go offline');
  await onB.close();
  await until(watcherA, 2, 'node A\'s watcher to hear the user on node B go offline');
  t.same(watchEvents(watcherA), [`online:${remoteUser}`, `offline:${remoteUser}`], 'no false offline of the remote user after the restart; the real one once');

  // the marker for node B's watcher: the user signs in again on node A
  await signin(a, a.track(await RawClient.connect(a.wsUrl())), { id: crashedUser });
  await until(watcherB, 3, 'node B\'s watcher to hear the user come back');
  t.same(watchEvents(watcherB), [`online:${crashedUser}`, `offline:${crashedUser}`, `online:${crashedUser}`], 'offline once for the user of the crashed shard');
});
