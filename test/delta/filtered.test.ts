// Tag filters and delta compression on the same channel (spec "Delta compression" and "Tag
// filtering"; the rule in ws/subscribe.ts): a tag-filtered subscription gets full messages
// and never joins a delta stream, whether the socket opted into deltas before it subscribed
// or after; unfiltered delta subscribers of the same channel keep getting deltas. On one
// channel, through a real server (RINGCAST_TEST_WORKERS shards):
//   plain     no delta, no filter        every event, in full
//   delta     delta, no filter           every event, deltas decoded byte for byte
//   filtered  delta, filter region=eu    the eu events only, in full, the plain bytes
//   late      filter, then delta opt-in  the same as `filtered`
// Tagged (eu / us) and untagged publishes are mixed; the last event (eu) is the end marker,
// so "filtered got nothing else" is checked once it got that positive marker.

import t from 'tap';
import { signedPost } from '../helpers/http';
import { APP, startServer, type TestServer } from '../helpers/server';
import { Books, core, DeltaClient, rng } from './clients';

const SEED = Number(process.env.DELTA_SEED ?? Date.now() % 100_000);
const CHANNEL = 'quotes';
const EU = { key: 'region', cmp: 'eq', val: 'eu' };

type Region = 'eu' | 'us' | null;

async function publish(srv: TestServer, name: string, data: string, region: Region): Promise<void> {
  const r = await signedPost(srv.port, APP, 'events', { name, channel: CHANNEL, data, ...(region ? { tags: { region } } : {}) });
  if (r.status !== 200) throw new Error(`publish ${name}: ${r.status} ${r.text}`);
}

/** The raw text frames of the channel's application events (no pusher: / pusher_internal:). */
function appFrames(c: DeltaClient): string[] {
  return c.texts.filter((x) => x.includes(`"channel":"${CHANNEL}"`) && !x.startsWith('{"event":"pusher'));
}

for (const algo of ['fossil', 'xdelta3'] as const) {
  t.test(`${algo}: filtered subscriptions get full messages, unfiltered delta ones deltas (seed ${SEED})`, async (t) => {
    const srv = await startServer({ tag_filtering: { enabled: true }, delta_compression: { algorithm: algo === 'fossil' ? 'Fossil' : 'Xdelta3' } });
    t.teardown(() => srv.stop());
    const decoder = async () => (algo === 'fossil' ? new core.DeltaDecoder() : await core.createDeltaDecoder({ xdelta3: true }));
    const plain = await DeltaClient.open(srv, null);
    const delta = await DeltaClient.open(srv, await decoder());
    const filtered = await DeltaClient.open(srv, await decoder());
    const late = await DeltaClient.open(srv, await decoder());
    await plain.subscribe(CHANNEL);
    await delta.enable();
    await delta.subscribe(CHANNEL);
    await filtered.enable();
    await filtered.subscribe(CHANNEL, { filter: EU });
    // subscribed before the opt-in (what pusher-js does: it subscribes on connect)
    await late.subscribe(CHANNEL, { filter: EU });
    await late.enable();

    const rand = rng(SEED);
    const books = new Books(rand);
    const regions: Region[] = [];
    const N = 60;
    for (let i = 0; i < N; i++) {
      const x = rand();
      const region: Region = x < 0.45 ? 'eu' : x < 0.8 ? 'us' : null;
      regions.push(region);
      await publish(srv, i % 3 === 0 ? 'book' : 'price', books.update('A'), region);
    }
    regions.push('eu');
    await publish(srv, 'end', '{"end":true}', 'eu');
    const ended = (c: DeltaClient) => c.until(() => c.events(CHANNEL).some((e) => e.includes('"event":"end"')), 'the end marker');
    await Promise.all([plain, delta, filtered, late].map(ended));

    const want = plain.events(CHANNEL);
    t.equal(want.length, N + 1, 'the plain client got every event');
    t.same(delta.events(CHANNEL), want, 'the unfiltered delta client reconstructs every event byte for byte');
    t.ok(delta.decoder!.stats.deltas > N / 3, `it got deltas (${delta.decoder!.stats.deltas} of ${N + 1})`);
    t.equal(delta.decoder!.stats.syncErrors, 0, 'no sync error');

    const eu = want.filter((_, i) => regions[i] === 'eu');
    const euFrames = appFrames(plain).filter((_, i) => regions[i] === 'eu');
    t.ok(eu.length > 10 && eu.length < N, `${eu.length} eu events`);
    for (const [name, c] of [['filtered', filtered], ['late', late]] as const) {
      t.same(c.events(CHANNEL), eu, `${name}: exactly the eu events, in order`);
      t.same(appFrames(c), euFrames, `${name}: each as the very bytes the plain client got (full messages)`);
      t.notOk(c.has((m) => m.includes('pusher:delta"') || m.includes('__delta_seq')), `${name}: no delta and no delta stream numbering`);
      t.equal(c.decoder!.stats.deltas, 0, `${name}: decoded no delta`);
    }
    t.ok(late.has((m) => m.includes('"pusher:delta_compression_enabled"') && m.includes('true')), 'late: its opt-in was accepted (for its next subscriptions)');
  });
}

t.test('a filtered subscription made before the opt-in stays filtered after an unsubscribe and a new plain subscribe', async (t) => {
  const srv = await startServer({ tag_filtering: { enabled: true } });
  t.teardown(() => srv.stop());
  const c = await DeltaClient.open(srv, new core.DeltaDecoder());
  const plain = await DeltaClient.open(srv, null);
  await plain.subscribe(CHANNEL);
  await c.subscribe(CHANNEL, { filter: EU });
  await c.enable();
  c.send('pusher:unsubscribe', { channel: CHANNEL });
  // now unfiltered: the opt-in makes it a delta subscription
  c.texts.length = 0;
  await c.subscribe(CHANNEL);
  const books = new Books(rng(SEED + 1));
  for (let i = 0; i < 20; i++) await publish(srv, 'price', books.update('A'), i % 2 === 0 ? null : 'us');
  await publish(srv, 'end', '{"end":true}', null);
  await c.until(() => c.events(CHANNEL).some((e) => e.includes('"event":"end"')), 'the end marker');
  await plain.until(() => plain.events(CHANNEL).some((e) => e.includes('"event":"end"')), 'the end marker');
  t.same(c.events(CHANNEL), plain.events(CHANNEL), 'every event, untagged and us ones too, byte for byte');
  t.ok(c.decoder!.stats.deltas > 10, `as deltas (${c.decoder!.stats.deltas})`);
});
