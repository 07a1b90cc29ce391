// test-modes: once (its servers have at least 2 shards, owners and subscribers apart: max(2, workers))
// The periodic owner reconciliation (channels/reconcile.ts) repairs what notices lost in a
// full ring left wrong, within one bus.owner_reconcile_interval_ms. Faults injected with
// the test hook RINGCAST_TEST_HOOKS=1 (RunningServer.testPauseBus: a shard stops reading
// its rings) and client events that fill the ring to it (test/faults/shards.ts fillFrom):
//
//  1. shard 0 → owner shard 1 full: an unsubscribe (sub −1), the last unsubscribe of a
//     channel and a presence unsubscribe (presence_leave) are dropped. Once shard 1 reads
//     again: the subscription count, the vacated channel and the presence member come
//     right (REST, member_removed to the watcher, webhooks member_removed / channel_vacated
//     once each), owner_reconcile_corrections_total counts them.
//  2. owner shard 1 → shard 0 full: a member_added and a subscription_count event to
//     shard 0 are dropped. Once shard 0 reads again its watcher gets member_added and its
//     subscriber the new subscription_count.
//  3. owner shard 1 → the primary full (the primary stops reading: testPauseBus(shards)),
//     filled with client_event webhook reports: the channel_vacated and member_removed
//     reports are dropped. Once the primary reads again, the owner's next webhook_sync has
//     the primary's ledger send each once (owner_reconcile_corrections_total{kind="webhook"}).
// Runs with 2 shards (4 under RINGCAST_TEST_WORKERS=4).

import t from 'tap';
import type { ConfigInput } from '../../src/config';
import { userOwnerOf } from '../../src/channels/users';
import { APP, WORKERS, eventually, startServer, type Frame, type RawClient, type TestServer } from '../helpers/server';
import { startReceiver } from '../webhooks/receiver';
import { metric, signedGet } from './api';
import { LONG, clientsOn, fillFrom, ownedBy } from './shards';

process.env.RINGCAST_TEST_HOOKS = '1';
const SHARDS = Math.max(2, WORKERS);
const OWNER = 1;
const OTHER = 0;
const INTERVAL = 2000;
// one interval, plus the time a loaded 2-core machine takes to drain the ring and answer
const WITHIN = INTERVAL + 3000;

const dataOf = (f: Frame): any => typeof f.data === 'string' ? JSON.parse(f.data) : f.data;

const OCCUPANCY = ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed'];

/** A server of `SHARDS` shards reconciling every INTERVAL, its webhooks to `hooksUrl` one at a time. */
function reconcileServer(hooksUrl: string, o: { spill: number; eventTypes: string[]; app?: Record<string, unknown>; extra?: ConfigInput }): Promise<TestServer> {
  return startServer({
    workers: SHARDS,
    bus: { ring_bytes: 64 * 1024, max_spill_bytes: o.spill, owner_reconcile_interval_ms: INTERVAL },
    metrics: { enabled: true, port: 0, host: '127.0.0.1' },
    webhooks: { concurrency: 1 },
    apps: [{ ...APP, max_client_events_per_second: 1_000_000, ...o.app, webhooks: [{ url: hooksUrl, event_types: o.eventTypes }] }],
    ...o.extra,
  });
}

