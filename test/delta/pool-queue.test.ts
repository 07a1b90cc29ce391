// test-modes: once (the delta pool's queue is the sequencer's, one thread whatever the shard count)
// delta_compression.pool_max_queue: the delta pool (pool_size > 0, piscina) holds at most
// that many deltas waiting for a thread; one more is refused at once and its message
// goes out in full (the client reconstructs the same events), counted in
// delta_pool_refused_total (scraped from the sequencer thread). Bursts of batch publishes
// against a one-thread pool with a queue of 1.
// Runs with RINGCAST_TEST_WORKERS=1 and =4.

import t from 'tap';
import { signedPost } from '../helpers/http';
import { APP, startServer } from '../helpers/server';
import { metric } from '../faults/api';
import { Books, core, DeltaClient, positions, rng } from './clients';

t.test('a full delta pool queue: messages go out in full, counted', async (t) => {
  const srv = await startServer({
    delta_compression: { enabled: true, pool_size: 1, pool_max_queue: 1, full_message_interval: 1000 },
    metrics: { enabled: true, port: 0, host: '127.0.0.1' },
  });
  t.teardown(() => srv.stop());
  t.equal(await metric(srv.server.metricsPort!, 'delta_pool_refused_total'), 0, 'the metric is exported (sequencer thread), 0 at start');
  const plain = await DeltaClient.open(srv, null);
  const c = await DeltaClient.open(srv, new core.DeltaDecoder());
  await c.enable();
  await plain.subscribe('book');
  await c.subscribe('book');

  const books = new Books(rng(3), 2000);
  for (let b = 0; b < 8; b++) {
    const batch = Array.from({ length: 10 }, () => ({ name: 'price', channel: 'book', data: books.update('A') }));
    const r = await signedPost(srv.port, APP, 'batch_events', { batch });
    t.equal(r.status, 200, `batch ${b} published`);
  }
  await signedPost(srv.port, APP, 'events', { name: 'end', channel: 'book', data: '{"end":1}' });
  await Promise.all([plain, c].map((x) => x.until(() => x.events('book').some((e) => e.includes('{\\"end\\":1}')), 'end', 20_000)));

  const refused = await metric(srv.server.metricsPort!, 'delta_pool_refused_total');
  const pos = positions(c, 'book');
  const priceFulls = pos.filter((p) => p.full && p.seq > 0 && p.seq <= 80).length;
  t.ok(refused > 0, `${refused} deltas refused by the full queue`);
  t.ok(pos.filter((p) => !p.full).length > 0, 'the others went as deltas');
  t.equal(priceFulls, refused, 'each refused delta: its message went in full');
  t.same(c.events('book'), plain.events('book'), 'the delta client got every event, byte for byte');
});
