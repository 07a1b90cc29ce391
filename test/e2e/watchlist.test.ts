// Watchlists (user_data.watchlist, pusher_internal:watchlist_events) and the per-app
// sign-in switches, end to end: raw clients and pusher-js (its user.watchlist facade,
// signing in through its userAuthentication handler). With RINGCAST_TEST_WORKERS=4 the
// watcher and the watched users sit on different shards, and the users' owners are others.
//
// "Nothing was sent" is checked with a positive marker (test/helpers/settle.ts): a user's
// online state changes on its owner shard; the test has the user's connections subscribe to
// a channel owned by that same shard and waits until the owner counts the (un)subscription —
// the owner then has the sign-in / sign-out too (one FIFO ring per shard pair), so any event
// it made is written before the marker the test publishes next.

import PusherJS from 'pusher-js';
import t from 'tap';
import { ownerOf } from '../../src/channels/owner';
import { userOwnerOf } from '../../src/channels/users';
import { MAX_WATCHLIST } from '../../src/ws/watchlist';
import { connected } from '../helpers/pusher-js';
import { APP, RawClient, WORKERS, eventually, type Frame, type TestServer } from '../helpers/server';
import { settle, settleChannel } from '../helpers/settle';
import { scope, sharedServer } from '../helpers/shared-server';

const QUIET = { id: 'quiet', key: 'quiet-key', secret: 'quiet-secret' } as const;
const NO_SIGNIN = { id: 'nosignin', key: 'nosignin-key', secret: 'nosignin-secret' } as const;
type Creds = { id: string; key: string; secret: string };

const server = sharedServer(t, {
  apps: [
    { ...APP, enable_watchlist_events: true },
    { ...QUIET }, // enable_watchlist_events defaults to false
    { ...NO_SIGNIN, enable_user_authentication: false },
  ],
});

const shardOf = (c: RawClient) => c.socketId.split('.')[0];
let seq = 0;
const uniq = (name: string) => `${name}-${process.pid}-${++seq}`;

/** A raw connection, on a shard other than those of `avoid` when there are several shards. */
async function connect(srv: TestServer, track: <C extends RawClient>(c: C) => C, avoid: RawClient[] = [], app: Creds = APP): Promise<RawClient> {
  const taken = new Set(avoid.map(shardOf));
  for (let i = 0; i < 40; i++) {
    const c = track(await RawClient.connect(srv.wsUrl(app.key)));
    if (WORKERS === 1 || !taken.has(shardOf(c))) return c;
  }
  throw new Error('no connection landed on another shard');
}

async function signin(srv: TestServer, c: RawClient, user: { id: string; watchlist?: unknown }, app: Creds = APP): Promise<void> {
  c.send({ event: 'pusher:signin', data: srv.sdk(app).authenticateUser(c.socketId, user as { id: string }) });
  await c.event('pusher:signin_success');
}

/** Watchlist events a raw client got: [name, user_ids] in order. */
function watchEvents(c: RawClient): [string, string[]][] {
  const out: [string, string[]][] = [];
  for (const f of c.frames as Frame[]) {
    if (f.event !== 'pusher_internal:watchlist_events') continue;
    for (const e of JSON.parse(f.data as string).events as { name: string; user_ids: string[] }[]) out.push([e.name, e.user_ids]);
  }
  return out;
}

const idsOf = (evs: [string, string[]][], name: string) => evs.filter(([n]) => n === name).flatMap(([, ids]) => ids).sort();

/** A public channel owned by the shard that owns `userId`'s online state. */
function pinChannel(userId: string, app: Creds = APP): string {
  const owner = userOwnerOf(app.id, userId, WORKERS);
  for (let k = 0; ; k++) {
    const name = uniq(`pin-${userId}`);
    if (ownerOf(app.id, name, WORKERS) === owner) return name;
    if (k > 10_000) throw new Error('no channel for that owner');
  }
}

async function subscriptionCount(srv: TestServer, channel: string, app: Creds = APP): Promise<number> {
  const res = await srv.sdk(app).get({ path: `/channels/${channel}`, params: { info: 'subscription_count' } });
  return ((await res.json()) as { subscription_count?: number }).subscription_count ?? 0;
}