t.test('owner state converges within one interval after lost notices', async (t) => {
  const hooks = await startReceiver();
  t.teardown(() => hooks.close());
  const srv = await reconcileServer(hooks.url, { spill: 1024 * 1024, eventTypes: OCCUPANCY, app: { subscription_count_events: true } });
  t.teardown(() => srv.stop());
  const mport = srv.server.metricsPort!;
  const corrections = (kind: string) => metric(mport, 'owner_reconcile_corrections_total', { kind });
  const info = async (channel: string) => (await signedGet(srv.port, `channels/${channel}`, { params: { info: channel.startsWith('presence-') ? 'user_count' : 'subscription_count' } })).json;
  const users = async (channel: string) => ((await signedGet(srv.port, `channels/${channel}/users`)).json as { users: { id: string }[] }).users.map((u) => u.id).sort();
  const hookLines = (channel: string) => hooks.events().filter((e) => e.channel === channel).map((e) => `${String(e.name)}${e.user_id ? ` ${String(e.user_id)}` : ''}`);

  let firstChannels: string[] = [];
  await t.test('lost notices to the owner: counts, members, vacated channel, webhooks', async (t) => {
    const pub = ownedBy(`rc-pub-${LONG}`, OWNER, SHARDS);
    const only = ownedBy(`rc-only-${LONG}`, OWNER, SHARDS);
    const pres = ownedBy(`presence-rc-${LONG}`, OWNER, SHARDS);
    const [a, b, p, sender] = await clientsOn(srv, OTHER, 4);
    const [watcher, receiver] = await clientsOn(srv, OWNER, 2);
    await a.subscribe(pub);
    await b.subscribe(pub);
    await a.subscribe(only);
    await watcher.subscribeAuthed(pres, { user_id: 'w' });
    await p.subscribeAuthed(pres, { user_id: 'p' });
    await watcher.event('pusher_internal:member_added', pres);
    await eventually(async () => (await info(pub))?.subscription_count === 2 && (await info(only))?.occupied === true, 5000, 'the owner to count the subscriptions');
    await receiver.subscribeAuthed('private-fill-a');
    await sender.subscribeAuthed('private-fill-a');
    const dropsBefore = await metric(mport, 'bus_full_total', { source: 'owner' });

    await srv.server.testPauseBus(OWNER, 60_000);
    await fillFrom(sender, 'private-fill-a');
    a.send({ event: 'pusher:unsubscribe', data: { channel: pub } });
    a.send({ event: 'pusher:unsubscribe', data: { channel: only } });
    p.send({ event: 'pusher:unsubscribe', data: { channel: pres } });
    await a.sync();
    await p.sync();
    t.ok(await metric(mport, 'bus_full_total', { source: 'owner' }) >= dropsBefore + 3, 'the three notices to the owner were dropped (bus_full_total{source="owner"})');
    await srv.server.testPauseBus(OWNER, 0);
    const resumed = Date.now();

    await eventually(async () => {
      const [i1, i2, i3] = [await info(pub), await info(only), await info(pres)];
      return i1?.subscription_count === 1 && i2?.occupied === false && i3?.user_count === 1;
    }, WITHIN, 'counts and members to come right');
    const took = Date.now() - resumed;
    t.ok(took <= WITHIN, `converged ${took} ms after the owner read again (interval ${INTERVAL} ms)`);
    t.same(await users(pres), ['w'], 'REST users: the lost leave applied');
    const removed = await watcher.event('pusher_internal:member_removed', pres, 5000);
    t.same(dataOf(removed), { user_id: 'p' }, 'the watcher is told member_removed p');
    await hooks.until(() => hookLines(only).includes('channel_vacated') && hookLines(pres).includes('member_removed p'), 10_000, 'the corrective webhooks');
    t.ok(await corrections('subscription') >= 2, 'owner_reconcile_corrections_total{kind="subscription"}');
    t.ok(await corrections('leave') >= 1, 'owner_reconcile_corrections_total{kind="leave"}');

    firstChannels = [only, pres];
    for (const c of [a, b, p, sender, receiver]) await c.close();
  });

  await t.test('lost member and subscription_count events to a shard', async (t) => {
    const pres = ownedBy(`presence-rc2-${LONG}`, OWNER, SHARDS);
    const cnt = ownedBy(`rc-cnt-${LONG}`, OWNER, SHARDS);
    const [watcher, counter, receiver] = await clientsOn(srv, OTHER, 3);
    const [joiner, second, sender] = await clientsOn(srv, OWNER, 3);
    await watcher.subscribeAuthed(pres, { user_id: 'w2' });
    await counter.subscribe(cnt);
    t.same(dataOf(await counter.event('pusher_internal:subscription_count', cnt, 5000)), { subscription_count: 1 });
    await receiver.subscribeAuthed('private-fill-b');
    await sender.subscribeAuthed('private-fill-b');
    const resentBefore = await corrections('member_event');

    await srv.server.testPauseBus(OTHER, 60_000);
    await fillFrom(sender, 'private-fill-b');
    t.equal((await joiner.subscribeAuthed(pres, { user_id: 'q' })).event, 'pusher_internal:subscription_succeeded', 'q joins on the owner shard');
    t.equal((await second.subscribe(cnt)).event, 'pusher_internal:subscription_succeeded');
    await eventually(async () => (await metric(mport, 'bus_full_total', { source: 'member_event' })) >= 2, 5000, 'the member and count events to shard 0 to be dropped')
      .catch(async (err: Error) => { throw new Error(`${err.message}: bus_full_total ${JSON.stringify(await metric(mport, 'bus_full_total', { source: 'member_event' }))}`); });
    await srv.server.testPauseBus(OTHER, 0);
    const resumed = Date.now();

    const added = await watcher.event('pusher_internal:member_added', pres, WITHIN + 2000);
    t.match(dataOf(added), { user_id: 'q' }, 'the watcher gets the lost member_added q');
    const count = await counter.next((f) => f.event === 'pusher_internal:subscription_count' && dataOf(f).subscription_count === 2, WITHIN + 2000);
    t.ok(count, 'the subscriber gets the lost subscription_count 2');
    t.comment(`member_added and subscription_count arrived ${Date.now() - resumed} ms after shard ${OTHER} read again`);
    t.ok(await corrections('member_event') > resentBefore, 'owner_reconcile_corrections_total{kind="member_event"}');
    t.ok(await corrections('count_event') >= 1, 'owner_reconcile_corrections_total{kind="count_event"}');
    // once: the next member event is q's member_removed (its close), nothing before it
    await joiner.close();
    const removed = await watcher.event('pusher_internal:member_removed', pres, 10_000);
    t.same(dataOf(removed), { user_id: 'q' });
    t.equal(watcher.frames.filter((f) => f.event === 'pusher_internal:member_added' && f.channel === pres).length, 0, 'member_added q came once');

    // webhooks of part 1 once each, after further intervals of reconciliation (and of the
    // owner's webhook state sent to the primary): q's member_removed, decided by the same
    // owner later, is the marker (webhooks.concurrency 1: sent in the order accepted)
    await hooks.until(() => hookLines(pres).includes('member_removed q'), 10_000, 'member_removed q');
    const [only, pres1] = firstChannels;
    t.same(hookLines(only), ['channel_occupied', 'channel_vacated'], `${only}: vacated once`);
    t.same(hookLines(pres1), ['channel_occupied', 'member_added w', 'member_added p', 'member_removed p'], `${pres1}: member_removed p once`);
  });
});

