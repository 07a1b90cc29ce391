// test-modes: once (its servers have at least 2 shards, the owner apart from the subscriber: max(2, workers))
// A presence join the subscribing shard gave up on (the owner shard did not answer within
// the bus request timeout, 5 s) but that the owner applied later is undone, keyed by
// socket: the subscribing shard sends a leave for that socket after the join on the same
// FIFO ring. The owner shard stops reading its rings (test hook RINGCAST_TEST_HOOKS=1 →
// RunningServer.testPauseBus) while two sockets on another shard subscribe: a second tab
// of user u (whose first tab is subscribed) and user g. Both get subscription_error; once
// the owner reads again:
//  - the watcher sees member_added g then member_removed g (no ghost member);
//  - u keeps its first tab: no member_removed u, the REST users list has u; when that tab
//    leaves, member_removed u follows (u's count was 1, not 2);
//  - when everyone left, the channel is vacated (REST, and the channel_vacated webhook once).
// The periodic reconciliation is off here (bus.owner_reconcile_interval_ms 0): the undo does
// not wait for it. Runs with 2 shards (4 under RINGCAST_TEST_WORKERS=4).

import t from 'tap';
import { channelAuth } from '../../src/protocol/hmac';
import { APP, RawClient, WORKERS, eventually, startServer, type Frame } from '../helpers/server';
import { startReceiver } from '../webhooks/receiver';
import { signedGet } from './api';
import { clientsOn, ownedBy, shardOf } from './shards';

process.env.RINGCAST_TEST_HOOKS = '1';
const SHARDS = Math.max(2, WORKERS);
const OWNER = 1;

t.test('a presence join answered after its timeout is undone for that socket only', async (t) => {
  const hooks = await startReceiver();
  t.teardown(() => hooks.close());
  const srv = await startServer({
    workers: SHARDS,
    bus: { owner_reconcile_interval_ms: 0 },
    webhooks: { concurrency: 1 },
    apps: [{ ...APP, webhooks: [{ url: hooks.url, event_types: ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed'] }] }],
  });
  t.teardown(() => srv.stop());
  const channel = ownedBy('presence-jt', OWNER, SHARDS);
  const [watcher, tab1] = [srv.track(await RawClient.connect(srv.wsUrl())), srv.track(await RawClient.connect(srv.wsUrl()))];
  t.equal((await watcher.subscribeAuthed(channel, { user_id: 'w' })).event, 'pusher_internal:subscription_succeeded');
  t.equal((await tab1.subscribeAuthed(channel, { user_id: 'u' })).event, 'pusher_internal:subscription_succeeded');
  await watcher.event('pusher_internal:member_added', channel);
  // both late joins from one shard that is not the owner: their joins and leaves share a ring
  const [tab2, ghost] = await clientsOn(srv, 0, 2); // shard 0: not the owner
  t.not(shardOf(srv, tab2), OWNER);

  await srv.server.testPauseBus(OWNER, 60_000);
  const cd = (id: string) => JSON.stringify({ user_id: id });
  tab2.send({ event: 'pusher:subscribe', data: { channel, channel_data: cd('u'), auth: authOf(tab2, channel, cd('u')) } });
  await tab2.sync(); // tab2's join is written before ghost's
  ghost.send({ event: 'pusher:subscribe', data: { channel, channel_data: cd('g'), auth: authOf(ghost, channel, cd('g')) } });
  for (const c of [tab2, ghost]) {
    const f = await c.next((x) => x.channel === channel, 15_000);
    t.equal(f.event, 'pusher:subscription_error', 'the join timed out: subscription_error');
    t.match(dataOf(f), { type: 'LimitReached', error: 'server busy, try again' });
  }
  await srv.server.testPauseBus(OWNER, 0);

  // the owner applies both joins, then both leaves, in that order
  const added = await watcher.event('pusher_internal:member_added', channel, 10_000);
  t.match(dataOf(added), { user_id: 'g' }, 'the late join of g was applied');
  const removed = await watcher.event('pusher_internal:member_removed', channel, 10_000);
  t.same(dataOf(removed), { user_id: 'g' }, 'and undone: member_removed g');
  t.notOk(watcher.frames.some((f) => f.event === 'pusher_internal:member_removed'), 'u (leave processed before g\'s) is still a member');
  const users = await signedGet(srv.port, `channels/${channel}/users`);
  t.same((users.json as { users: { id: string }[] }).users.map((u) => u.id).sort(), ['u', 'w'], 'REST users: u and w');

  tab1.send({ event: 'pusher:unsubscribe', data: { channel } });
  const gone = await watcher.event('pusher_internal:member_removed', channel, 10_000);
  t.same(dataOf(gone), { user_id: 'u' }, 'u\'s only counted tab left: member_removed u');
  watcher.send({ event: 'pusher:unsubscribe', data: { channel } });
  await eventually(async () => (await signedGet(srv.port, `channels/${channel}`)).json?.occupied === false, 10_000, 'the channel to be vacated');
  await hooks.until((r) => r.flatMap((x) => x.body.events).some((e) => e.name === 'channel_vacated' && e.channel === channel), 10_000, 'channel_vacated');
  const mine = hooks.events().filter((e) => e.channel === channel).map((e) => `${String(e.name)}${e.user_id ? ` ${String(e.user_id)}` : ''}`);
  t.same(mine, ['channel_occupied', 'member_added w', 'member_added u', 'member_added g', 'member_removed g', 'member_removed u', 'member_removed w', 'channel_vacated'],
    'webhooks: each transition once, the ghost undone');
});

function dataOf(f: Frame): unknown {
  return typeof f.data === 'string' ? JSON.parse(f.data) : f.data;
}

function authOf(c: RawClient, channel: string, channelData: string): string {
  return channelAuth(APP.key, APP.secret, c.socketId, channel, channelData);
}
