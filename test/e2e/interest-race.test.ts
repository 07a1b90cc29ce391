// Interest routing at the edge (channels/interest.ts): a publish is written only to the
// shards that have a subscriber of its channel. A subscriber must never miss a publish
// that was sent after it received `subscription_succeeded`, whatever shard the publish
// and the subscription land on. Many iterations, 4 shards, publishes back to back while
// the subscription is made; each publish is a new HTTP connection (SO_REUSEPORT spreads
// them over the shards).

import t from 'tap';
import { RawClient, startServer } from '../helpers/server';

const SHARDS = 4;
const SUBSCRIBERS = 8;
const ROUNDS = 25; // × SUBSCRIBERS iterations
/** Publishes after the subscription succeeded, per iteration. */
const AFTER = 3;

t.test('no publish sent after subscription_succeeded is lost, across shards', async (t) => {
  const srv = await startServer({ workers: SHARDS });
  t.teardown(() => srv.stop());
  const sdk = srv.sdk();
  const clients: RawClient[] = [];
  for (let i = 0; i < SUBSCRIBERS * 3 && new Set(clients.map((c) => c.socketId.split('.')[0])).size < 2; i++) {
    clients.push(srv.track(await RawClient.connect(srv.wsUrl())));
  }
  while (clients.length < SUBSCRIBERS) clients.push(srv.track(await RawClient.connect(srv.wsUrl())));
  const shardsSeen = new Set(clients.map((c) => c.socketId.split('.')[0])).size;
  t.ok(shardsSeen >= 2, `subscribers on ${shardsSeen} shards`);

  let checked = 0;
  let inFlightReceived = 0;
  let inFlight = 0;
  async function iteration(c: RawClient, channel: string): Promise<void> {
    let next = 0;
    let firstAfter = -1;
    const answered = new Set<number>();
    c.send({ event: 'pusher:subscribe', data: { channel } });
    const succeeded = c.event('pusher_internal:subscription_succeeded', channel, 10_000).then(() => { firstAfter = next; });
    // publish back to back until AFTER publishes were sent after the subscription succeeded
    while (firstAfter < 0 || next < firstAfter + AFTER) {
      const seq = next++;
      await sdk.trigger(channel, 'seq', { seq });
      answered.add(seq);
    }
    await succeeded;
    const last = next - 1;
    // positive marker: the last publish (sent after the subscription) arrives
    await c.next((f) => f.channel === channel && f.event === 'seq' && JSON.parse(f.data).seq === last, 10_000);
    const got = c.frames.filter((f) => f.channel === channel && f.event === 'seq').map((f) => JSON.parse(f.data).seq as number);
    got.push(last);
    for (let s = firstAfter; s <= last; s++) {
      if (!got.includes(s)) t.fail(`${channel}: publish ${s}, sent after subscription_succeeded, never arrived (got ${JSON.stringify(got)})`);
      checked++;
    }
    if (firstAfter > 0) {
      inFlight++;
      if (got.includes(firstAfter - 1)) inFlightReceived++;
    }
    t.ok(got.every((s, i) => i === 0 || s > got[i - 1]), `${channel}: in order`);
    c.frames.length = 0;
    c.send({ event: 'pusher:unsubscribe', data: { channel } });
  }

  for (let round = 0; round < ROUNDS; round++) {
    await Promise.all(clients.map((c, i) => iteration(c, `race-${round}-${i}`)));
  }
  t.ok(checked >= ROUNDS * SUBSCRIBERS * AFTER, `${checked} publishes sent after subscription_succeeded, every one received`);
  t.comment(`the publish in flight when the subscription succeeded was received in ${inFlightReceived} of ${inFlight} iterations (concurrent: either is correct)`);
});
