// Tag filters and delta compression on the same channel (spec "Message delivery order":
// filter, then delta; delta/shard.ts rule 8, delta/sequencer.ts rule 4): a tag-filtered
// delta subscription gets deltas computed against the messages IT received, whatever
// the other subscribers' filters. Clients decode with the shipped decoder
// (client/delta-core.js), which refuses a delta whose base_index is not the seq of the
// last message it holds of that stream; each one's result is compared byte for byte
// with what a plain client received, filtered. Through a real server
// (RINGCAST_TEST_WORKERS shards):
//   plain     no delta, no filter             every event, in full (the reference)
//   delta     delta, no filter                every event
//   euA, euB  delta, filter region = eu       the eu events (one filter: one stream)
//   notUs     delta, filter not region = us   the tagged events but the us ones
//   late      filter region = eu, then opt-in the eu events, as deltas too
//   euPlain   filter region = eu, no delta    the eu events as the plain bytes
// Tagged (eu / us / apac) and untagged publishes are mixed; the last event (eu) is the
// end marker, so "got nothing else" is checked once it got that positive marker.

import t from 'tap';
import type { ChannelDeltaSetting } from '../../src/config/types';
import { signedPost } from '../helpers/http';
import { APP, startServer, type TestServer } from '../helpers/server';
import { Books, core, DeltaClient, rng } from './clients';

const SEED = Number(process.env.DELTA_SEED ?? Date.now() % 100_000);
const CHANNEL = 'quotes';
const EU = { key: 'region', cmp: 'eq', val: 'eu' };
const NOT_US = { op: 'not', nodes: [{ key: 'region', cmp: 'eq', val: 'us' }] };

type Region = 'eu' | 'us' | 'apac' | null;
const isEu = (r: Region) => r === 'eu';
const notUs = (r: Region) => r !== null && r !== 'us';

/** The data of an update: the order book with the region in front (the cache sync test reads it back). */
function update(books: Books, sym: string, region: Region): string {
  return books.update(sym).replace('{', '{"r":' + JSON.stringify(region) + ',');
}

async function publish(srv: TestServer, channel: string, name: string, data: string, region: Region): Promise<void> {
  const r = await signedPost(srv.port, APP, 'events', { name, channel, data, ...(region ? { tags: { region } } : {}) });
  if (r.status !== 200) throw new Error(`publish ${name}: ${r.status} ${r.text}`);
}

/** The raw text frames of the channel's application events (no pusher: / pusher_internal:). */
function appFrames(c: DeltaClient, channel: string): string[] {
  return c.texts.filter((x) => x.includes(`"channel":"${channel}"`) && !x.startsWith('{"event":"pusher'));
}

const ended = (c: DeltaClient, channel: string) => c.until(() => c.events(channel).some((e) => e.includes('"event":"end"')), 'the end marker');

