// test-modes: once (fallback sessions against their WebSocket twins on one server; sessions across shards: fallback/pusher-js)
// Delta compression and tag filters where the client opts in, over the HTTP fallback
// transports: stock pusher-js in Node forced onto xhr_streaming, then xhr_polling, with the
// shipped client modules (client/delta.js decodes pusher:delta, client/index.js sends a
// subscription's filter), beside WebSocket pusher-js clients set up the same way and a
// plain WebSocket pusher-js that gets every event in full. Each HTTP client must get
// exactly what its WebSocket twin gets: deltas decoded to the full data, and only the
// events its filter matches. Runs with workers 1 and 4 (RINGCAST_TEST_WORKERS).

import { createRequire } from 'node:module';
import path from 'node:path';
import t from 'tap';
import type PusherJS from 'pusher-js';
import { fallbackClient, FALLBACK_TRANSPORTS, transportOf } from '../helpers/fallback';
import { signedPost } from '../helpers/http';
import { connected, pusherJs } from '../helpers/pusher-js';
import { APP, WORKERS, eventually, startServer } from '../helpers/server';
import { Books, rng } from '../delta/clients';

t.setTimeout(240_000);

type ClientModule = typeof import('../../client/index.js');
interface DeltaHandle { stats: { full: number; deltas: number; syncErrors: number }; decoder: { reset(channel: string): void } }
type DeltaModule = { withDeltaCompression(p: PusherJS): Promise<DeltaHandle> };
// The client is ESM (client/package.json) at the checkout's root; this file runs from
// dist/test/fallback/: loaded with Node's require(esm) (Node ≥ 20.19).
const load = createRequire(__filename);
const CLIENT = path.resolve(__dirname, '../../../client');
const { ringcast, Filter } = load(path.join(CLIENT, 'index.js')) as ClientModule;
const { withDeltaCompression } = load(path.join(CLIENT, 'delta.js')) as DeltaModule;

const FILTER = Filter.or(Filter.eq('region', 'eu'), Filter.in('region', ['asia']));
const REGIONS = ['eu', 'us', null, 'asia', 'eu', 'us', null, 'eu', 'asia', 'us'];
const ROUNDS = 30;
// an event without tags matches no filter
const matches = (region: string | null) => region === 'eu' || region === 'asia';

/** What one client got: [channel, event, data] in arrival order. */
type Got = [string, string, unknown][];

interface Setup { pusher: PusherJS; got: Got; delta: DeltaHandle | null; enabled: Promise<void> | null }

/**
 * Subscribes `pusher` to 'ticker' (unless filterOnly) and 'quotes' (with FILTER unless
 * plain), recording 'price', 'quote' and 'end' on each; with `delta`, client/delta.js opts
 * the connection into delta compression first.
 */
async function setUp(pusher: PusherJS, opts: { delta: boolean; filter: boolean; ticker: boolean }): Promise<Setup> {
  const delta = opts.delta ? await withDeltaCompression(pusher) : null;
  // the server's answer to the opt-in (pusher-js gives channel-less events to global binds)
  const enabled = opts.delta ? new Promise<void>((resolve) => pusher.bind('pusher:delta_compression_enabled', () => resolve())) : null;
  const client = ringcast(pusher);
  const got: Got = [];
  const subs = [];
  for (const name of opts.ticker ? ['ticker', 'quotes'] : ['quotes']) {
    const ch = name === 'quotes' && opts.filter ? client.subscribe(name, { filter: FILTER }) : client.subscribe(name);
    for (const e of ['price', 'quote', 'end']) ch.bind(e, (d: unknown) => got.push([name, e, d]));
    subs.push(new Promise<void>((resolve, reject) => {
      ch.bind('pusher:subscription_succeeded', () => resolve());
      ch.bind('pusher:subscription_error', (e: unknown) => reject(new Error(`${name}: subscription_error ${JSON.stringify(e)}`)));
    }));
  }
  await connected(pusher, 15_000);
  await Promise.all(subs);
  return { pusher, got, delta, enabled };
}

const ends = (got: Got) => got.filter((g) => g[1] === 'end').length;

