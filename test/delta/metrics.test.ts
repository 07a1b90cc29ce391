// test-modes: once (the delta metrics are the sequencer's; the scrape across shards: metrics/metrics)
// messages_sent_total / message_bytes_sent_total (spec "Metrics") count delta and filtered
// deliveries with the bytes actually sent: a pusher:delta frame counts as
// event="pusher:delta" with its own size, a full message to a delta socket (late joiner,
// after a sync error, a delta not smaller) as the event it is, a filtered delivery once per
// socket it reached. Checked against what the clients received: on a server with only
// these clients, the counters equal the frames and bytes they got, all of them.

import t from 'tap';
import { metric } from '../faults/api';
import { signedPost } from '../helpers/http';
import { APP, startServer, type TestServer } from '../helpers/server';
import { Books, core, DeltaClient, rng } from './clients';

const SEED = Number(process.env.DELTA_SEED ?? Date.now() % 100_000);
const keyed = { enabled: true, algorithm: null, conflation_key: 'sym', max_messages_per_key: 3, max_conflation_keys: 10, enable_tags: false };

async function publish(srv: TestServer, channel: string, name: string, data: string, region: string | null): Promise<void> {
  const r = await signedPost(srv.port, APP, 'events', { name, channel, data, ...(region ? { tags: { region } } : {}) });
  if (r.status !== 200) throw new Error(`publish ${name}: ${r.status} ${r.text}`);
}

t.test(`delta and filtered deliveries are counted with their own bytes (seed ${SEED})`, async (t) => {
  const srv = await startServer({
    metrics: { enabled: true, port: 0, host: '127.0.0.1' },
    tag_filtering: { enabled: true },
    apps: [{ ...APP, channel_delta_compression: { 'keyed-*': keyed } }],
  });
  t.teardown(() => srv.stop());
  const channels = ['ticker', 'keyed-fx'];
  const plain = await DeltaClient.open(srv, null);
  const fossil = await DeltaClient.open(srv, new core.DeltaDecoder());
  const xdelta = await DeltaClient.open(srv, await core.createDeltaDecoder({ xdelta3: true }));
  const filtered = await DeltaClient.open(srv, new core.DeltaDecoder());
  const broken = await DeltaClient.open(srv, new core.DeltaDecoder());
  const late = await DeltaClient.open(srv, new core.DeltaDecoder());
  await fossil.enable();
  await broken.enable();
  await filtered.enable();
  for (const ch of channels) {
    await plain.subscribe(ch);
    await fossil.subscribe(ch);
    await xdelta.subscribe(ch, { delta: 'xdelta3' });
    await broken.subscribe(ch);
    await filtered.subscribe(ch, { filter: { key: 'region', cmp: 'eq', val: 'eu' } });
  }
  const rand = rng(SEED);
  const books = new Books(rand);
  const syms = ['EURUSD', 'GBPUSD', 'USDJPY'];
  for (let i = 0; i < 40; i++) {
    const x = rand();
    const region = x < 0.5 ? 'eu' : x < 0.8 ? 'us' : null;
    const channel = channels[i % 2];
    await publish(srv, channel, i % 3 === 0 ? 'book' : 'price', books.update(channel === 'ticker' ? 'BTC' : syms[i % 3]), region);
    if (i === 20) {
      // late joiner: full messages sent to it alone, then deltas; and a sync error
      await late.subscribe('ticker', { delta: 'fossil' });
      broken.beforeDelta = () => {
        broken.decoder!.reset('ticker');
        broken.beforeDelta = null;
      };
    }
  }
  for (const ch of channels) await publish(srv, ch, 'end', '{"end":true}', 'eu');
  const all = [plain, fossil, xdelta, filtered, broken, late];
  const ended = (c: DeltaClient, ch: string) => c.until(() => c.events(ch).some((e) => e.includes('"event":"end"')), `end on ${ch}`);
  await Promise.all(all.flatMap((c) => (c === late ? [ended(c, 'ticker')] : channels.map((ch) => ended(c, ch)))));
  // a sync error is read by the server before the frame that follows it on the socket
  t.ok(broken.decoder!.stats.syncErrors >= 1, 'the broken client reported a sync error');
  const marker = 'marker-' + SEED;
  await broken.subscribe(marker);

  const frames = all.reduce((n, c) => n + c.texts.length, 0);
  const bytes = all.reduce((n, c) => n + c.bytes, 0);
  const deltas = all.reduce((n, c) => n + c.texts.filter((x) => x.startsWith('{"event":"pusher:delta"')).length, 0);
  const apiEvents = all.reduce((n, c) => n + c.texts.filter((x) => !x.startsWith('{"event":"pusher')).length, 0);
  const port = srv.server.metricsPort!;
  t.ok(deltas > 60, `the clients got ${deltas} pusher:delta frames`);
  t.equal(await metric(port, 'messages_sent_total', { event: 'pusher:delta' }), deltas, 'messages_sent_total{event="pusher:delta"}: one per delta frame received');
  t.equal(await metric(port, 'messages_sent_total', { event: 'api-event' }), apiEvents, 'messages_sent_total{event="api-event"}: every full message, to plain, filtered and delta sockets');
  t.equal(await metric(port, 'messages_sent_total', { event: 'pusher:delta_cache_sync' }), all.reduce((n, c) => n + c.texts.filter((x) => x.includes('"pusher:delta_cache_sync"')).length, 0), 'cache syncs');
  t.equal(await metric(port, 'messages_sent_total', { event: 'pusher:delta_compression_enabled' }), 3, 'the opt-in answers');
  t.equal(await metric(port, 'messages_sent_total'), frames, `every frame the clients received is counted once (${frames})`);
  t.equal(await metric(port, 'message_bytes_sent_total'), bytes, `message_bytes_sent_total is the bytes they received (${bytes})`);
  t.equal(await metric(port, 'websocket_messages_dropped_total'), 0, 'nothing dropped');
});
