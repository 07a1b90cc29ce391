// pusher_internal:subscription_count for apps that opt in (subscription_count_events),
// coalesced by the channel's owner and sent on non-presence channels only.
import t from 'tap';
import { ownerOf } from '../../src/channels/owner';
import { RawClient, WORKERS, eventually, startServer, type TestServer } from '../helpers/server';
import { settle } from '../helpers/settle';

type App = { id: string; key: string; secret: string };
const isCount = (f: { event: string }) => f.event === 'pusher_internal:subscription_count';

/**
 * The owner sends subscription_count from a 250 ms timer set when a count changes. To show
 * that a change set none: a channel of the opted-in app with the same owner changes after
 * it, and its count arrives; the owner's timers fire in the order they were set, so a
 * timer of the first change would have written its event before. A marker published then
 * on the first channel comes after that event (test/helpers/settle.ts).
 */
async function ownerTimersRan(srv: TestServer, counted: App, app: App, channel: string, tag: string): Promise<void> {
  const owner = ownerOf(app.id, channel, WORKERS);
  let k = 0;
  while (ownerOf(counted.id, `probe-${tag}-${k}`, WORKERS) !== owner) k++;
  const probe = `probe-${tag}-${k}`;
  const q = srv.track(await RawClient.connect(srv.wsUrl(counted.key)));
  await q.subscribe(probe);
  await q.next((f) => isCount(f) && f.channel === probe);
  await q.close();
}

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
  await ownerTimersRan(srv, counted, plain, 'room', 'plain');
  await settle(srv, [p, p2], 'room', { app: plain });
  t.same([p, p2].flatMap((c) => c.frames.filter(isCount)), [], 'not opted in: none');

  const pres = srv.track(await RawClient.connect(srv.wsUrl(counted.key)));
  await pres.subscribeAuthed('presence-x', { user_id: 'u' }, counted);
  await ownerTimersRan(srv, counted, counted, 'presence-x', 'presence');
  await settle(srv, pres, 'presence-x', { app: counted });
  t.same(pres.frames.filter(isCount), [], 'presence: none');
  await srv.stop();
});
