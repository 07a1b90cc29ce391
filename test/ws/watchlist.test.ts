// Watchlists, shard side (ws/watchlist.ts), with stand-in sockets and a hand-driven user
// directory: the order rule (an owner's events before its `watch` answer are skipped, the
// answer says it all), unwatch on close, and what a survivor re-announces after a crash.

import pino from 'pino';
import t from 'tap';
import type { UserDirectory } from '../../src/channels/user-directory';
import { noMetrics } from '../../src/metrics/types';
import { BusPeerRestartedError } from '../../src/bus/errors';
import { createWatchlists, parseWatchlist } from '../../src/ws/watchlist';
import type { Socket, SocketData } from '../../src/ws/types';

const APP = { id: 'a', enable_watchlist_events: true } as SocketData['app'];

function socket(userId: string | null): { ws: Socket; d: SocketData; got: [string, string[]][] } {
  const got: [string, string[]][] = [];
  const d = { id: `s-${userId}`, app: APP, closed: false, userId, watch: null } as unknown as SocketData;
  const ws = {
    getUserData: () => d,
    send: (text: string) => {
      const f = JSON.parse(text) as { event: string; data: string };
      for (const e of (JSON.parse(f.data) as { events: { name: string; user_ids: string[] }[] }).events) got.push([e.name, e.user_ids]);
      return 1;
    },
  } as unknown as Socket;
  return { ws, d, got };
}

/** Owners: ids starting with 'x' are owned by shard 1, the rest by shard 0. */
function directory() {
  const asked: { owner: number; ids: string[]; resolve(online: string[]): void; reject(err: Error): void }[] = [];
  const told: string[] = [];
  const users: UserDirectory = {
    ownerOf: (_app, id) => (id.startsWith('x') ? 1 : 0),
    connection: (_app, id, delta) => void told.push(`conn ${id} ${delta}`),
    watch: (_app, owner, ids) => new Promise((resolve, reject) => asked.push({ owner, ids, resolve, reject })),
    unwatch: (_app, owner, ids) => void told.push(`unwatch ${owner} ${ids.join(',')}`),
  };
  return { users, asked, told };
}

const tick = () => new Promise((r) => setImmediate(r));

t.test('parseWatchlist', async (t) => {
  t.same(parseWatchlist({ id: 'a' }), []);
  t.same(parseWatchlist({ id: 'a', watchlist: ['b', 'c', 'b'] }), ['b', 'c']);
  t.match(parseWatchlist({ id: 'a', watchlist: { b: 1 } }), /must be an array/);
  t.match(parseWatchlist({ id: 'a', watchlist: Array(101).fill('b') }), /more than the 100 allowed/);
});

t.test('events of an owner not answered yet are skipped; its answer is sent; later events pass', async (t) => {
  const { users, asked, told } = directory();
  const w = createWatchlists({ users, log: pino({ level: 'silent' }), metrics: noMetrics, out: (e) => e });
  const alice = socket('alice');
  w.signedIn(alice.ws, alice.d, 'alice', ['bob', 'xavier', 'carol']);
  t.same(told, ['conn alice 1']);
  t.same(asked.map((a) => [a.owner, a.ids]), [[0, ['bob', 'carol']], [1, ['xavier']]], 'one question per owner');
  w.deliver('a', 'online', ['bob'], 0); // older than owner 0's answer
  asked[0].resolve(['bob']);
  await tick();
  w.deliver('a', 'online', ['xavier'], 1); // older than owner 1's answer
  w.deliver('a', 'offline', ['bob'], 0);
  asked[1].resolve([]);
  await tick();
  w.deliver('a', 'online', ['xavier', 'nobody'], 1);
  t.same(alice.got, [['online', ['bob']], ['offline', ['bob']], ['online', ['xavier']]]);

  w.closed(alice.d, true);
  t.same(told.slice(1).sort(), ['conn alice -1', 'unwatch 0 bob,carol', 'unwatch 1 xavier']);
  w.deliver('a', 'online', ['bob'], 0);
  t.equal(alice.got.length, 3, 'nothing after close');
});

t.test('a question to a replaced owner is asked again once; a failed one is not unwatched', async (t) => {
  const { users, asked, told } = directory();
  const w = createWatchlists({ users, log: pino({ level: 'silent' }), metrics: noMetrics, out: (e) => e });
  const alice = socket('alice');
  w.signedIn(alice.ws, alice.d, 'alice', ['bob', 'xavier']);
  asked[0].reject(new BusPeerRestartedError(0, 'watch'));
  asked[1].reject(new Error('queue full'));
  await tick();
  t.same(asked.slice(2).map((a) => [a.owner, a.ids]), [[0, ['bob']]], 'asked owner 0 again');
  asked[2].resolve(['bob']);
  await tick();
  t.same(alice.got, [['online', ['bob']]]);
  w.closed(alice.d, true);
  t.same(told.filter((x) => x.startsWith('unwatch')), ['unwatch 0 bob'], 'owner 1 never counted it');
});

t.test('collectRestore: connections and answered watchers of the users the dead shard owned', async (t) => {
  const { users, asked } = directory();
  const w = createWatchlists({ users, log: pino({ level: 'silent' }), metrics: noMetrics, out: (e) => e });
  const a = socket('xa');
  const b = socket('bob');
  const c = socket('xc');
  w.signedIn(a.ws, a.d, 'xa', ['xb', 'bob']);
  w.signedIn(b.ws, b.d, 'bob', ['xb']);
  w.signedIn(c.ws, c.d, 'xc', ['xd']);
  // a's and c's questions to owner 1 are answered; b's is still pending
  asked.find((q) => q.owner === 1 && q.ids.includes('xd'))!.resolve(['xd']);
  asked.filter((q) => q.owner === 1 && q.ids[0] === 'xb')[0].resolve([]);
  await tick();
  const r = w.collectRestore(1, [a.ws, b.ws, c.ws]);
  const byId = new Map(r.map((u) => [u.userId, u]));
  t.same([...byId.keys()].sort(), ['xa', 'xb', 'xc', 'xd']);
  t.same(byId.get('xa'), { app: 'a', userId: 'xa', conns: 1, watchers: 0, known: null });
  t.same(byId.get('xb'), { app: 'a', userId: 'xb', conns: 0, watchers: 1, known: false }, 'the pending watcher is left out');
  t.same(byId.get('xd'), { app: 'a', userId: 'xd', conns: 0, watchers: 1, known: true });
});