for (const algo of ['fossil', 'xdelta3'] as const) {
  t.test(`${algo}: each filtered delta subscriber decodes every delta against what it received (seed ${SEED})`, async (t) => {
    const srv = await startServer({ tag_filtering: { enabled: true }, delta_compression: { algorithm: algo === 'fossil' ? 'Fossil' : 'Xdelta3' } });
    t.teardown(() => srv.stop());
    const decoder = async () => (algo === 'fossil' ? new core.DeltaDecoder() : await core.createDeltaDecoder({ xdelta3: true }));
    const plain = await DeltaClient.open(srv, null);
    const delta = await DeltaClient.open(srv, await decoder());
    const euA = await DeltaClient.open(srv, await decoder());
    const euB = await DeltaClient.open(srv, await decoder());
    const notUsC = await DeltaClient.open(srv, await decoder());
    const late = await DeltaClient.open(srv, await decoder());
    const euPlain = await DeltaClient.open(srv, await decoder());
    await plain.subscribe(CHANNEL);
    await delta.enable();
    await delta.subscribe(CHANNEL);
    for (const c of [euA, euB]) {
      await c.enable();
      await c.subscribe(CHANNEL, { filter: EU });
    }
    await notUsC.enable();
    await notUsC.subscribe(CHANNEL, { filter: NOT_US });
    // subscribed before the opt-in (what pusher-js does: it subscribes on connect)
    await late.subscribe(CHANNEL, { filter: EU });
    await late.enable();
    await euPlain.subscribe(CHANNEL, { filter: EU });

    const rand = rng(SEED);
    const books = new Books(rand);
    const regions: Region[] = [];
    const N = 80;
    for (let i = 0; i < N; i++) {
      const x = rand();
      const region: Region = x < 0.4 ? 'eu' : x < 0.7 ? 'us' : x < 0.85 ? 'apac' : null;
      regions.push(region);
      await publish(srv, CHANNEL, i % 3 === 0 ? 'book' : 'price', update(books, 'A', region), region);
    }
    regions.push('eu');
    await publish(srv, CHANNEL, 'end', '{"end":true}', 'eu');
    await Promise.all([plain, delta, euA, euB, notUsC, late, euPlain].map((c) => ended(c, CHANNEL)));

    const want = plain.events(CHANNEL);
    t.equal(want.length, N + 1, 'the plain client got every event');
    t.same(delta.events(CHANNEL), want, 'the unfiltered delta client reconstructs every event');
    t.ok(delta.decoder!.stats.deltas > N / 3, `it got deltas (${delta.decoder!.stats.deltas} of ${N + 1})`);
    t.equal(delta.decoder!.stats.syncErrors, 0, 'no sync error');

    const eu = want.filter((_, i) => isEu(regions[i]));
    const nu = want.filter((_, i) => notUs(regions[i]));
    t.ok(eu.length > 10 && eu.length < nu.length && nu.length < N, `${eu.length} eu events, ${nu.length} not-us ones`);
    for (const [name, c, mine] of [['euA', euA, eu], ['euB', euB, eu], ['notUs', notUsC, nu], ['late', late, eu]] as const) {
      t.same(c.events(CHANNEL), mine, `${name}: exactly its filter's events, in order, each reconstructed byte for byte`);
      t.equal(c.decoder!.stats.syncErrors, 0, `${name}: every delta's base is a message it received (no sync error)`);
      // full: the first of each stream (book, price, end) and one in every 11 (full_message_interval 10)
      const fulls = 3 + Math.ceil(mine.length / 11);
      t.ok(c.decoder!.stats.deltas >= mine.length - fulls, `${name}: got deltas (${c.decoder!.stats.deltas} of ${mine.length})`);
    }
    // the filter's own numbering: seq counts the eu messages only
    const seqs = euA.texts.filter((x) => x.startsWith('{"event":"pusher:delta"'))
      .map((x) => (JSON.parse(x) as { data: { event: string; seq: number } }).data).filter((d) => d.event === 'price').map((d) => d.seq);
    const euPrices = regions.filter((r, i) => isEu(r) && i % 3 !== 0 && i < N).length;
    t.ok(seqs.length > 0 && Math.max(...seqs) < euPrices, `euA's price stream is numbered over the eu prices only (max seq ${Math.max(...seqs)} < ${euPrices})`);

    t.same(euPlain.events(CHANNEL), eu, 'euPlain (no delta): exactly the eu events');
    t.same(appFrames(euPlain, CHANNEL), appFrames(plain, CHANNEL).filter((_, i) => isEu(regions[i])), 'euPlain: each as the very bytes the plain client got');
    t.notOk(euPlain.has((m) => m.includes('pusher:delta"') || m.includes('__delta_seq')), 'euPlain: no delta and no delta stream numbering');
  });
}

const keyed: ChannelDeltaSetting = { enabled: true, algorithm: null, conflation_key: 'sym', max_messages_per_key: 4, max_conflation_keys: 20, enable_tags: false };