t.test('lost webhook reports to the primary are re-decided once', async (t) => {
  const hooks = await startReceiver();
  t.teardown(() => hooks.close());
  // a spill of 64 KiB: the ring to the primary fills with a few dozen client events
  const srv = await reconcileServer(hooks.url, { spill: 64 * 1024, eventTypes: [...OCCUPANCY, 'client_event'], extra: { event_limits: { max_payload_in_kb: 16 } } });
  t.teardown(() => srv.stop());
  const mport = srv.server.metricsPort!;
  const corrections = (kind: string) => metric(mport, 'owner_reconcile_corrections_total', { kind });
  const hookLines = (channel: string) => hooks.events().filter((e) => e.channel === channel).map((e) => `${String(e.name)}${e.user_id ? ` ${String(e.user_id)}` : ''}`);
  const only = ownedBy(`rc-wh-${LONG}`, OWNER, SHARDS);
  const pres = ownedBy(`presence-rc-wh-${LONG}`, OWNER, SHARDS);
  const mark = ownedBy('rc-wh-mark', OWNER, SHARDS);
  const [a, p, receiver] = await clientsOn(srv, OTHER, 3);
  const [watcher, sender] = await clientsOn(srv, OWNER, 2);
  await a.subscribe(only);
  await watcher.subscribeAuthed(pres, { user_id: 'w3' });
  await p.subscribeAuthed(pres, { user_id: 'p3' });
  await hooks.until(() => hookLines(only).includes('channel_occupied') && hookLines(pres).includes('member_added p3'), 10_000, 'the first webhooks');
  await receiver.subscribeAuthed('private-wh');
  await sender.subscribeAuthed('private-wh');
  const dropped = () => metric(mport, 'bus_full_total', { source: 'webhook' });
  const correctedBefore = await corrections('webhook');

  await srv.server.testPauseBus(SHARDS, 60_000); // the primary
  // client_event reports from the owner shard fill its ring to the primary: 4 KB events,
  // then empty ones (one report each) until one is refused; the reports naming the
  // LONG channels are larger than the room left
  let sent = 0;
  for (const pad of ['f'.repeat(4000), '']) {
    const before = await dropped();
    while (await dropped() === before) {
      if (++sent > 2000) throw new Error('2000 client events and the ring to the primary did not fill');
      sender.send({ event: 'client-f', channel: 'private-wh', data: pad });
      await sender.sync(30_000);
    }
  }
  const before = await dropped();
  a.send({ event: 'pusher:unsubscribe', data: { channel: only } });
  p.send({ event: 'pusher:unsubscribe', data: { channel: pres } });
  await a.sync();
  await p.sync();
  await watcher.event('pusher_internal:member_removed', pres, 5000);
  await eventually(async () => await dropped() >= before + 1, 5000, 'the reports to the primary to be dropped');
  await srv.server.testPauseBus(SHARDS, 0);
  const resumed = Date.now();

  await hooks.until(() => hookLines(only).includes('channel_vacated') && hookLines(pres).includes('member_removed p3'), WITHIN + 10_000, 'the lost webhooks');
  t.comment(`${sent} client events filled the ring; the lost webhooks came ${Date.now() - resumed} ms after the primary read again`);
  t.ok(await corrections('webhook') >= correctedBefore + 2, 'owner_reconcile_corrections_total{kind="webhook"}: both re-decided by the primary');
  // once: a later transition of the same owner, after at least one more sync, is the marker
  await eventually(() => Date.now() - resumed > 2 * INTERVAL, 3 * INTERVAL + 1000, 'two intervals');
  await receiver.subscribe(mark);
  receiver.send({ event: 'pusher:unsubscribe', data: { channel: mark } });
  await hooks.until(() => hookLines(mark).includes('channel_vacated'), 10_000, 'the marker channel_vacated');
  t.same(hookLines(only), ['channel_occupied', 'channel_vacated'], `${only}: vacated once`);
  t.same(hookLines(pres), ['channel_occupied', 'member_added w3', 'member_added p3', 'member_removed p3'], `${pres}: member_removed p3 once`);
});

