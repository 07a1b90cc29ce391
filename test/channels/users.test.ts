// Watchlists, owner side (channels/users.ts), without threads: online/offline decided once
// per user, told to the shards with watchers; a dead shard's part dropped; a replacement's
// records rebuilt from the survivors and their watchers told what they missed.

import pino from 'pino';
import t from 'tap';
import type { ControlMsg } from '../../src/bus/messages';
import { UserStore, createUserOwner, type WatchOp } from '../../src/channels/users';

type Sent = [shard: number, op: WatchOp, ids: string[]];

function store(): { s: UserStore; sent: Sent[] } {
  const sent: Sent[] = [];
  return { s: new UserStore((shard, _app, op, ids) => sent.push([shard, op, ids])), sent };
}

t.test('online on the first connection, offline on the close of the last, to the watching shards only', async (t) => {
  const { s, sent } = store();
  t.same(s.watch('a', ['bob', 'carol'], 1), [], 'nobody online yet');
  s.watch('a', ['bob'], 1); // a second watcher on shard 1
  s.watch('a', ['bob'], 3);
  s.conn('a', 'bob', 0, 1);
  s.conn('a', 'bob', 2, 1);
  t.same(sent, [[1, 'online', ['bob']], [3, 'online', ['bob']]], 'once per watching shard, on the first connection');
  t.same(s.watch('a', ['bob', 'carol'], 2), ['bob'], 'a new watcher gets the online ones');
  sent.length = 0;
  s.conn('a', 'bob', 0, -1);
  s.conn('a', 'bob', 0, -1); // more closes than connections on a shard change nothing
  t.same(sent, [], 'still a connection on shard 2');
  s.conn('a', 'bob', 2, -1);
  t.same(sent, [[1, 'offline', ['bob']], [3, 'offline', ['bob']], [2, 'offline', ['bob']]]);
  sent.length = 0;
  s.conn('other-app', 'bob', 0, 1);
  t.same(sent, [], 'apps are apart');
  s.conn('other-app', 'bob', 0, -1);
  s.unwatch('a', ['bob'], 1);
  s.conn('a', 'bob', 0, 1);
  t.same(sent.map(([shard]) => shard).sort(), [1, 2, 3], 'shard 1 still has its other watcher');
  s.unwatch('a', ['bob'], 1);
  s.unwatch('a', ['bob', 'carol'], 2);
  s.unwatch('a', ['bob'], 3);
  s.unwatch('a', ['carol'], 1);
  s.conn('a', 'bob', 0, -1);
  t.equal(s.size, 0, 'records without connections nor watchers are dropped');
});

t.test('dropShard: its watchers forgotten, users it alone held go offline (one message per shard)', async (t) => {
  const { s, sent } = store();
  s.watch('a', ['dead1', 'dead2', 'both', 'alive'], 0);
  s.watch('a', ['dead1'], 1); // a watcher on the dead shard
  s.conn('a', 'dead1', 1, 2);
  s.conn('a', 'dead2', 1, 1);
  s.conn('a', 'both', 1, 1);
  s.conn('a', 'both', 2, 1);
  s.conn('a', 'alive', 2, 1);
  sent.length = 0;
  s.dropShard(1);
  t.same(sent, [[0, 'offline', ['dead1', 'dead2']]]);
  t.same(['dead1', 'dead2', 'both', 'alive'].map((u) => s.online('a', u)), [false, false, true, true]);
  sent.length = 0;
  s.conn('a', 'dead1', 1, 1); // the replacement's own connections count from zero
  t.same(sent, [[0, 'online', ['dead1']]], 'the dead shard\'s watcher is not told');
});

t.test('rebuild: restored without events, then each survivor told what its watchers missed', async (t) => {
  const sent: [number, ControlMsg][] = [];
  const replies: unknown[] = [];
  const owner = createUserOwner({ control: (to, msg) => sent.push([to, msg]), reply: (_to, _req, body) => replies.push(body), log: pino({ level: 'silent' }) });
  const restore = (from: number, users: [string, number, number, boolean | null][]) =>
    owner.handle({ type: 'user_restore', users: users.map(([userId, conns, watchers, known]) => ({ app: 'a', userId, conns, watchers, known })) }, from);
  // Shard 0 watches: stays (online on shard 2), gone (was online, held only by the dead
  // shard), late (its online event was lost with the dead rings), never (offline, unknown).
  restore(0, [['stays', 0, 1, true], ['gone', 0, 1, true], ['late', 0, 1, false], ['never', 0, 1, null]]);
  restore(2, [['stays', 1, 0, null], ['late', 1, 0, null]]);
  restore(3, [['gone', 0, 1, true]]); // shard 3 died too meanwhile
  owner.peerGone(3);
  t.same(sent, [], 'no event while restoring');
  owner.finishRebuild();
  t.same(sent.map(([to, m]) => [to, m]).sort(), [
    [0, { type: 'watchlist', app: 'a', op: 'offline', userIds: ['gone'] }],
    [0, { type: 'watchlist', app: 'a', op: 'online', userIds: ['late'] }],
  ].sort());
  sent.length = 0;
  owner.handle({ type: 'watch', req: 1, from: 1, app: 'a', userIds: ['stays', 'late', 'never'] }, 1);
  t.same(replies, [['stays', 'late']], 'the rebuilt state answers new watchers');
  owner.handle({ type: 'user_conn', app: 'a', userId: 'stays', shard: 2, delta: -1 }, 2);
  t.same(sent.map(([to, m]) => [to, (m as { op: string }).op]).sort(), [[0, 'offline'], [1, 'offline']], 'the restored count is the real one');
  sent.length = 0;
  owner.finishRebuild();
  t.same(sent, [], 'the survivors\' states are forgotten once used');
});