t.test(`conflation key: a late filtered subscriber gets its filter's cache sync and deltas per symbol (seed ${SEED})`, async (t) => {
  const srv = await startServer({ tag_filtering: { enabled: true }, apps: [{ ...APP, channel_delta_compression: { 'keyed-*': keyed } }] });
  t.teardown(() => srv.stop());
  const ch = 'keyed-fx';
  const plain = await DeltaClient.open(srv, null);
  const delta = await DeltaClient.open(srv, new core.DeltaDecoder());
  const early = await DeltaClient.open(srv, new core.DeltaDecoder());
  await plain.subscribe(ch);
  await delta.subscribe(ch, { delta: 'fossil' });
  await early.subscribe(ch, { delta: 'fossil', filter: EU });
  const rand = rng(SEED + 2);
  const books = new Books(rand);
  const regions: Region[] = [];
  const syms = ['EURUSD', 'GBPUSD', 'USDJPY'];
  const round = async (n: number) => {
    for (let i = 0; i < n; i++) {
      const region: Region = rand() < 0.5 ? 'eu' : 'us';
      regions.push(region);
      await publish(srv, ch, 'price', update(books, syms[i % syms.length], region), region);
    }
  };
  await round(30);
  // every frame of those has left the sequencer (the unfiltered delta client got them)
  await delta.until(() => delta.events(ch).length === 30, 'the first 30 events');
  const lateC = await DeltaClient.open(srv, new core.DeltaDecoder());
  await lateC.subscribe(ch, { delta: 'fossil', filter: EU });
  await lateC.until(() => lateC.has((m) => m.includes('delta_cache_sync')), 'delta_cache_sync');
  const sync = JSON.parse((JSON.parse(lateC.texts.find((m) => m.includes('delta_cache_sync'))!) as { data: string }).data) as { conflation_key: string; states: Record<string, { content: string; seq: number }[]> };
  t.equal(sync.conflation_key, 'sym', 'the cache sync names the conflation key');
  const contents = Object.values(sync.states).flat().map((s) => JSON.parse((JSON.parse(s.content) as { data: string }).data) as { r: string });
  t.ok(contents.length > 0 && contents.every((d) => d.r === 'eu'), `its states are eu messages only (${contents.length})`);
  await round(30);
  regions.push('eu');
  await publish(srv, ch, 'end', '{"sym":"EURUSD","end":true}', 'eu');
  await Promise.all([plain, delta, early, lateC].map((c) => ended(c, ch)));

  const want = plain.events(ch);
  t.equal(want.length, 61, 'the plain client got every event');
  t.same(delta.events(ch), want, 'the unfiltered delta client reconstructs every event');
  const eu = want.filter((_, i) => isEu(regions[i]));
  t.same(early.events(ch), eu, 'early: exactly the eu events, reconstructed');
  t.same(lateC.events(ch), eu.slice(want.slice(0, 30).filter((_, i) => isEu(regions[i])).length), 'late: the eu events from its subscription on');
  for (const [name, c] of [['early', early], ['late', lateC]] as const) {
    t.equal(c.decoder!.stats.syncErrors, 0, `${name}: no sync error`);
    t.ok(c.has((m) => m.includes('"conflation_key":"GBPUSD"') && m.includes('pusher:delta')), `${name}: deltas carry their conflation key`);
  }
  const lateFirst = lateC.texts.find((m) => m.includes(`"channel":"${ch}"`) && !m.startsWith('{"event":"pusher_internal') && !m.includes('delta_cache_sync'));
  t.ok(lateFirst?.startsWith('{"event":"pusher:delta"'), 'late: its first message is already a delta (against the cache sync)');
});

