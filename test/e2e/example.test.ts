// test-modes: once (the example as a user runs it; the server paths it uses run with 1 and 4 shards elsewhere)
// examples/presence-chat.ts, run against a test server instead of :6001.

import net from 'node:net';
import t from 'tap';
import { run } from '../../examples/presence-chat';
import { APP, eventually, startServer } from '../helpers/server';

t.test('the presence-chat example runs against a server', async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.stop());
  const lines: string[] = [];
  const result = await run({ host: '127.0.0.1', port: srv.port, appId: APP.id, key: APP.key, secret: APP.secret, log: (l) => lines.push(l) });

  const alice = { id: 'alice', info: { name: 'Alice' } };
  const bob = { id: 'bob', info: { name: 'Bob' } };
  t.same(result.aliceJoined, [alice], 'Alice joins an empty room');
  t.same([...result.bobJoined].sort((a, b) => a.id.localeCompare(b.id)), [alice, bob], 'Bob sees Alice and himself');
  t.same(result.aliceSaw, ['added bob', 'removed bob'], 'Alice sees Bob arrive and leave, once each');
  const message = { from: 'backend', text: 'Welcome to the room!' };
  t.same(result.aliceGot, message);
  t.same(result.bobGot, message);

  t.match(lines.join('\n'), /Alice joined presence-chat as socket \d+\.\d+/);
  t.match(lines.join('\n'), /answered 200/);
  t.equal(lines[lines.length - 1], 'done');

  // Everyone left: the channel is vacated.
  await eventually(async () => {
    const res = await srv.sdk().get({ path: '/channels/presence-chat', params: { info: 'user_count' } });
    return ((await res.json()) as { occupied: boolean }).occupied === false;
  }, 3000, 'presence-chat to be vacated');
  t.pass('presence-chat vacated');
});

t.test('the example fails with a clear message when no server answers', async (t) => {
  // A port nobody listens on.
  const port = await new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
  await t.rejects(run({ host: '127.0.0.1', port, timeoutMs: 1500, log: () => undefined }), /no answer from ringcast/);
});