// Watchlists (channels/users.ts): a signed-in connection's close is told to the user's
// owner shard with a `user_conn -1` notice; a full ring drops it, and the user stayed
// online for its watchers for good. The shard's report now carries its signed-in
// connections per user: the owner sets the count and tells the watcher offline.
t.test('a lost user_conn −1: the watcher is told offline', async (t) => {
  const hooks = await startReceiver();
  t.teardown(() => hooks.close());
  const srv = await reconcileServer(hooks.url, { spill: 1024 * 1024, eventTypes: OCCUPANCY, app: { enable_watchlist_events: true } });
  t.teardown(() => srv.stop());
  const mport = srv.server.metricsPort!;
  let user = '';
  for (let k = 0; userOwnerOf(APP.id, user, SHARDS) !== OWNER || user === ''; k++) user = `u-${LONG}-${k}`;
  const [c, sender] = await clientsOn(srv, OTHER, 2);
  const [watcher, receiver] = await clientsOn(srv, OWNER, 2);
  const signin = async (x: RawClient, u: { id: string; watchlist?: string[] }) => {
    x.send({ event: 'pusher:signin', data: srv.sdk().authenticateUser(x.socketId, u) });
    await x.event('pusher:signin_success');
  };
  const told = (op: string) => watcher.frames.some((f) => f.event === 'pusher_internal:watchlist_events' &&
    (JSON.parse(f.data as string) as { events: { name: string; user_ids: string[] }[] }).events.some((e) => e.name === op && e.user_ids.includes(user)));
  await signin(watcher, { id: 'watcher', watchlist: [user] });
  await signin(c, { id: user });
  await eventually(() => told('online'), 5000, 'the watcher to be told online');
  await receiver.subscribeAuthed('private-fill-u');
  await sender.subscribeAuthed('private-fill-u');
  const dropsBefore = await metric(mport, 'bus_full_total', { source: 'owner' });

  await srv.server.testPauseBus(OWNER, 60_000);
  await fillFrom(sender, 'private-fill-u');
  await c.close();
  await eventually(async () => await metric(mport, 'bus_full_total', { source: 'owner' }) > dropsBefore, 5000, 'the user_conn −1 to be dropped');
  await srv.server.testPauseBus(OWNER, 0);
  const resumed = Date.now();
  await eventually(() => told('offline'), WITHIN, 'the watcher to be told offline within one interval');
  t.comment(`offline told ${Date.now() - resumed} ms after the owner read again`);
  t.ok(await metric(mport, 'owner_reconcile_corrections_total', { kind: 'user' }) >= 1, 'owner_reconcile_corrections_total{kind="user"}');
  // once: a later sign-in of the user is the marker (online, after one offline)
  const [c2] = await clientsOn(srv, OTHER, 1);
  await signin(c2, { id: user });
  await eventually(() => watcher.frames.filter((f) => f.event === 'pusher_internal:watchlist_events').length >= 3, 5000, 'the marker online');
  const ops = watcher.frames.filter((f) => f.event === 'pusher_internal:watchlist_events')
    .flatMap((f) => (JSON.parse(f.data as string) as { events: { name: string }[] }).events.map((e) => e.name));
  t.same(ops, ['online', 'offline', 'online'], 'the watcher: online, offline once, online again');
});
