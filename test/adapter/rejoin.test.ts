// test-modes: once (its nodes have fixed shard counts)
// A node declared failed that comes back with the same id (it was stopped, not killed: a
// long pause, a partition) gets its presence members and online users back on the node
// that dropped it (adapter/cluster.ts `rejoined`, `ask` in presence's `sync` and the
// watchlists' `users`), on a real redis-server and nats-server. Node A in this process, node
// B a `ringcast start` child with fast cluster health (1 s timeout):
//  - carl is a presence member and uma a signed-in user on node B; node A's subscriber and
//    watcher hear of them;
//  - node B is stopped (SIGSTOP) past the timeout: node A declares it failed, its
//    subscriber gets member_removed carl and its watcher offline uma;
//  - node B continues (SIGCONT): it never saw anything happen and sends nothing of its
//    own; node A sees it again and asks it for its state, so carl is a member again
//    (member_added) and uma online again on node A;
//  - the webhooks follow: member_removed and channel_vacated (a channel only node B has)
//    when node B was declared failed, member_added and channel_occupied when it is back;
//  - max_connections (4) counts node B's connections again on node A (they are sent on
//    change only, so node A asks): node A admits one more and refuses the next with 4004.
// Node B's view counts node A's member throughout.

import t from 'tap';
import { APP, eventually, RawClient, startServer, type Frame } from '../helpers/server';
import { startReceiver } from '../webhooks/receiver';
import { startBackend } from './backends';
import { HEALTH, startChild } from './child';

t.setTimeout(120_000);

const WATCH_APP = { ...APP, enable_watchlist_events: true, max_connections: 4 };
const data = (f: Frame) => (typeof f.data === 'string' ? JSON.parse(f.data) : f.data) as { user_id?: string; events?: { name: string; user_ids: string[] }[] };
const watchEvent = (name: string, user: string) => (f: Frame) =>
  f.event === 'pusher_internal:watchlist_events' && (data(f).events ?? []).some((e) => e.name === name && e.user_ids.includes(user));
const member = (event: string, user: string) => (f: Frame) => f.event === event && data(f).user_id === user;

for (const name of ['redis', 'nats'] as const) {
  t.test(`${name}: a node declared failed that comes back gets its members and users back`, async (t) => {
    const backend = await startBackend(name);
    t.teardown(() => backend.stop());
    const base = backend.config();
    const r = await startReceiver();
    t.teardown(() => r.close());
    const hooks = [{ url: r.url, event_types: ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed'] }];
    const cfg = { ...base, workers: 2, apps: [{ ...WATCH_APP, webhooks: hooks }], adapter: { ...base.adapter!, cluster_health: HEALTH } };
    const a = await startServer(cfg);
    t.teardown(() => a.stop());
    const { child, port } = await startChild(t, (p) => ({ ...cfg, host: '127.0.0.1', port: p, log: { level: 'error' } }));
    t.teardown(() => { child.kill('SIGCONT'); });
    await eventually(() => a.server.cluster!.nodes().length === 2, 10_000, 'node A to see node B');
    const onB = `ws://127.0.0.1:${port}/app/${APP.key}?protocol=7`;
    const sdk = a.sdk();
    const channel = `presence-rejoin-${name}`;

    const watcher = a.track(await RawClient.connect(a.wsUrl()));
    watcher.send({ event: 'pusher:signin', data: sdk.authenticateUser(watcher.socketId, { id: 'wes', watchlist: ['uma'] }) });
    await watcher.event('pusher:signin_success', undefined, 5000);
    t.equal((await watcher.subscribeAuthed(channel, { user_id: 'wes', user_info: {} })).event, 'pusher_internal:subscription_succeeded');

    const carl = a.track(await RawClient.connect(onB));
    t.equal((await carl.subscribeAuthed(channel, { user_id: 'carl', user_info: {} })).event, 'pusher_internal:subscription_succeeded');
    const uma = a.track(await RawClient.connect(onB));
    uma.send({ event: 'pusher:signin', data: sdk.authenticateUser(uma.socketId, { id: 'uma' }) });
    await uma.event('pusher:signin_success', undefined, 5000);
    const alone = `alone-rejoin-${name}`;
    await carl.subscribe(alone);
    await watcher.next(member('pusher_internal:member_added', 'carl'), 10_000);
    await watcher.next(watchEvent('online', 'uma'), 10_000);
    t.pass('node A hears of carl and uma on node B');
    const hooked = (event: string, ch: string) => r.events().filter((e) => e.name === event && e.channel === ch && (ch === alone || e.user_id === 'carl')).length;
    await r.until(() => hooked('member_added', channel) === 1 && hooked('channel_occupied', alone) === 1, 10_000, 'node B\'s webhooks');

    child.kill('SIGSTOP');
    await watcher.next(member('pusher_internal:member_removed', 'carl'), 10_000);
    await watcher.next(watchEvent('offline', 'uma'), 10_000);
    t.equal(a.server.cluster!.nodes().length, 1, 'node A declared node B failed');
    await r.until(() => hooked('member_removed', channel) === 1 && hooked('channel_vacated', alone) === 1, 10_000, 'the webhooks of node B\'s failure');
    child.kill('SIGCONT');

    await eventually(() => a.server.cluster!.nodes().length === 2, 10_000, 'node A to see node B again');
    await watcher.next(member('pusher_internal:member_added', 'carl'), 10_000);
    t.pass('carl is a member again on node A');
    await watcher.next(watchEvent('online', 'uma'), 10_000);
    t.pass('uma is online again for node A\'s watcher');
    await r.until(() => hooked('member_added', channel) === 2 && hooked('channel_occupied', alone) === 2, 10_000, 'member_added and channel_occupied again');
    t.pass('the webhooks: carl added again, the channel occupied again');
    // wes on node A, carl and uma on node B: one more connection fits the app's 4
    const fourth = a.track(await RawClient.connect(a.wsUrl()));
    t.not(fourth.socketId, '', 'node A admits a fourth connection');
    const fifth = await RawClient.connect(a.wsUrl());
    t.equal(fifth.socketId, '', 'node A refuses the fifth: it counts node B\'s two again');
    t.equal(await fifth.closed(), 4004, 'closed with 4004');
    await fourth.close();
    // node B's own view of the channel was never wrong: a new subscriber there sees wes and carl
    // (node B admits it once it heard that node A's fourth is closed)
    let late: RawClient | null = null;
    await eventually(async () => {
      const c = await RawClient.connect(onB);
      if (c.socketId !== '') late = a.track(c);
      return late !== null;
    }, 10_000, 'node B to admit a connection once node A\'s fourth closed');
    const ok = await late!.subscribeAuthed(channel, { user_id: 'late', user_info: {} });
    const snap = (typeof ok.data === 'string' ? JSON.parse(ok.data) : ok.data) as { presence: { hash: Record<string, unknown> } };
    t.same(Object.keys(snap.presence.hash).sort(), ['carl', 'late', 'wes'], 'node B still counts node A\'s member');
  });
}
