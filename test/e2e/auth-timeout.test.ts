// test-modes: once (each shard sweeps its own sockets' deadlines with the same code: one shard shows it)
// Authorised connections (app user_authentication_timeout, 2 s here): a connection that has neither
// signed in nor subscribed to a private or presence channel in time is closed with 4009.
//
// "Not closed" is checked with a positive marker: a control connection of the same app on
// the same shard, opened later and left unauthorised. The shard's sweep visits its
// sockets in the order they opened, so when the control is closed every deadline before
// its own has been looked at; a round trip on the checked connection then shows it open.

import PusherJS from 'pusher-js';
import t, { type Test } from 'tap';
import { connected, pusherJs } from '../helpers/pusher-js';
import { APP, RawClient, WORKERS, type TestServer } from '../helpers/server';
import { scope, sharedServer } from '../helpers/shared-server';

const OPEN = { id: 'open', key: 'open-key', secret: 'open-secret' } as const;
const server = sharedServer(t, {
  apps: [{ ...APP, user_authentication_timeout: 2 }, { ...OPEN }],
});

const shardOf = (c: RawClient) => c.socketId.split('.')[0];
type Track = <C extends RawClient>(c: C) => C;

/** A later connection of APP on the shard of `c`, left unauthorised. */
async function controlFor(srv: TestServer, track: Track, c: { socketId: string }): Promise<RawClient> {
  for (let i = 0; i < 60; i++) {
    const x = track(await RawClient.connect(srv.wsUrl()));
    if (WORKERS === 1 || shardOf(x) === c.socketId.split('.')[0]) return x;
  }
  throw new Error('no connection landed on that shard');
}

async function timedOut(t: Test, c: RawClient, what: string): Promise<void> {
  const err = await c.event('pusher:error', undefined, 10_000);
  t.equal(err.data.code, 4009, `${what}: pusher:error 4009`);
  t.match(err.data.message, /not authorized within the user authentication timeout/, `${what}: says why`);
  t.equal(await c.closed(10_000), 4009, `${what}: closed with 4009`);
}

t.test('an idle connection, or one on public channels only, is closed with 4009', async (t) => {
  const srv = await server();
  const track = scope(t);
  const idle = track(await RawClient.connect(srv.wsUrl()));
  const pub = track(await RawClient.connect(srv.wsUrl()));
  t.equal((await pub.subscribe('public-only')).event, 'pusher_internal:subscription_succeeded');
  const t0 = Date.now();
  await timedOut(t, idle, 'idle');
  await timedOut(t, pub, 'public only');
  t.ok(Date.now() - t0 < 10_000, 'within the timeout and a sweep');
});

t.test('signed in, or subscribed to a private or presence channel, in time: kept open', async (t) => {
  const srv = await server();
  const track = scope(t);
  const signed = track(await RawClient.connect(srv.wsUrl()));
  signed.send({ event: 'pusher:signin', data: srv.sdk().authenticateUser(signed.socketId, { id: 'carol' }) });
  await signed.event('pusher:signin_success');
  const priv = track(await RawClient.connect(srv.wsUrl()));
  t.equal((await priv.subscribeAuthed('private-ok')).event, 'pusher_internal:subscription_succeeded');
  const pres = track(await RawClient.connect(srv.wsUrl()));
  t.equal((await pres.subscribeAuthed('presence-ok', { user_id: 'dan' })).event, 'pusher_internal:subscription_succeeded');
  // a refused private subscription does not count
  const refused = track(await RawClient.connect(srv.wsUrl()));
  t.equal((await refused.subscribe('private-no', { auth: `${APP.key}:${'0'.repeat(64)}` })).event, 'pusher:subscription_error');

  for (const [name, c] of [['signed in', signed], ['private', priv], ['presence', pres]] as const) {
    const control = await controlFor(srv, track, c);
    await timedOut(t, control, `control of ${name}`);
    await c.sync(5000);
    t.equal(c.closeCode, null, `${name}: still open after the control's deadline`);
  }
  await timedOut(t, refused, 'refused private');
});

t.test('an app without user_authentication_timeout closes nothing', async (t) => {
  const srv = await server();
  const track = scope(t);
  const free = track(await RawClient.connect(srv.wsUrl(OPEN.key)));
  const control = await controlFor(srv, track, free);
  await timedOut(t, control, 'control');
  await free.sync(5000);
  t.equal(free.closeCode, null, 'the other app\'s connection stays');
});

t.test('pusher-js: an unauthorised client gets error 4009; one that signs in stays connected', async (t) => {
  const srv = await server();
  const track = scope(t);
  const idle = pusherJs(srv.port);
  track(idle);
  // pusher-js reports the pusher:error frame ({type: 'PusherError', data}) and the close
  // ({type: 'WebSocketError', error: {type: 'PusherError', data}}, from the close code)
  const codes: unknown[] = [];
  idle.connection.bind('error', (e: { data?: { code?: number }; error?: { data?: { code?: number } } }) =>
    codes.push(e.data?.code ?? e.error?.data?.code));
  await connected(idle);
  const left = new Promise<string>((resolve) => idle.connection.bind('state_change', (s: { current: string }) => {
    if (s.current !== 'connected') resolve(s.current);
  }));
  t.not(await left, 'connected', 'pusher-js left the connected state');
  t.ok(codes.length > 0 && codes.every((c) => c === 4009), `pusher-js reported error 4009 (${JSON.stringify(codes)})`);

  const sdk = srv.sdk();
  const user = new PusherJS(APP.key, {
    cluster: 'mt1', wsHost: '127.0.0.1', wsPort: srv.port, forceTLS: false, enabledTransports: ['ws'], disableStats: true,
    userAuthentication: {
      endpoint: 'unused', transport: 'ajax',
      customHandler: ({ socketId }, cb) => cb(null, sdk.authenticateUser(socketId, { id: 'erin' })),
    },
  });
  track(user);
  const states: string[] = [];
  user.connection.bind('state_change', (s: { current: string }) => states.push(s.current));
  await connected(user);
  user.signin();
  await user.user.signinDonePromise;
  const control = await controlFor(srv, track, { socketId: user.connection.socket_id });
  await timedOut(t, control, 'control');
  const ch = user.subscribe('after-deadline');
  await new Promise<void>((resolve) => ch.bind('pusher:subscription_succeeded', () => resolve()));
  t.equal(user.connection.state, 'connected', 'the signed-in client is still connected');
  t.same(states.filter((s) => s !== 'connected'), [], 'and never dropped');
});