/**
 * After the given clients of `userId` signed in (or before closing them): they subscribe to
 * a channel of the user's owner; resolves when the owner counts `n` subscriptions there.
 */
async function throughOwner(srv: TestServer, userId: string, pin: string, n: number, app: Creds = APP): Promise<void> {
  await eventually(async () => (await subscriptionCount(srv, pin, app)) === n, 10_000, `${n} subscriptions on ${pin}`);
}

t.test('at sign-in: the watched users online then, each once; later sign-ins come as online', async (t) => {
  const srv = await server();
  const track = scope(t);
  const [bob, carol, dave, alice] = ['bob', 'carol', 'dave', 'alice'].map(uniq);
  const b = await connect(srv, track);
  await signin(srv, b, { id: bob });
  const c = await connect(srv, track);
  await signin(srv, c, { id: carol });
  const watcher = await connect(srv, track, [b, c]);
  await watcher.subscribe('watcher-marks');
  await signin(srv, watcher, { id: alice, watchlist: [bob, carol, dave, bob] });
  await eventually(() => idsOf(watchEvents(watcher), 'online').length >= 2, 10_000, 'bob and carol online');

  const d = await connect(srv, track, [watcher]);
  await signin(srv, d, { id: dave });
  await eventually(() => idsOf(watchEvents(watcher), 'online').includes(dave), 10_000, 'dave online');
  t.same(idsOf(watchEvents(watcher), 'online'), [bob, carol, dave].sort(), 'each watched user online exactly once (a repeated id counts once)');
  t.same(idsOf(watchEvents(watcher), 'offline'), [], 'nobody offline');
});

t.test('across shards: a user with two tabs goes offline once, when the second tab closes', async (t) => {
  const srv = await server();
  const track = scope(t);
  const bob = uniq('bob');
  const pin = pinChannel(bob);
  const watcher = await connect(srv, track);
  const marks = uniq('marks');
  await watcher.subscribe(marks);
  await signin(srv, watcher, { id: uniq('alice'), watchlist: [bob] });
  const tab1 = await connect(srv, track, [watcher]);
  const tab2 = await connect(srv, track, [watcher, tab1]);
  if (WORKERS > 1) t.not(shardOf(tab1), shardOf(tab2), 'tabs on two shards');
  for (const tab of [tab1, tab2]) {
    await signin(srv, tab, { id: bob });
    await tab.subscribe(pin);
  }
  await throughOwner(srv, bob, pin, 2);
  await settle(srv, watcher, marks);
  t.same(watchEvents(watcher), [['online', [bob]]], 'online once for two tabs');

  await tab1.close();
  await throughOwner(srv, bob, pin, 1);
  await settle(srv, watcher, marks);
  t.same(watchEvents(watcher), [['online', [bob]]], 'still online while a tab is open');

  await tab2.close();
  await eventually(() => watchEvents(watcher).length === 2, 10_000, 'offline');
  t.same(watchEvents(watcher), [['online', [bob]], ['offline', [bob]]]);
  await settle(srv, watcher, marks);
  t.equal(watchEvents(watcher).length, 2, 'offline once');
});

