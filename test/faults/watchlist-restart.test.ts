// test-modes: once (4 shards whatever RINGCAST_TEST_WORKERS says)
// Watchlists across a shard crash (channels/users.ts, "Shard crash"): the users whose
// signed-in connections were all on the crashed shard go offline once for the watchers on
// the other shards, whichever shard owned them (a survivor, or the crashed one, whose
// records the replacement rebuilds); users still connected elsewhere produce nothing; the
// rebuilt counts are right afterwards. 4 shards whatever RINGCAST_TEST_WORKERS says, with
// the test hooks on (server.testCrashShard).

import t from 'tap';
import { userOwnerOf } from '../../src/channels/users';
import { APP, RawClient, eventually, startServer, type Frame, type TestServer } from '../helpers/server';
import { settle } from '../helpers/settle';

const SHARDS = 4;
const V = 2; // the shard that crashes
const LOG = (process.env.RINGCAST_TEST_LOG ?? 'silent') as 'silent';
const prefixOf = (c: RawClient) => c.socketId.split('.')[0];

/** A user id with this prefix whose owner is (own = true) or is not (own = false) shard V. */
function userOwned(prefix: string, own: boolean): string {
  for (let k = 0; ; k++) {
    const id = `${prefix}-${k}`;
    if ((userOwnerOf(APP.id, id, SHARDS) === V) === own) return id;
  }
}

function watchEvents(c: RawClient): [string, string[]][] {
  const out: [string, string[]][] = [];
  for (const f of c.frames as Frame[]) {
    if (f.event !== 'pusher_internal:watchlist_events') continue;
    for (const e of JSON.parse(f.data as string).events as { name: string; user_ids: string[] }[]) out.push([e.name, [...e.user_ids].sort()]);
  }
  return out;
}
const idsOf = (c: RawClient, name: string) => watchEvents(c).filter(([n]) => n === name).flatMap(([, ids]) => ids).sort();

async function signin(srv: TestServer, c: RawClient, user: { id: string; watchlist?: string[] }): Promise<void> {
  c.send({ event: 'pusher:signin', data: srv.sdk().authenticateUser(c.socketId, user) });
  await c.event('pusher:signin_success');
}

let srv: TestServer;
t.before(async () => {
  process.env.RINGCAST_TEST_HOOKS = '1';
  srv = await startServer({ workers: SHARDS, log: { level: LOG }, apps: [{ ...APP, enable_watchlist_events: true }] });
});
t.teardown(() => srv?.stop());

t.test('a crashed shard\'s users go offline once; the others stay; counts rebuilt', async (t) => {
  const oldPrefix = srv.server.testShardPrefixes!()[V];
  const clients: RawClient[] = [];
  t.teardown(() => Promise.all(clients.map((c) => c.close().catch(() => undefined))));
  const onV = () => clients.filter((c) => prefixOf(c) === oldPrefix);
  const elsewhere = () => clients.filter((c) => prefixOf(c) !== oldPrefix);
  for (let i = 0; i < 12 && (onV().length < 3 || elsewhere().length < 5); i++) {
    clients.push(...await Promise.all(Array.from({ length: 8 }, () => RawClient.connect(srv.wsUrl()))));
  }
  if (onV().length < 3 || elsewhere().length < 5) throw new Error('connections did not reach the crashing shard and the others');
  const [v1, v2, v3] = onV();
  const [watcher, s1, s2, s3] = elsewhere();

  const deadOwnedV = userOwned('dead-v', true); // only on V, owned by V
  const deadOwnedS = userOwned('dead-s', false); // only on V, owned by a survivor
  const bothOwnedV = userOwned('both-v', true); // on V and elsewhere, owned by V
  const aliveOwnedV = userOwned('alive-v', true); // elsewhere only, owned by V
  const aliveOwnedS = userOwned('alive-s', false); // elsewhere only, owned by a survivor
  const laterOwnedV = userOwned('later-v', true); // signs in after the restart
  const all = [deadOwnedV, deadOwnedS, bothOwnedV, aliveOwnedV, aliveOwnedS, laterOwnedV];

  await watcher.subscribe('marks');
  await signin(srv, watcher, { id: 'watcher', watchlist: all });
  await signin(srv, v1, { id: deadOwnedV });
  await signin(srv, v2, { id: deadOwnedS });
  await signin(srv, v3, { id: bothOwnedV });
  await signin(srv, s1, { id: bothOwnedV });
  await signin(srv, s2, { id: aliveOwnedV });
  await signin(srv, s3, { id: aliveOwnedS });
  const before = [deadOwnedV, deadOwnedS, bothOwnedV, aliveOwnedV, aliveOwnedS].sort();
  await eventually(() => idsOf(watcher, 'online').length >= before.length, 10_000, 'every user online');
  t.same(idsOf(watcher, 'online'), before, 'before: each user online once');
  watcher.frames.length = 0;

  await srv.server.testCrashShard!(V);
  for (const c of [v1, v2, v3]) t.equal(await c.closed(5000), 1006, 'client of the crashed shard cut');
  // testCrashShard resolved after the rebuild: what the crash made is written; a marker orders it.
  await settle(srv, watcher, 'marks');
  t.same(idsOf(watcher, 'offline'), [deadOwnedS, deadOwnedV].sort(), 'offline once for the users held only by the crashed shard');
  t.same(idsOf(watcher, 'online'), [], 'nothing for the others');
  watcher.frames.length = 0;

  // The rebuilt records count the survivors' connections and watchers.
  await s1.close();
  await eventually(() => idsOf(watcher, 'offline').includes(bothOwnedV), 10_000, 'both-v offline');
  await s2.close();
  await eventually(() => idsOf(watcher, 'offline').includes(aliveOwnedV), 10_000, 'alive-v offline');
  const late = await RawClient.connect(srv.wsUrl());
  clients.push(late);
  await signin(srv, late, { id: laterOwnedV });
  await eventually(() => idsOf(watcher, 'online').includes(laterOwnedV), 10_000, 'later-v online');
  await settle(srv, watcher, 'marks');
  t.same(watchEvents(watcher), [['offline', [bothOwnedV]], ['offline', [aliveOwnedV]], ['online', [laterOwnedV]]], 'after the restart: each transition once');
});
