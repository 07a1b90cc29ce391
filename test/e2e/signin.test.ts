// pusher:signin, #server-to-user-<id> delivery and terminate_connections, driven by
// raw clients, pusher-js (signin + bind on user events) and the pusher SDK
// (authenticateUser, sendToUser, terminateUserConnections).
import PusherJS from 'pusher-js';
import t from 'tap';
import { userAuth } from '../../src/protocol/hmac';
import { connected } from '../helpers/pusher-js';
import { APP, RawClient, startServer } from '../helpers/server';

t.test('signin, server-to-user events and terminate_connections', async (t) => {
  const srv = await startServer();
  const sdk = srv.sdk();

  t.test('signin with a valid signature, then events sent to the user arrive', async (t) => {
    const a = srv.track(await RawClient.connect(srv.wsUrl()));
    const b = srv.track(await RawClient.connect(srv.wsUrl()));
    const other = srv.track(await RawClient.connect(srv.wsUrl()));
    for (const [c, id] of [[a, 'alice'], [b, 'alice'], [other, 'bob']] as const) {
      const signed = sdk.authenticateUser(c.socketId, { id });
      c.send({ event: 'pusher:signin', data: signed });
      const ok = await c.event('pusher:signin_success');
      t.same(JSON.parse(ok.data.user_data), { id });
    }
    // pusher-js subscribes to its own server-to-user channel after signin
    const sub = await a.subscribe('#server-to-user-alice');
    t.equal(sub.event, 'pusher_internal:subscription_succeeded');
    const denied = await other.subscribe('#server-to-user-alice');
    t.equal(denied.event, 'pusher:subscription_error');
    t.equal(denied.data.type, 'AuthError');

    const res = await sdk.sendToUser('alice', 'note', { n: 1 });
    t.equal(res.status, 200);
    for (const c of [a, b]) {
      const ev = await c.event('note');
      t.equal(ev.channel, '#server-to-user-alice');
      t.same(JSON.parse(ev.data), { n: 1 });
    }
    // A marker for bob, sent after: the note to alice would have come before it.
    await sdk.sendToUser('bob', 'marker', {});
    await other.event('marker', '#server-to-user-bob');
    t.same(other.frames.filter((f) => f.event === 'note'), [], 'bob gets nothing');

    const term = await sdk.terminateUserConnections('alice');
    t.equal(term.status, 200);
    for (const c of [a, b]) {
      const err = await c.event('pusher:error');
      t.equal(err.data.code, 4009);
      t.equal(await c.closed(), 4009);
    }
    // The terminate reached every shard before a later event to bob: had it cut bob, this one would not come.
    await sdk.sendToUser('bob', 'after-terminate', {});
    await other.event('after-terminate', '#server-to-user-bob');
    t.equal(other.closeCode, null, 'other users stay connected');
  });

  t.test('signin failures close with 4009', async (t) => {
    const cases: [string, (id: string) => unknown][] = [
      ['bad signature', () => ({ user_data: JSON.stringify({ id: 'x' }), auth: `${APP.key}:${'0'.repeat(64)}` })],
      ['user_data not a string', () => ({ user_data: { id: 'x' }, auth: 'k:s' })],
      ['user_data without id', (sid) => {
        const userData = JSON.stringify({ name: 'no id' });
        return { user_data: userData, auth: userAuth(APP.key, APP.secret, sid, userData) };
      }],
    ];
    for (const [name, data] of cases) {
      const c = await RawClient.connect(srv.wsUrl());
      c.send({ event: 'pusher:signin', data: data(c.socketId) });
      const err = await c.event('pusher:error');
      t.equal(err.data.code, 4009, name);
      t.equal(await c.closed(), 4009, name);
    }
  });

  t.test('pusher-js signin receives user events', async (t) => {
    const client = srv.track(new PusherJS(APP.key, {
      cluster: 'mt1', wsHost: '127.0.0.1', wsPort: srv.port, forceTLS: false, enabledTransports: ['ws'],
      userAuthentication: {
        endpoint: 'unused', transport: 'ajax',
        customHandler: ({ socketId }, cb) => cb(null, sdk.authenticateUser(socketId, { id: 'carol', name: 'Carol' })),
      },
    }));
    await connected(client);
    const got = new Promise<unknown>((resolve) => client.user.bind('hello', resolve));
    client.signin();
    await client.user.signinDonePromise;
    // pusher-js subscribes to #server-to-user-carol after signin; publish until it is in.
    let data: unknown;
    for (let i = 0; i < 50 && data === undefined; i++) {
      await sdk.sendToUser('carol', 'hello', { hi: true });
      data = await Promise.race([got, new Promise((r) => setTimeout(() => r(undefined), 100))]);
    }
    t.same(data, { hi: true });
  });

  t.teardown(() => srv.stop());
});
