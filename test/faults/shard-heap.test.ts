// Every shard's heap has its young generation capped at 12 MB (4 MB semi-spaces: new
// space 8 MB after a full GC), however many shards start together (main.ts,
// docs/benchmarks.md "Idle RSS per connection").
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import t from 'tap';
import { WORKERS, startServer } from '../helpers/server';

t.test('shard new spaces are 8 MB, for every shard', async (t) => {
  // testGc needs gc() in every thread: the flag before the shards' heaps exist, and the
  // primary's own gc taken from a fresh context (this process was not started with it).
  setFlagsFromString('--expose-gc');
  (globalThis as { gc?: unknown }).gc ??= runInNewContext('gc');
  process.env.RINGCAST_TEST_HOOKS = '1';
  const srv = await startServer({ workers: Math.max(WORKERS, 2) });
  t.teardown(() => srv.stop());
  const heaps = await srv.server.testGc();
  t.equal(heaps.shards.length, Math.max(WORKERS, 2), 'one figure per shard');
  for (const [i, h] of heaps.shards.entries()) {
    t.equal(h.newSpace, 8 * 1024 * 1024, `shard ${i}: new space 8 MB (two 4 MB semi-spaces)`);
    t.ok(h.used > 0 && h.used < h.committed, `shard ${i}: live heap below committed`);
  }
});
