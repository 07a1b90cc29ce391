// A shard of a cluster node crashes while it owns a presence channel with members on
// another node: its replacement gets the other nodes' members back from the primary
// (before the survivors' restores), so the node's clients hear no false member_removed,
// and a later leave on the other node still reaches them once.

import t from 'tap';
import { ownerOf } from '../../src/channels/owner';
import { APP, eventually, RawClient, startServer, type Frame } from '../helpers/server';
import { settle } from '../helpers/settle';
import { startBackend } from './backends';

process.env.RINGCAST_TEST_HOOKS = '1';
const data = (f: Frame) => (typeof f.data === 'string' ? JSON.parse(f.data) : f.data) as { user_id: string };
const about = (c: RawClient, event: string, user: string) => c.frames.filter((f) => f.event === event && data(f).user_id === user);

t.test('a crashed owner shard gets the other nodes\' members back', async (t) => {
  const backend = await startBackend('redis');
  t.teardown(() => backend.stop());
  const cfg = { ...backend.config(), workers: 2 };
  const a = await startServer(cfg);
  t.teardown(() => a.stop());
  const b = await startServer(cfg);
  t.teardown(() => b.stop());
  await eventually(() => a.server.cluster!.nodes().length === 2 && b.server.cluster!.nodes().length === 2, 10_000, 'the nodes to see each other');

  const channel = 'presence-crash';
  const owner = ownerOf(APP.id, channel, 2);
  // watchers on node A, on both shards (the one on the crashing shard goes with it)
  const watchers: RawClient[] = [];
  while (new Set(watchers.map((w) => w.socketId.split('.')[0])).size < 2 && watchers.length < 40) {
    watchers.push(a.track(await RawClient.connect(a.wsUrl())));
  }
  for (const [i, w] of watchers.entries()) await w.subscribeAuthed(channel, { user_id: `w${i}`, user_info: {} });
  const remote = b.track(await RawClient.connect(b.wsUrl()));
  await remote.subscribeAuthed(channel, { user_id: 'r', user_info: {} });
  for (const w of watchers) await w.next((f) => f.event === 'pusher_internal:member_added' && data(f).user_id === 'r', 5000);

  const prefixes = a.server.testShardPrefixes!();
  await a.server.testCrashShard!(owner);
  const survivors = watchers.filter((w) => w.socketId.split('.')[0] !== prefixes[owner]);
  t.ok(survivors.length > 0, 'watchers on the surviving shard');
  await settle(a, survivors, channel);
  for (const w of survivors) t.equal(about(w, 'pusher_internal:member_removed', 'r').length, 0, 'no false member_removed of the remote user');

  await remote.close();
  for (const w of survivors) await w.next((f) => f.event === 'pusher_internal:member_removed' && data(f).user_id === 'r', 5000);
  await settle(a, survivors, channel);
  for (const w of survivors) t.equal(about(w, 'pusher_internal:member_removed', 'r').length, 0, 'member_removed once when the remote user leaves');
});
