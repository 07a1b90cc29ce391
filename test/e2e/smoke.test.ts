import t from 'tap';
import { connected, pusherJs } from '../helpers/pusher-js';
import { startServer } from '../helpers/server';

t.test('pusher-js subscribes to a presence channel and receives an event triggered with the pusher SDK', async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.stop());
  const client = srv.track(pusherJs(srv.port, { user: { user_id: 'u1', user_info: { name: 'Ada' } } }));
  await connected(client);
  const channel = client.subscribe('presence-room');
  const members = await new Promise<any>((resolve, reject) => {
    channel.bind('pusher:subscription_succeeded', resolve);
    channel.bind('pusher:subscription_error', reject);
  });
  t.equal(members.count, 1);
  t.same(members.me, { id: 'u1', info: { name: 'Ada' } });
  const got = new Promise<any>((resolve) => channel.bind('greeting', resolve));
  const res = await srv.sdk().trigger('presence-room', 'greeting', { text: 'hello' });
  t.equal(res.status, 200);
  t.same(await got, { text: 'hello' });
});