t.test('pusher-js: pusher.user.watchlist.bind receives online and offline', async (t) => {
  const srv = await server();
  const track = scope(t);
  const [alice, bob, carol] = ['alice', 'bob', 'carol'].map(uniq);
  const b = await connect(srv, track);
  await signin(srv, b, { id: bob });
  const sdk = srv.sdk();
  const client = track(new PusherJS(APP.key, {
    cluster: 'mt1', wsHost: '127.0.0.1', wsPort: srv.port, forceTLS: false, enabledTransports: ['ws'], disableStats: true,
    userAuthentication: {
      endpoint: 'unused', transport: 'ajax',
      customHandler: ({ socketId }, cb) => cb(null, sdk.authenticateUser(socketId, { id: alice, watchlist: [bob, carol] } as { id: string })),
    },
  }));
  const got: [string, string[]][] = [];
  client.user.watchlist.bind('online', (e: { name: string; user_ids: string[] }) => got.push([e.name, e.user_ids]));
  client.user.watchlist.bind('offline', (e: { name: string; user_ids: string[] }) => got.push([e.name, e.user_ids]));
  await connected(client);
  client.signin();
  await client.user.signinDonePromise;
  await eventually(() => got.length === 1, 10_000, 'bob online at sign-in');
  t.same(got, [['online', [bob]]]);

  const c = await connect(srv, track);
  await signin(srv, c, { id: carol });
  await eventually(() => got.length === 2, 10_000, 'carol online');
  await c.close();
  await b.close();
  await eventually(() => idsOf(got, 'offline').length === 2, 10_000, 'both offline');
  t.same(got.slice(0, 2), [['online', [bob]], ['online', [carol]]]);
  t.same(idsOf(got, 'offline'), [bob, carol].sort());
  const ch = client.subscribe(uniq('pjs-marks'));
  await new Promise<void>((resolve) => ch.bind('pusher:subscription_succeeded', () => resolve()));
  await settleChannel(srv, ch);
  t.equal(got.length, 4, 'nothing more');
});

t.test('enable_watchlist_events: false (the default) sends no watchlist event', async (t) => {
  const srv = await server();
  const track = scope(t);
  const bob = uniq('bob');
  const pin = pinChannel(bob, QUIET);
  const watcher = await connect(srv, track, [], QUIET);
  const marks = uniq('marks');
  await watcher.subscribe(marks);
  await signin(srv, watcher, { id: uniq('alice'), watchlist: [bob] }, QUIET);
  const b = await connect(srv, track, [watcher], QUIET);
  await signin(srv, b, { id: bob }, QUIET);
  await b.subscribe(pin);
  await throughOwner(srv, bob, pin, 1, QUIET);
  await b.close();
  await throughOwner(srv, bob, pin, 0, QUIET);
  await settle(srv, watcher, marks, { app: QUIET });
  t.same(watchEvents(watcher), [], 'no watchlist event');
  t.same(watcher.frames.filter((f) => f.event === 'pusher:error'), [], 'and no error');
});

t.test('a bad watchlist refuses the sign-in with 4009 and a message saying why', async (t) => {
  const srv = await server();
  const track = scope(t);
  const cases: [string, unknown, RegExp][] = [
    ['not a list', 'bob', /watchlist must be an array of non-empty user id strings/],
    ['not strings', ['bob', 7], /watchlist must be an array of non-empty user id strings/],
    ['empty id', [''], /watchlist must be an array/],
    ['too long', Array.from({ length: MAX_WATCHLIST + 1 }, (_, i) => `u${i}`), new RegExp(`has ${MAX_WATCHLIST + 1} user ids, more than the ${MAX_WATCHLIST} allowed`)],
  ];
  for (const [name, watchlist, message] of cases) {
    const c = await connect(srv, track);
    c.send({ event: 'pusher:signin', data: srv.sdk().authenticateUser(c.socketId, { id: 'x', watchlist } as { id: string }) });
    const err = await c.event('pusher:error');
    t.equal(err.data.code, 4009, `${name}: 4009`);
    t.match(err.data.message, message, `${name}: message`);
    t.equal(await c.closed(), 4009, `${name}: closed`);
  }
  const ok = await connect(srv, track);
  await signin(srv, ok, { id: 'y', watchlist: Array.from({ length: MAX_WATCHLIST }, (_, i) => `u${i}`) });
  t.pass(`a watchlist of ${MAX_WATCHLIST} is accepted`);
});

t.test('enable_user_authentication: false refuses pusher:signin (4009, closed)', async (t) => {
  const srv = await server();
  const track = scope(t);
  const c = await connect(srv, track, [], NO_SIGNIN);
  c.send({ event: 'pusher:signin', data: srv.sdk(NO_SIGNIN).authenticateUser(c.socketId, { id: 'bob' }) });
  const err = await c.event('pusher:error');
  t.equal(err.data.code, 4009);
  t.match(err.data.message, /user authentication is disabled for this app/);
  t.equal(await c.closed(), 4009);
  // the other apps still sign in
  const other = await connect(srv, track);
  await signin(srv, other, { id: 'bob' });
});
