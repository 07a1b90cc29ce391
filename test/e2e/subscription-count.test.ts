// pusher_internal:subscription_count for apps that opt in (subscription_count_events),
// coalesced by the channel's owner and sent on non-presence channels only.
import t from 'tap';
import { RawClient, eventually, startServer } from '../helpers/server';

t.test('subscription_count events follow the count across shards, for opted-in apps only', async (t) => {
  const counted = { id: 'counted', key: 'counted-key', secret: 'counted-secret', subscription_count_events: true };
  const plain = { id: 'plain', key: 'plain-key', secret: 'plain-secret' };
  const srv = await startServer({ apps: [counted, plain] });
  const clients: RawClient[] = [];
  for (let i = 0; i < 4; i++) clients.push(srv.track(await RawClient.connect(srv.wsUrl(counted.key))));
  for (const c of clients) await c.subscribe('room');
  const last = (c: RawClient) => {
    const evs = c.frames.filter((f) => f.event === 'pusher_internal:subscription_count' && f.channel === 'room');
    return evs.length ? JSON.parse(evs[evs.length - 1].data).subscription_count : null;
  };
  await eventually(() => clients.every((c) => last(c) === 4), 3000, 'count 4 everywhere');
  const burst = clients[0].frames.filter((f) => f.event === 'pusher_internal:subscription_count').length;
  t.ok(burst <= 3, `coalesced: ${burst} events for 4 subscribes`);
  await clients[3].close();
  await eventually(() => clients.slice(0, 3).every((c) => last(c) === 3), 3000, 'count 3 after a leave');

  const p = srv.track(await RawClient.connect(srv.wsUrl(plain.key)));
  await p.subscribe('room');
  const p2 = srv.track(await RawClient.connect(srv.wsUrl(plain.key)));
  await p2.subscribe('room');
  t.same(await p.none((f) => f.event === 'pusher_internal:subscription_count', 500), [], 'not opted in: none');

  const pres = srv.track(await RawClient.connect(srv.wsUrl(counted.key)));
  await pres.subscribeAuthed('presence-x', { user_id: 'u' }, counted);
  t.same(await pres.none((f) => f.event === 'pusher_internal:subscription_count', 500), [], 'presence: none');
  await srv.stop();
});