t.test(`a filtered delta subscriber that reports pusher:delta_sync_error restarts in full (seed ${SEED})`, async (t) => {
  const srv = await startServer({ tag_filtering: { enabled: true }, delta_compression: { enabled: true } });
  t.teardown(() => srv.stop());
  const plain = await DeltaClient.open(srv, null);
  const c = await DeltaClient.open(srv, new core.DeltaDecoder());
  const other = await DeltaClient.open(srv, new core.DeltaDecoder());
  await plain.subscribe(CHANNEL);
  for (const x of [c, other]) await x.subscribe(CHANNEL, { delta: 'fossil', filter: EU });
  const books = new Books(rng(SEED + 3));
  let sent = 0;
  let lost = -1;
  // lock step: each eu publish reaches both clients (decoded, or lost to the break) before the next
  const step = async (region: Region) => {
    await publish(srv, CHANNEL, 'price', update(books, 'A', region), region);
    sent += region === 'eu' ? 1 : 0;
    for (const x of [c, other]) await x.until(() => x.events(CHANNEL).length + x.decoder!.stats.syncErrors >= sent, 'the message');
  };
  for (let i = 0; i < 12; i++) await step(i % 3 === 2 ? 'us' : 'eu');
  c.beforeDelta = () => {
    lost = c.events(CHANNEL).length;
    c.decoder!.reset(CHANNEL);
    c.beforeDelta = null;
  };
  await step('eu');
  t.equal(c.decoder!.stats.syncErrors, 1, 'the broken client reported the sync error');
  // the server handled it before the next publish: a ping answered after it on the same socket
  const pongs = () => c.texts.filter((m) => m.includes('"pusher:pong"')).length;
  const before = pongs();
  c.send('pusher:ping', {});
  await c.until(() => pongs() > before, 'the pong after the sync error');
  for (let i = 0; i < 12; i++) await step(i % 3 === 2 ? 'us' : 'eu');
  await publish(srv, CHANNEL, 'end', '{"end":true}', 'eu');
  await Promise.all([plain, c, other].map((x) => ended(x, CHANNEL)));
  const eu = plain.events(CHANNEL).filter((e) => e.includes('\\"r\\":\\"eu\\"') || e.includes('"event":"end"'));
  t.same(other.events(CHANNEL), eu, 'the other subscriber of the same filter is not disturbed');
  t.equal(other.decoder!.stats.syncErrors, 0);
  t.same(c.events(CHANNEL), eu.filter((_, i) => i !== lost), 'the broken one lost only the delta it could not decode');
  t.equal(c.decoder!.stats.syncErrors, 1, 'and had no further sync error');
  const frames = appFrames(c, CHANNEL).concat(c.texts.filter((m) => m.startsWith('{"event":"pusher:delta"')));
  const ordered = c.texts.filter((m) => frames.includes(m));
  t.ok(ordered[lost + 1]?.includes('"__delta_seq":'), 'its next message came full');
  t.ok(ordered.slice(lost + 2).some((m) => m.startsWith('{"event":"pusher:delta"')), 'then deltas again');
  t.ok(c.decoder!.stats.deltas > 10, `deltas (${c.decoder!.stats.deltas})`);
});

t.test('a filtered subscription made before the opt-in stays filtered after an unsubscribe and a new plain subscribe', async (t) => {
  const srv = await startServer({ tag_filtering: { enabled: true }, delta_compression: { enabled: true } });
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
  for (let i = 0; i < 20; i++) await publish(srv, CHANNEL, 'price', books.update('A'), i % 2 === 0 ? null : 'us');
  await publish(srv, CHANNEL, 'end', '{"end":true}', null);
  await c.until(() => c.events(CHANNEL).some((e) => e.includes('"event":"end"')), 'the end marker');
  await plain.until(() => plain.events(CHANNEL).some((e) => e.includes('"event":"end"')), 'the end marker');
  t.same(c.events(CHANNEL), plain.events(CHANNEL), 'every event, untagged and us ones too, byte for byte');
  t.ok(c.decoder!.stats.deltas > 10, `as deltas (${c.decoder!.stats.deltas})`);
});
