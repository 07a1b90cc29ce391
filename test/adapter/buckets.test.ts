// test-modes: once (its nodes have fixed shard counts)
// test-split: LOGIC_BACKENDS (every test is inside the loop over the backends: one process per backend)
// The data plane by interest (adapter/buckets.ts, channels/bucket-gate.ts) on two real
// nodes over each logic backend: publishes travel on their channel's bucket subject, and
// a node subscribes to a bucket only while it has a subscriber there.
//  - the first subscriber of a bucket on a node is told subscription_succeeded only once
//    the node's backend subscription is acknowledged: at that moment the bucket is in the
//    node's subscribed list, and a publish made through the other node right after
//    reaches it (many fresh buckets at once);
//  - the same for a signed-in user's '#server-to-user-' channel and its signin_success;
//  - a node with no subscriber holds no bucket: the other node's publishes never reach it;
//  - a bucket is dropped after the linger without subscribers, and taken again by the next one;
//  - after a backend outage a node subscribes exactly its buckets again, and publishes
//    through the other node reach its subscribers.

import t from 'tap';
import { startNodePair } from '../helpers/cluster';
import { APP, eventually, RawClient, type TestServer } from '../helpers/server';
import { bucketOf } from '../../src/channels/interest';
import { LOGIC_BACKENDS as BACKENDS, startBackend } from './backends';

const BUCKETS = 1024;
const LINGER_MS = 300;

const buckets = (s: TestServer) => s.server.cluster!.buckets!.subscribed().sort((x, y) => x - y);
const bucket = (channel: string) => bucketOf(APP.id, channel, BUCKETS);

for (const name of BACKENDS) {
  t.test(`${name}: publishes by bucket on two nodes`, async (t) => {
    const backend = await startBackend(name);
    t.teardown(() => backend.stop());
    const cfg = { ...backend.config(), workers: 2, adapter: { ...backend.config().adapter, buckets: BUCKETS, bucket_linger_ms: LINGER_MS } };
    const [a, b] = await startNodePair(t, cfg);
    const sdk = a.sdk();

    t.test('a first subscriber of a bucket is answered after the backend subscription; a publish right after reaches it', async (t) => {
      t.same(buckets(b), [], 'node B holds no bucket before its first subscriber');
      const client = await RawClient.connect(b.wsUrl());
      t.teardown(() => client.close());
      const channels = Array.from({ length: 40 }, (_, i) => `race-${name}-${i}`);
      const late: string[] = [];
      await Promise.all(channels.map(async (channel) => {
        const ok = await client.subscribe(channel);
        if (ok.event !== 'pusher_internal:subscription_succeeded') throw new Error(`subscribe answered ${JSON.stringify(ok)}`);
        // what node B holds now, at the moment the client learnt it is subscribed
        if (!buckets(b).includes(bucket(channel))) late.push(channel);
        await sdk.trigger(channel, 'first', { channel });
      }));
      t.same(late, [], 'every bucket was subscribed on node B when its subscription_succeeded arrived');
      for (const channel of channels) {
        const f = await client.event('first', channel, 5000);
        t.same(JSON.parse(f.data as string), { channel }, `${channel}: the publish through node A arrived`);
      }
      t.same(buckets(a), [], 'node A, without subscribers, holds no bucket');
    });

    t.test('a first signed-in user of a bucket is told signin_success after the backend subscription; a user event right after reaches it', async (t) => {
      const users = Array.from({ length: 12 }, (_, i) => `signin-${name}-${i}`);
      const late: string[] = [];
      const clients = await Promise.all(users.map(async (user) => {
        const c = await RawClient.connect(b.wsUrl());
        t.teardown(() => c.close());
        c.send({ event: 'pusher:signin', data: b.sdk().authenticateUser(c.socketId, { id: user }) });
        await c.event('pusher:signin_success', undefined, 5000);
        if (!buckets(b).includes(bucket(`#server-to-user-${user}`))) late.push(user);
        await sdk.sendToUser(user, 'hello', { user });
        return c;
      }));
      t.same(late, [], 'every user\'s bucket was subscribed on node B when its signin_success arrived');
      for (const [i, c] of clients.entries()) {
        const f = await c.event('hello', `#server-to-user-${users[i]}`, 5000);
        t.same(JSON.parse(f.data as string), { user: users[i] }, `${users[i]}: the user event through node A arrived`);
      }
    });

    t.test('a node without subscribers receives nothing; a bucket goes after the linger and comes back', async (t) => {
      const onA = await RawClient.connect(a.wsUrl());
      const onB = await RawClient.connect(b.wsUrl());
      t.teardown(() => Promise.all([onA.close(), onB.close()]));
      // wait for node B's buckets of the test before (its client closed) to go
      await eventually(() => buckets(b).length === 0, 10_000, 'node B to drop the buckets it no longer needs');
      const channel = `only-a-${name}`;
      await onA.subscribe(channel);
      t.same(buckets(a), [bucket(channel)], 'node A holds the bucket of its subscriber');
      for (let i = 0; i < 20; i++) await sdk.trigger(channel, 'e', { i });
      for (let i = 0; i < 20; i++) t.same(JSON.parse((await onA.event('e', channel, 5000)).data as string), { i }, `node A's subscriber got ${i}`);
      t.same(buckets(b), [], 'node B subscribed no bucket: the backend sent it none of the 20');

      await onB.subscribe(channel);
      t.same(buckets(b), [bucket(channel)], 'node B takes the bucket with its subscriber');
      onB.send({ event: 'pusher:unsubscribe', data: { channel } });
      await eventually(() => buckets(b).length === 0, 5000, 'node B to drop the bucket after the linger');
      await onB.subscribe(channel);
      t.same(buckets(b), [bucket(channel)], 'and to take it again for the next subscriber');
      await sdk.trigger(channel, 'again', { n: 1 });
      t.same(JSON.parse((await onB.event('again', channel, 5000)).data as string), { n: 1 }, 'which gets the next publish through node A');
    });

    t.test('after a backend outage a node subscribes its buckets again', async (t) => {
      const onB = await RawClient.connect(b.wsUrl());
      t.teardown(() => onB.close());
      await eventually(() => buckets(b).length === 0, 10_000, 'node B to drop the buckets it no longer needs');
      const channels = [`outage-${name}-1`, `outage-${name}-2`];
      for (const c of channels) await onB.subscribe(c);
      const held = buckets(b);
      t.same(held, [...new Set(channels.map(bucket))].sort((x, y) => x - y), 'node B holds exactly its subscribers\' buckets');
      await backend.kill();
      await eventually(() => !a.server.cluster!.isUp() && !b.server.cluster!.isUp(), 10_000, 'both nodes to see the backend down');
      await backend.resume();
      await eventually(() => a.server.cluster!.isUp() && b.server.cluster!.isUp(), 20_000, 'both nodes to reconnect');
      // publishes made before the subscription is back are lost (like any remote publish of an outage): try until one arrives
      for (const c of channels) {
        let n = 0;
        await eventually(async () => {
          await sdk.trigger(c, 'back', { n: ++n }).catch(() => undefined);
          return onB.next((f) => f.event === 'back' && f.channel === c, 300).then(() => true, () => false);
        }, 30_000, `a publish on ${c} through node A to reach node B again`);
      }
      t.same(buckets(b), held, 'node B holds the same buckets');
    });
  });
}
