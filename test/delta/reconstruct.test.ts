// test-modes: once (conflation and reconstruction are the sequencer's, one thread whatever the shard count; delta across shards: delta/client)
// Byte-exact reconstruction: for random streams, every delta client reconstructs exactly
// the envelopes a plain client receives (both algorithms, interleaved events, conflation
// keys, tags with enable_tags, late joiners, sync errors), through a real server
// (RINGCAST_TEST_WORKERS shards).

import t, { type Test } from 'tap';
import { signedPost } from '../helpers/http';
import { APP, startServer, type TestServer } from '../helpers/server';
import { Books, core, DeltaClient, rng } from './clients';

const SEED = Number(process.env.DELTA_SEED ?? Date.now() % 100_000);

async function decoders(): Promise<{ fossil: () => InstanceType<typeof core.DeltaDecoder>; xdelta3: () => Promise<InstanceType<typeof core.DeltaDecoder>> }> {
  return {
    fossil: () => new core.DeltaDecoder(),
    xdelta3: () => core.createDeltaDecoder({ xdelta3: true }),
  };
}

/** Publishes `n` events (random names among `events`, symbols among `symbols`) one after the other. */
async function publishStream(srv: TestServer, channel: string, n: number, seed: number, opts: { events: string[]; symbols: string[]; tags?: boolean; onEach?: (i: number) => Promise<void> }): Promise<void> {
  const rand = rng(seed);
  const books = new Books(rand);
  const sdk = srv.sdk();
  for (let i = 0; i < n; i++) {
    const event = opts.events[Math.floor(rand() * opts.events.length)];
    const sym = opts.symbols[Math.floor(rand() * opts.symbols.length)];
    if (opts.tags) {
      // the SDK has no tags: a signed POST /events; one event in five untagged
      const x = rand();
      const tags = x < 0.2 ? undefined : { sym, side: x < 0.6 ? 'bid' : 'ask', lvl: String(Math.floor(rand() * 10)) };
      const r = await signedPost(srv.port, APP, 'events', { name: event, channel, data: books.update(sym), ...(tags ? { tags } : {}) });
      if (r.status !== 200) throw new Error(`publish: ${r.status} ${r.text}`);
    } else {
      await sdk.trigger(channel, event, books.update(sym));
    }
    await opts.onEach?.(i);
  }
  await sdk.trigger(channel, 'end', JSON.stringify({ end: true }));
}

/** What a client that lost its bases got: a subsequence of the plain stream, missing only what it could not decode. */
function brokenSubsequence(t: Test, c: DeltaClient, channel: string, want: string[], breaks: number): void {
  const got = c.events(channel);
  // the publisher was held around each break (breaker): one delta lost per break
  const lost = c.decoder!.stats.syncErrors;
  t.equal(lost, breaks, `one sync error per break (${breaks})`);
  t.equal(got.length, want.length - lost, 'only the undecodable deltas are missing');
  let j = 0;
  for (const e of got) {
    while (j < want.length && want[j] !== e) j++;
    j++;
  }
  t.ok(j <= want.length, 'what the broken client got is a subsequence of the plain stream, byte for byte');
}

/**
 * Makes `c` lose its bases of `channel` before its next delta (that delta cannot be applied:
 * pusher:delta_sync_error). The publisher is held around a break so that it costs exactly
 * the one delta, whatever the machine's load: `arm` waits until the client has everything
 * published so far, and `settle`, called after each publish, until the client hit the break
 * (or has everything, when the publish came full), then until the server handled its sync
 * error (a ping answered after it on the same socket).
 */
function breaker(c: DeltaClient, channel: string) {
  let armed = false;
  let hit = false;
  /** Every message published so far reached the client: decoded, full, or lost to a break. */
  const caughtUp = (published: number) => c.events(channel).length + c.decoder!.stats.syncErrors >= published;
  const state = {
    breaks: 0,
    async arm(published: number): Promise<void> {
      await c.until(() => caughtUp(published), 'the client to catch up before a break');
      armed = true;
      c.beforeDelta = () => {
        c.decoder!.reset(channel);
        c.beforeDelta = null;
        state.breaks++;
        hit = true;
      };
    },
    async settle(published: number): Promise<void> {
      if (!armed) return;
      await c.until(() => hit || caughtUp(published), 'the break, or the message that came full');
      if (!hit) return; // it came full: the break waits for the next delta
      const pongs = () => c.texts.filter((m) => m.includes('"pusher:pong"')).length;
      const before = pongs();
      c.send('pusher:ping', {});
      await c.until(() => pongs() > before, 'pong after the sync error');
      armed = hit = false;
    },
  };
  return state;
}

/**
 * A late joiner gets the stream from its subscription on, byte for byte. Delta subscribers
 * get their messages one hop later than plain ones (through the sequencer), so messages
 * published just before the subscription may reach it as well (how many depends on the
 * sequencer's lag under load): it must have everything from its subscription on.
 */
