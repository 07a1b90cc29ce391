// test-modes: once (its nodes have fixed shard counts)
// test-split: LOGIC_BACKENDS (every test is inside the loop over the backends: one process per backend)
// Unmodified pusher-js clients connected to different nodes of a cluster, and the `pusher`
// SDK publishing to one of them: what an application sees when a load balancer spreads
// its users over the nodes. Public events, socket_id exclusion, presence (members on both
// sides, member_added / member_removed), client events between the nodes.

import t from 'tap';
import type { PresenceChannel } from 'pusher-js';
import { collect, connected, pusherJs, subscribed } from '../helpers/pusher-js';
import { eventually } from '../helpers/server';
import { startNodePair } from '../helpers/cluster';
import { LOGIC_BACKENDS as BACKENDS, startBackend } from './backends';

for (const name of BACKENDS) {
  t.test(`${name}: pusher-js on two nodes`, async (t) => {
    const backend = await startBackend(name);
    t.teardown(() => backend.stop());
    const cfg = { ...backend.config(), workers: 2 };
    const [a, b] = await startNodePair(t, cfg);
    const sdk = a.sdk();

    t.test('an event published to node A reaches both, socket_id exclusion across nodes', async (t) => {
      const ca = a.track(pusherJs(a.port));
      const cb = b.track(pusherJs(b.port));
      const [, sidB] = await Promise.all([connected(ca), connected(cb)]);
      const channel = `news-${name}`;
      const [cha, chb] = await Promise.all([subscribed(ca, channel), subscribed(cb, channel)]);
      const ga = collect(cha, 'headline');
      const gb = collect(chb, 'headline');
      await sdk.trigger(channel, 'headline', { n: 1 });
      await sdk.trigger(channel, 'headline', { n: 2 }, { socket_id: sidB }); // not to the client on node B
      await sdk.trigger(channel, 'headline', { n: 3 });
      await ga.until(3, 'node A\'s client to get the three events');
      await gb.until(2, 'node B\'s client to get two events');
      t.same(ga.got, [{ n: 1 }, { n: 2 }, { n: 3 }], 'node A\'s client: all three, in order');
      t.same(gb.got, [{ n: 1 }, { n: 3 }], 'node B\'s client: the excluded one left out (the later event is the marker)');
    });

    t.test('presence: each side sees the other\'s member, and its leaving', async (t) => {
      const alice = a.track(pusherJs(a.port, { user: { user_id: 'alice', user_info: { node: 'a' } } }));
      const bob = b.track(pusherJs(b.port, { user: { user_id: 'bob', user_info: { node: 'b' } } }));
      await Promise.all([connected(alice), connected(bob)]);
      const channel = `presence-room-${name}`;
      const pa = (await subscribed(alice, channel)) as PresenceChannel;
      const added = collect(pa, 'pusher:member_added');
      const removed = collect(pa, 'pusher:member_removed');
      const pb = (await subscribed(bob, channel)) as PresenceChannel;
      await eventually(() => pb.members.count === 2, 10_000, 'bob to see two members');
      t.same((pb.members.get('alice') as { info: unknown }).info, { node: 'a' }, 'bob sees alice (node A) with her user_info');
      await added.until(1, 'alice to hear bob join');
      t.same(added.got, [{ id: 'bob', info: { node: 'b' } }], 'alice heard member_added for bob once');
      t.equal(pa.members.count, 2, 'alice counts two members');
      bob.disconnect();
      await removed.until(1, 'alice to hear bob leave');
      t.same(removed.got, [{ id: 'bob', info: { node: 'b' } }], 'member_removed for bob');
      await eventually(() => pa.members.count === 1, 5000, 'alice to count one member');
    });

    t.test('client events between nodes', async (t) => {
      const ca = a.track(pusherJs(a.port));
      const cb = b.track(pusherJs(b.port));
      await Promise.all([connected(ca), connected(cb)]);
      const channel = `private-chat-${name}`;
      const [cha, chb] = await Promise.all([subscribed(ca, channel), subscribed(cb, channel)]);
      const gb = collect(chb, 'client-typing');
      const ga = collect(cha, 'client-typing');
      cha.trigger('client-typing', { from: 'a' });
      await gb.until(1, 'node B\'s client to get the client event');
      t.same(gb.got, [{ from: 'a' }], 'delivered across nodes');
      chb.trigger('client-typing', { from: 'b' });
      await ga.until(1, 'node A\'s client to get the answer');
      t.same(ga.got, [{ from: 'b' }], 'and back; the sender never gets its own (its answer arrived instead)');
    });
  });
}