t.test('cluster: a user is online while any node has them; node-local transitions go to the port', async (t) => {
  const sent: Sent[] = [];
  const port: [WatchOp, string][] = [];
  const s = new UserStore((shard, _app, op, ids) => sent.push([shard, op, ids]), {
    changed: (op, _app, userId) => port.push([op, userId]),
    state: () => undefined,
  });
  s.watch('a', ['bob', 'carol'], 1);
  s.remote('a', 'bob', 'node-b', 'online');
  t.same(sent, [[1, 'online', ['bob']]], 'online when another node gets the user');
  s.conn('a', 'bob', 0, 1);
  s.remote('a', 'bob', 'node-c', 'online');
  t.same(sent.length, 1, 'no second online: the user was online already');
  t.same(port, [['online', 'bob']], 'this node\'s first connection is told to the other nodes');
  s.remote('a', 'bob', 'node-b', 'offline');
  s.conn('a', 'bob', 0, -1);
  t.same(port, [['online', 'bob'], ['offline', 'bob']], 'and its last one');
  t.same(sent.length, 1, 'still online on node C');
  t.same(s.watch('a', ['bob', 'carol'], 2), ['bob'], 'a new watcher counts the other nodes');
  s.remote('a', 'carol', 'node-c', 'online');
  sent.length = 0;
  s.dropNode('node-c');
  t.same(sent.map(([shard, op, ids]) => [shard, op, ids.sort()]).sort(), [[1, 'offline', ['bob', 'carol']], [2, 'offline', ['bob', 'carol']]], 'a gone node\'s users go offline, one message per shard');
  t.same(port.length, 2, 'remote changes are not told back to the nodes');
  s.remote('a', 'bob', 'node-b', 'offline'); // an unknown node's offline changes nothing
  s.unwatch('a', ['bob', 'carol'], 1);
  s.unwatch('a', ['bob', 'carol'], 2);
  t.equal(s.size, 0, 'records dropped');
});

t.test('cluster rebuild: remote state arrives quietly; finishRebuild reports the node-local state', async (t) => {
  const sent: [number, ControlMsg][] = [];
  const states: [string, string][][] = [];
  const owner = createUserOwner({
    control: (to, msg) => sent.push([to, msg]), reply: () => undefined, log: pino({ level: 'silent' }), rebuilding: true,
    cluster: { changed: () => undefined, state: (users) => states.push(users) },
  });
  owner.handle({ type: 'remote_user', op: 'online', node: 'n2', app: 'a', userId: 'remote' }, 2);
  owner.handle({ type: 'user_restore', users: [
    { app: 'a', userId: 'remote', conns: 0, watchers: 1, known: false }, // its online was lost with the dead owner
    { app: 'a', userId: 'here', conns: 1, watchers: 1, known: true },
  ] }, 0);
  owner.nodeGone('n3');
  t.same(sent, [], 'no event while rebuilding');
  owner.finishRebuild();
  t.same(states, [[['a', 'here']]], 'the users online on this node go to the primary');
  t.same(sent, [[0, { type: 'watchlist', app: 'a', op: 'online', userIds: ['remote'] }]], 'the watcher hears of the remote user once');
  sent.length = 0;
  owner.nodeGone('n2');
  t.same(sent, [[0, { type: 'watchlist', app: 'a', op: 'offline', userIds: ['remote'] }]], 'events flow after the rebuild');
});

t.test('reconcileShard: a shard\'s reported connections replace its part, with the transitions', async (t) => {
  const { s, sent } = store();
  s.watch('a', ['bob', 'carol', 'dan'], 1);
  s.conn('a', 'bob', 0, 1);
  s.conn('a', 'bob', 2, 1);
  s.conn('a', 'carol', 0, 1);
  sent.length = 0;
  // shard 0 reports: bob gone (a lost −1), carol twice (a lost +1), dan once (a lost +1)
  t.equal(s.reconcileShard(0, [['a', 'carol', 2], ['a', 'dan', 1]]), 3, 'three counts differed');
  t.same(sent, [[1, 'online', ['dan']]], 'dan online; bob still on shard 2, carol already online');
  t.equal(s.reconcileShard(0, [['a', 'carol', 2], ['a', 'dan', 1]]), 0, 'the same report again: nothing');
  sent.length = 0;
  t.equal(s.reconcileShard(2, []), 1, 'shard 2 holds nothing now');
  t.same(sent, [[1, 'offline', ['bob']]], 'bob offline, once');
  s.unwatch('a', ['bob', 'carol', 'dan'], 1);
  t.equal(s.reconcileShard(0, []), 2);
  t.equal(s.size, 0, 'records without connections or watchers are dropped');
});
