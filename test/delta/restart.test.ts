// test-modes: once (4 shards whatever RINGCAST_TEST_WORKERS says)
// A shard that crashes is replaced (docs/architecture.md, "Shard failure"); the delta
// sequencer is rewired to the replacement like every survivor: delta clients on the other
// shards keep decoding byte for byte, and clients of the replacement (publishing through
// it, receiving from the sequencer over the fresh rings) take deltas again. 4 shards
// whatever RINGCAST_TEST_WORKERS says, test hooks on.

import t from 'tap';
import { signedPost } from '../helpers/http';
import { APP, startServer } from '../helpers/server';
import { Books, core, DeltaClient, rng } from './clients';

process.env.RINGCAST_TEST_HOOKS = '1';

t.test('the sequencer follows a shard restart', async (t) => {
  const srv = await startServer({ workers: 4, delta_compression: { enabled: true } });
  t.teardown(() => srv.stop());
  const channel = 'ticker';
  const clients: DeltaClient[] = [];
  for (let i = 0; i < 12; i++) clients.push(await DeltaClient.open(srv, new core.DeltaDecoder()));
  const prefixes = srv.server.testShardPrefixes!();
  const shardOf = (c: DeltaClient) => prefixes.indexOf(c.socketId.split('.')[0]);
  const used = new Set(clients.map(shardOf));
  t.ok(used.size >= 2, `clients on ${used.size} shards`);
  const victim = shardOf(clients[0]);
  const survivors = clients.filter((c) => shardOf(c) !== victim);
  const plain = (await (async () => {
    for (let i = 0; i < 20; i++) {
      const p = await DeltaClient.open(srv, null);
      if (shardOf(p) !== victim) return p;
    }
    throw new Error('no plain client off the victim shard');
  })());
  await plain.subscribe(channel);
  for (const c of clients) {
    await c.enable();
    await c.subscribe(channel);
  }
  const books = new Books(rng(11));
  const publish = async (n: number) => {
    for (let i = 0; i < n; i++) {
      const r = await signedPost(srv.port, APP, 'events', { name: 'price', channel, data: books.update('A') });
      t.equal(r.status, 200, 'published');
    }
  };
  await publish(10);
  await srv.server.testCrashShard!(victim);
  await publish(20);
  await signedPost(srv.port, APP, 'events', { name: 'end', channel, data: '{}' });
  const ended = (c: DeltaClient) => c.until(() => c.events(channel).some((e) => e.includes('"event":"end"')), 'end');
  await Promise.all([plain, ...survivors].map(ended));
  for (const c of survivors) {
    t.same(c.events(channel), plain.events(channel), `${c.socketId} (shard ${shardOf(c)}): identical envelopes across the restart`);
    t.equal(c.decoder!.stats.syncErrors, 0, 'no sync error');
  }
  // clients of the replacement shard: connect until one lands there
  const now = srv.server.testShardPrefixes!();
  let fresh: DeltaClient | null = null;
  for (let i = 0; i < 40 && fresh === null; i++) {
    const c = await DeltaClient.open(srv, new core.DeltaDecoder());
    if (c.socketId.startsWith(now[victim] + '.')) fresh = c;
  }
  t.ok(fresh, 'a client on the replacement shard');
  await fresh!.enable();
  await fresh!.subscribe(channel);
  const from = plain.events(channel).length;
  await publish(8);
  await signedPost(srv.port, APP, 'events', { name: 'end', channel, data: '{"again":true}' });
  await Promise.all([plain, fresh!].map((c) => c.until(() => c.events(channel).some((e) => e.includes('again')), 'second end')));
  const want = plain.events(channel).slice(from);
  const got = fresh!.events(channel);
  t.same(got, want.slice(want.length - got.length), 'the replacement\'s delta client: identical envelopes');
  t.ok(got.length >= want.length && fresh!.decoder!.stats.deltas >= 6, `it took deltas (${fresh!.decoder!.stats.deltas})`);
});