function lateSuffix(t: Test, got: string[], want: string[], from: number): void {
  const start = want.length - got.length;
  const seqs = (l: string[]) => l.map((e) => /seq\\+":(\d+)/.exec(e)?.[1] ?? 'x').join(',');
  if (process.env.DELTA_DEBUG) t.comment(`got ${seqs(got)}\nwant ${seqs(want)}`);
  t.ok(start <= from, `late joiner: starts at message ${start}, subscribed before message ${from}`);
  t.same(got, want.slice(start), 'late joiner: identical envelopes from its first message on');
}

function ended(c: DeltaClient, channel: string): Promise<void> {
  return c.until(() => c.events(channel).some((e) => e.includes('"event":"end"')), `end on ${channel}`);
}

t.test(`no conflation key: fossil and xdelta3 clients, a late joiner, sync errors and a plain client agree byte for byte (seed ${SEED})`, async (t) => {
  // through the piscina pool (the conflation test below computes on the sequencer thread)
  const srv = await startServer({ delta_compression: { pool_size: 1 } });
  t.teardown(() => srv.stop());
  const dec = await decoders();
  const channel = 'ticker';
  const plain = await DeltaClient.open(srv, null);
  const fossil = await DeltaClient.open(srv, dec.fossil());
  const xdelta = await DeltaClient.open(srv, await dec.xdelta3());
  const late = await DeltaClient.open(srv, dec.fossil());
  const broken = await DeltaClient.open(srv, await dec.xdelta3());
  await plain.subscribe(channel);
  await fossil.enable();
  await fossil.subscribe(channel);
  await xdelta.subscribe(channel, { delta: 'xdelta3' });
  await broken.subscribe(channel, { delta: 'xdelta3' });
  let lateFrom = -1;
  const brk = breaker(broken, channel);
  await publishStream(srv, channel, 60, SEED, {
    events: ['price', 'book', 'trade'], symbols: ['A'],
    onEach: async (i) => {
      // the xdelta3 client loses its bases: its next delta fails → pusher:delta_sync_error
      if (i === 15 || i === 40) await brk.arm(i + 1);
      else await brk.settle(i + 1);
      if (i !== 25) return;
      await late.subscribe(channel, { delta: { enabled: true, algorithm: 'fossil' } });
      lateFrom = i + 1;
    },
  });
  await Promise.all([plain, fossil, xdelta, late, broken].map((c) => ended(c, channel)));
  const want = plain.events(channel);
  t.equal(want.length, 61, 'the plain client got every event');
  t.same(fossil.events(channel), want, 'fossil client: identical envelopes');
  t.same(xdelta.events(channel), want, 'xdelta3 client: identical envelopes');
  lateSuffix(t, late.events(channel), want, lateFrom);
  for (const [name, c] of [['fossil', fossil], ['xdelta3', xdelta], ['late', late]] as const) {
    t.ok(c.decoder!.stats.deltas > 20, `${name}: most messages came as deltas (${c.decoder!.stats.deltas})`);
    t.equal(c.decoder!.stats.syncErrors, 0, `${name}: no sync error`);
  }
  t.ok(fossil.has((x) => x.includes('"algorithm":"fossil"')), 'fossil deltas name their algorithm');
  t.ok(xdelta.has((x) => x.includes('"algorithm":"xdelta3"')), 'xdelta3 deltas name their algorithm');
  brokenSubsequence(t, broken, channel, want, brk.breaks);
  t.ok(broken.decoder!.stats.deltas > 15, 'the xdelta3 client that lost its bases went back to deltas');
  t.ok(!plain.has((x) => x.includes('pusher:delta') || x.includes('__delta_seq')), 'the plain client saw no delta traffic');
  t.ok(fossil.bytes < plain.bytes * 0.5, `fossil bytes ${fossil.bytes} < half of plain ${plain.bytes}`);
});

t.test(`conflation key: cache sync lets a late joiner decode at once; sync errors recover (seed ${SEED})`, async (t) => {
  const srv = await startServer({
    apps: [{ id: 'app-id', key: 'app-key', secret: 'app-secret', channel_delta_compression: { 'book-*': { enabled: true, algorithm: null, conflation_key: 'sym', max_messages_per_key: 3, max_conflation_keys: 10, enable_tags: false } } }],
  });
  t.teardown(() => srv.stop());
  const dec = await decoders();
  const channel = 'book-eu';
  const plain = await DeltaClient.open(srv, null);
  const a = await DeltaClient.open(srv, dec.fossil());
  const x = await DeltaClient.open(srv, await dec.xdelta3());
  const late = await DeltaClient.open(srv, dec.fossil());
  const broken = await DeltaClient.open(srv, dec.fossil());
  await plain.subscribe(channel);
  await a.enable();
  await a.subscribe(channel);
  await x.subscribe(channel, { delta: 'xdelta3' });
  await broken.enable();
  await broken.subscribe(channel);
  let lateFrom = -1;
  const brk = breaker(broken, channel);
  await publishStream(srv, channel, 80, SEED + 1, {
    events: ['price', 'book'], symbols: ['EURUSD', 'GBPUSD', 'USDJPY', 'EURGBP'],
    onEach: async (i) => {
      if (i === 40) {
        await late.enable();
        await late.subscribe(channel);
        await late.until(() => late.has((m) => m.includes('delta_cache_sync')), 'delta_cache_sync');
        lateFrom = i + 1;
      }
      // the client loses its bases: its next delta cannot be applied → pusher:delta_sync_error
      if (i === 20 || i === 50) await brk.arm(i + 1);
      else await brk.settle(i + 1);
    },
  });
  await Promise.all([plain, a, x, late, broken].map((c) => ended(c, channel)));
  const want = plain.events(channel);
  t.same(a.events(channel), want, 'fossil client: identical envelopes');
  t.same(x.events(channel), want, 'xdelta3 client: identical envelopes');
  lateSuffix(t, late.events(channel), want, lateFrom);
  t.equal(late.decoder!.stats.syncErrors, 0, 'late joiner: decoded every delta from the cache sync on');
  const sync = JSON.parse((JSON.parse(late.texts.find((m) => m.includes('delta_cache_sync'))!) as { data: string }).data) as { conflation_key: string; states: Record<string, { content: string; seq: number }[]> };
  t.equal(sync.conflation_key, 'sym', 'cache sync names the conflation key');
  t.ok(Object.keys(sync.states).length >= 3, 'cache sync holds the groups');
  t.ok(Object.values(sync.states).every((l) => l.length <= 2), 'the latest message of each stream of a group (2 events)');
  t.ok(a.has((m) => m.includes('"__conflation_key":"EURUSD"')), 'full messages carry __conflation_key');
  t.ok(a.has((m) => m.includes('"conflation_key":"GBPUSD"')), 'deltas carry conflation_key');
  // the broken client lost exactly the deltas it could not apply, and decoded the rest exactly
  brokenSubsequence(t, broken, channel, want, brk.breaks);
  t.ok(broken.decoder!.stats.deltas > 30, 'and it went back to deltas');
});

t.test(`tags (enable_tags): tagged and untagged events, a conflation key and a late joiner, both algorithms (seed ${SEED})`, async (t) => {
  const srv = await startServer({
    tag_filtering: { enabled: true },
    apps: [{ ...APP, channel_delta_compression: { 'fx-*': { enabled: true, algorithm: null, conflation_key: 'sym', max_messages_per_key: 5, max_conflation_keys: 10, enable_tags: true } } }],
  });
  t.teardown(() => srv.stop());
  const dec = await decoders();
  const channel = 'fx-live';
  const plain = await DeltaClient.open(srv, null);
  const a = await DeltaClient.open(srv, dec.fossil());
  const x = await DeltaClient.open(srv, await dec.xdelta3());
  const late = await DeltaClient.open(srv, await dec.xdelta3());
  await plain.subscribe(channel);
  await a.enable();
  await a.subscribe(channel);
  await x.subscribe(channel, { delta: 'xdelta3' });
  let lateFrom = -1;
  await publishStream(srv, channel, 70, SEED + 2, {
    events: ['price', 'book', 'trade'], symbols: ['EURUSD', 'GBPUSD', 'USDJPY'], tags: true,
    onEach: async (i) => {
      if (i !== 30) return;
      await late.subscribe(channel, { delta: 'xdelta3' });
      await late.until(() => late.has((m) => m.includes('delta_cache_sync')), 'delta_cache_sync');
      lateFrom = i + 1;
    },
  });
  await Promise.all([plain, a, x, late].map((c) => ended(c, channel)));
  const want = plain.events(channel);
  t.equal(want.length, 71, 'the plain client got every event');
  const tagged = want.filter((e) => e.includes('"tags":{'));
  t.ok(tagged.length > 35 && tagged.length < 70, `enable_tags: ${tagged.length} events carry their tags, the untagged ones none`);
  t.ok(tagged.every((e) => /"tags":\{"lvl":"\d","side":"(bid|ask)","sym":"[A-Z]{6}"\}\}$/.test(e)), 'sorted tags, last field of the envelope');
  t.same(a.events(channel), want, 'fossil client: identical envelopes, tags included');
  t.same(x.events(channel), want, 'xdelta3 client: identical envelopes, tags included');
  lateSuffix(t, late.events(channel), want, lateFrom);
  for (const [name, c] of [['fossil', a], ['xdelta3', x], ['late', late]] as const) {
    t.ok(c.decoder!.stats.deltas > 15, `${name}: deltas (${c.decoder!.stats.deltas})`);
    t.equal(c.decoder!.stats.syncErrors, 0, `${name}: no sync error`);
  }
});
