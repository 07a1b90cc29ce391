// test-modes: once (the example as a user runs it; the server paths it uses run with 1 and 4 shards elsewhere)
// examples/echo-client.ts (Laravel Echo 2, broadcaster pusher), run against a test server
// that keeps history as the shipped config.yaml says, instead of :6001.

import path from 'node:path';
import Pusher from 'pusher';
import t from 'tap';
import { startAuthEndpoint, run } from '../../examples/echo-client';
import { loadConfig } from '../../src/config';
import { freePort } from '../helpers/net';
import { APP, eventually, startServer } from '../helpers/server';

const FROM_CONFIG_YAML = loadConfig({ file: path.resolve(__dirname, '..', '..', '..', 'config.yaml'), env: {} }).apps[0];

t.test('the shipped config.yaml keeps the history the example uses', async (t) => {
  t.match(FROM_CONFIG_YAML.channel_history, { 'history-*': { size: 100, rewind: 5 } });
});

t.test('the Echo example runs against a server', async (t) => {
  const srv = await startServer({ apps: [{ ...APP, channel_history: FROM_CONFIG_YAML.channel_history as never }] });
  t.teardown(() => srv.stop());
  const lines: string[] = [];
  const r = await run({ host: '127.0.0.1', port: srv.port, appId: APP.id, key: APP.key, secret: APP.secret, log: (l) => lines.push(l) });

  t.same(r.orders, [['OrderPaid', { order: 1001 }], ['.OrderShipped', { order: 1001, carrier: 'DHL' }]],
    'App\\Events\\OrderPaid reaches listen(\'OrderPaid\'), OrderShipped reaches listen(\'.OrderShipped\'), in order');
  t.same(r.privateOrders, [{ order: 1001, status: 'out for delivery' }], 'Alice gets her private channel');
  t.match(r.bobDenied, { type: 'AuthError', status: 403 }, 'Bob is refused Alice\'s private channel by the auth endpoint');

  const alice = { id: 'alice', name: 'Alice' };
  const bob = { id: 'bob', name: 'Bob' };
  t.same(r.aliceHere, [alice], 'Alice is alone in the room');
  t.same([...r.bobHere].sort((a, b) => a.id.localeCompare(b.id)), [alice, bob], 'Bob sees Alice and himself');
  t.same(r.aliceSawJoining, [bob], '.joining once');
  t.same(r.aliceSawLeaving, [bob], '.leaving once');
  t.same(r.whispers, [{ name: 'Bob', typing: true }], 'the whisper arrives');

  const range = (a: number, b: number): number[] => Array.from({ length: b - a + 1 }, (_, i) => a + i);
  t.match(r.historyChannel, /^history-feed\.[0-9a-z]+$/);
  t.same(r.carolGot, range(3, 16), 'the late subscriber: the last 5 (rewind), then live, no gap, no duplicate');
  t.same(r.aliceGot, range(1, 16), 'Alice with withRecovery: every message once, in order, across her time offline');
  t.match(r.alicePosition, { epoch: /.+/, serial: 16 });

  const text = lines.join('\n');
  t.match(text, /Carol \(late\): rewind gave her 3,4,5,6,7/);
  t.match(text, /Alice: back online, recovered 8,9,10,11,12,13,14,15/);
  t.equal(lines[lines.length - 1], 'done');

  // Everyone left: nothing stays occupied.
  await eventually(async () => {
    const res = await srv.sdk().get({ path: '/channels', params: {} });
    return Object.keys(((await res.json()) as { channels: object }).channels).length === 0;
  }, 5000, 'every channel to be vacated');
  t.pass('every channel vacated');
});

t.test('the example\'s auth endpoint refuses bad requests with a clear error', async (t) => {
  const sdk = new Pusher({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1' }); // signs only
  const auth = await startAuthEndpoint(sdk);
  t.teardown(() => auth.close());
  const post = async (body: Record<string, string>, token?: string): Promise<[number, unknown]> => {
    const res = await fetch(auth.url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: new URLSearchParams(body).toString(),
    });
    return [res.status, await res.json()];
  };
  t.same(await post({ socket_id: '1.2', channel_name: 'private-orders.alice' }), [401, { error: 'unknown or missing bearer token' }]);
  t.same(await post({ socket_id: '1.2', channel_name: 'private-orders.alice' }, 'nobody'), [401, { error: 'unknown or missing bearer token' }]);
  t.same(await post({ channel_name: 'private-orders.alice' }, 'alice-token'), [400, { error: 'socket_id and channel_name are required' }]);
  t.same(await post({ socket_id: '1.2', channel_name: 'private-orders.bob' }, 'alice-token'), [403, { error: 'alice may not subscribe to private-orders.bob' }]);
  t.same(await post({ socket_id: '1.2', channel_name: 'private-orders.alice' }, 'alice-token'),
    [200, sdk.authorizeChannel('1.2', 'private-orders.alice')], 'signed as the SDK signs');
  const res = await fetch(auth.url.replace('/broadcasting/auth', '/other'), { method: 'POST' });
  t.same([res.status, await res.json()], [404, { error: 'POST /broadcasting/auth only' }]);
});

t.test('the example fails with a clear message when no server answers', async (t) => {
  const port = await freePort(); // nobody listens on it
  await t.rejects(run({ host: '127.0.0.1', port, timeoutMs: 1500, log: () => undefined }), /no answer from ringcast/);
});