for (const transport of FALLBACK_TRANSPORTS) {
  t.test(`delta and tag filters over ${transport} (workers ${WORKERS}): what a WebSocket client gets`, async (t) => {
    const srv = await startServer({ tag_filtering: { enabled: true }, delta_compression: { enabled: true }, http_fallback: { disconnect_delay: 1 } });
    t.teardown(() => srv.stop());
    const http = () => srv.track(fallbackClient(srv.port, transport));
    const ws = () => srv.track(pusherJs(srv.port));
    const both = { delta: true, filter: true, ticker: true };
    const [plain, wsDelta, httpDelta, wsFilter, httpFilter] = await Promise.all([
      setUp(ws(), { delta: false, filter: false, ticker: true }),
      setUp(ws(), both),
      setUp(http(), both),
      setUp(ws(), { delta: false, filter: true, ticker: false }),
      setUp(http(), { delta: false, filter: true, ticker: false }),
    ]);
    for (const s of [httpDelta, httpFilter]) t.equal(transportOf(s.pusher), transport, `an HTTP client connected with ${transport}`);
    // every opt-in is in force before the first publish (over HTTP the opt-in and the
    // subscribes are separate POSTs, in any order: the server moves earlier subscriptions)
    await Promise.all([wsDelta.enabled, httpDelta.enabled]);

    const books = new Books(rng(11));
    const quotes = new Books(rng(12));
    for (let i = 0; i < ROUNDS; i++) {
      const region = REGIONS[i % REGIONS.length];
      await srv.sdk().trigger('ticker', 'price', books.update('BTC'));
      const r = await signedPost(srv.port, APP, 'events', { name: 'quote', channel: 'quotes', data: JSON.stringify({ i, region, book: JSON.parse(quotes.update('Q')) }), ...(region ? { tags: { region } } : {}) });
      if (r.status !== 200) throw new Error(`publish: ${r.status} ${r.text}`);
    }
    // the positive marker: an event every subscription matches, after all the others
    const r = await signedPost(srv.port, APP, 'batch_events', { batch: ['ticker', 'quotes'].map((channel) => ({ name: 'end', channel, data: '{"end":true}', tags: { region: 'eu' } })) });
    t.equal(r.status, 200, 'the end markers published');
    const clients = { plain, wsDelta, httpDelta, wsFilter, httpFilter };
    const want = { plain: 2, wsDelta: 2, httpDelta: 2, wsFilter: 1, httpFilter: 1 };
    await eventually(() => Object.entries(clients).every(([k, s]) => ends(s.got) === want[k as keyof typeof want]), 60_000, 'every client got its end markers');

    t.equal(plain.got.length, 2 * ROUNDS + 2, 'the plain WebSocket client got every event in full');
    const filtered = plain.got.filter((g) => g[0] === 'ticker' || g[1] === 'end' || matches((g[2] as { region: string | null }).region));
    t.equal(filtered.length - ROUNDS - 1, REGIONS.filter(matches).length * (ROUNDS / REGIONS.length) + 1, 'the quotes the filter matches, and the marker');
    t.same(httpDelta.got, filtered, `${transport} with deltas and the filter: the plain client's data, decoded, only the matching quotes, in order`);
    t.same(httpDelta.got, wsDelta.got, `${transport} with deltas and the filter: exactly what the WebSocket client with both got`);
    const quotesOnly = filtered.filter((g) => g[0] === 'quotes');
    t.same(httpFilter.got, quotesOnly, `${transport} with the filter: only the matching quotes`);
    t.same(httpFilter.got, wsFilter.got, `${transport} with the filter: exactly what the WebSocket client with the filter got`);

    for (const [name, s] of [['WebSocket', wsDelta], [transport, httpDelta]] as const) {
      const { deltas, syncErrors } = s.delta!.stats;
      // ticker alone has ROUNDS messages, one full every full_message_interval (10): more
      // deltas than that means the filtered quotes came as deltas too (rule 8's filter group)
      t.ok(deltas > ROUNDS, `${name}: deltas on both channels (${deltas} decoded)`);
      t.equal(syncErrors, 0, `${name}: no delta sync error`);
    }
    t.equal(httpDelta.delta!.stats.deltas, wsDelta.delta!.stats.deltas, 'the HTTP client took as many deltas as its WebSocket twin');
  });

  t.test(`a delta that cannot be applied over ${transport} (workers ${WORKERS}): the sync error goes through xhr_send, the stream restarts in full`, async (t) => {
    const srv = await startServer({ delta_compression: { enabled: true }, http_fallback: { disconnect_delay: 1 } });
    t.teardown(() => srv.stop());
    const [plain, httpDelta] = await Promise.all([
      setUp(srv.track(pusherJs(srv.port)), { delta: false, filter: false, ticker: true }),
      setUp(srv.track(fallbackClient(srv.port, transport)), { delta: true, filter: false, ticker: true }),
    ]);
    await httpDelta.enabled;
    const sdk = srv.sdk();
    const books = new Books(rng(21));
    const ticker = (s: Setup) => s.got.filter((g) => g[0] === 'ticker');
    for (let i = 0; i < 5; i++) await sdk.trigger('ticker', 'price', books.update('BTC'));
    await eventually(() => ticker(httpDelta).length === 5 && ticker(plain).length === 5, 30_000, 'the first 5 events');
    const stats = httpDelta.delta!.stats;
    t.same([stats.full, stats.deltas, stats.syncErrors], [1, 4, 0], 'one full message, then deltas');
    // lost bases: the next delta (the 6th message; a full one comes every 10) fails
    httpDelta.delta!.decoder.reset('ticker');
    await sdk.trigger('ticker', 'price', books.update('BTC'));
    await eventually(() => stats.syncErrors >= 1, 30_000, 'the sync error');
    // until the server has read pusher:delta_sync_error, its deltas fail too; then a full one
    await eventually(async () => {
      await sdk.trigger('ticker', 'price', books.update('BTC'));
      await eventually(() => ticker(plain).length === ticker(httpDelta).length + stats.syncErrors, 30_000, 'the event at both clients');
      return ticker(httpDelta).length > 5;
    }, 60_000, 'a ticker event after the sync error');
    for (let i = 0; i < 3; i++) await sdk.trigger('ticker', 'price', books.update('BTC'));
    await sdk.trigger('ticker', 'end', '{"end":true}');
    await eventually(() => ends(httpDelta.got) === 1 && ends(plain.got) === 1, 30_000, 'the end marker at both clients');
    const lost = stats.syncErrors;
    const all = plain.got;
    t.same(httpDelta.got, [...all.slice(0, 5), ...all.slice(5 + lost)], `only the ${lost} event(s) sent before the server read the sync error are missing; the rest is the plain client's data, in order`);
    t.ok(stats.full >= 2, `the server restarted the stream with a full message (${stats.full} full)`);
    t.ok(stats.deltas >= 4 + 3, `and deltas again after it (${stats.deltas})`);
  });
}
