// test-modes: once (its nodes have fixed shard counts)
// test-split: LOGIC_BACKENDS (every test is inside the loop over the backends: one process per backend)
// Webhooks over a cluster, exactly once per cluster-wide transition, when two nodes make
// the same transition at the same moment: the same users join one presence channel
// through both nodes at once and leave at once; the same channels get their first
// subscriber on both nodes at once and lose their last at once. Both nodes send to one
// receiver. Each node decides its transition when it comes back from the backend
// (adapter/presence.ts, channels/owner-service.ts "Webhooks in a cluster"), so only the
// node the backend ordered first sends it. "No second one" is checked after markers: a
// fresh channel per node and owner shard, whose channel_occupied that node decides after
// everything before it on that owner.

import t, { type Test } from 'tap';
import { ownerOf } from '../../src/channels/owner';
import { APP, RawClient, type TestServer } from '../helpers/server';
import { startNodePair } from '../helpers/cluster';
import { startReceiver, type Receiver } from '../webhooks/receiver';
import { LOGIC_BACKENDS as BACKENDS, startBackend } from './backends';

const NODE_WORKERS = 2;
const USERS = 12;
const CHANNELS = 12;

let seq = 0;

function ownedBy(prefix: string, shard: number): string {
  for (let k = 0; ; k++) {
    const name = `${prefix}-${k}`;
    if (ownerOf(APP.id, name, NODE_WORKERS) === shard) return name;
  }
}

const count = (r: Receiver, name: string, channel: string, user?: string) =>
  r.events().filter((e) => e.name === name && e.channel === channel && (user === undefined || e.user_id === user)).length;

/** A marker through each node on each owner shard: every webhook decided before it is in. */
async function markers(t: Test, r: Receiver, nodes: TestServer[]): Promise<void> {
  for (const node of nodes) {
    const c = node.track(await RawClient.connect(node.wsUrl()));
    for (let s = 0; s < NODE_WORKERS; s++) {
      const ch = ownedBy(`marker-${++seq}`, s);
      await c.subscribe(ch);
      await r.until(() => count(r, 'channel_occupied', ch) === 1, 15_000, `marker ${ch}`);
    }
    await c.close();
  }
  t.pass('markers in from both nodes');
}

for (const name of BACKENDS) {
  t.test(`${name}: two nodes making the same transition at once send its webhook once`, async (t) => {
    const backend = await startBackend(name);
    t.teardown(() => backend.stop());
    const r = await startReceiver();
    t.teardown(() => r.close());
    const cfg = {
      ...backend.config(), workers: NODE_WORKERS, webhooks: { concurrency: 1 },
      apps: [{ ...APP, webhooks: [{ url: r.url, event_types: ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed'] }] }],
    };
    const [a, b] = await startNodePair(t, cfg);

    t.test('the same users join through both nodes at once, then leave at once', async (t) => {
      const ch = `presence-race-${name}`;
      const users = Array.from({ length: USERS }, (_, i) => `u${i}`);
      const tabs = await Promise.all(users.map(async (u) => {
        const pair = await Promise.all([RawClient.connect(a.wsUrl()), RawClient.connect(b.wsUrl())]);
        await Promise.all(pair.map((c) => c.subscribeAuthed(ch, { user_id: u, user_info: {} })));
        return pair;
      }));
      await r.until(() => users.every((u) => count(r, 'member_added', ch, u) > 0), 15_000, 'member_added of every user');
      await markers(t, r, [a, b]);
      t.same(users.map((u) => count(r, 'member_added', ch, u)), users.map(() => 1), 'member_added once per user');
      t.equal(count(r, 'channel_occupied', ch), 1, 'channel_occupied once');

      await Promise.all(tabs.flat().map((c) => c.close()));
      await r.until(() => users.every((u) => count(r, 'member_removed', ch, u) > 0), 15_000, 'member_removed of every user');
      await r.until(() => count(r, 'channel_vacated', ch) > 0, 15_000, 'channel_vacated');
      await markers(t, r, [a, b]);
      t.same(users.map((u) => count(r, 'member_removed', ch, u)), users.map(() => 1), 'member_removed once per user');
      t.equal(count(r, 'channel_vacated', ch), 1, 'channel_vacated once');
    });

    t.test('the same channels get their first subscriber on both nodes at once, and lose their last at once', async (t) => {
      const channels = Array.from({ length: CHANNELS }, (_, i) => `race-${name}-${i}`);
      const [ca, cb] = await Promise.all([RawClient.connect(a.wsUrl()), RawClient.connect(b.wsUrl())]);
      await Promise.all(channels.flatMap((ch) => [ca.subscribe(ch), cb.subscribe(ch)]));
      await r.until(() => channels.every((ch) => count(r, 'channel_occupied', ch) > 0), 15_000, 'channel_occupied of every channel');
      await markers(t, r, [a, b]);
      t.same(channels.map((ch) => count(r, 'channel_occupied', ch)), channels.map(() => 1), 'channel_occupied once per channel');

      await Promise.all([ca.close(), cb.close()]);
      await r.until(() => channels.every((ch) => count(r, 'channel_vacated', ch) > 0), 15_000, 'channel_vacated of every channel');
      await markers(t, r, [a, b]);
      t.same(channels.map((ch) => count(r, 'channel_vacated', ch)), channels.map(() => 1), 'channel_vacated once per channel');
    });
  });
}
