// test-modes: once (the browser side of the delta client; delta across shards: delta/client)
// client/ in headless Chromium (Debian `chromium`, driven by playwright-core) against a
// real server: pusher-js's browser build, the client modules as shipped (ES modules,
// `fossil-delta` resolved by an import map).
//  - delta.js: Fossil deltas decoded in the page; channel.bind() gets exactly the data a
//    plain pusher-js in Node gets.
//  - index.js + filter.js: a subscription with a tag filter gets only the matching events
//    (a plain pusher-js in Node gets them all), beside a delta subscription on the same
//    pusher-js instance.

import path from 'node:path';
import t, { type Test } from 'tap';
import { PUSHER_JS_WEB, ROOT, launchChromium, serveSite } from '../helpers/browser';
import { connected, pusherJs } from '../helpers/pusher-js';
import { signedPost } from '../helpers/http';
import { APP, startServer } from '../helpers/server';
import { Books, rng } from './clients';

const js = (file: string) => ({ file, type: 'text/javascript' });
const PAGE = `<!doctype html><html><head>
<script type="importmap">{"imports":{"fossil-delta":"/fossil-delta.js"}}</script>
<script src="/pusher.js"></script></head><body></body></html>`;

const serve = (t: Test): Promise<string> => serveSite(t, {
  '/': { text: PAGE, type: 'text/html' },
  '/pusher.js': js(PUSHER_JS_WEB),
  '/fossil-delta.js': js(path.join(ROOT, 'node_modules/fossil-delta/fossil-delta.js')),
  ...Object.fromEntries(['delta', 'delta-core', 'index', 'filter', 'recovery'].map((m) => [`/client/${m}.js`, js(path.join(ROOT, `client/${m}.js`))])),
});

// scripts/deps.sh (make test) installs Debian's chromium: without it launchChromium fails naming it, never a skip
t.test('client/delta.js in Chromium decodes Fossil deltas for channel.bind()', async (t) => {
  const srv = await startServer({ delta_compression: { enabled: true } });
  t.teardown(() => srv.stop());
  const browser = await launchChromium(t);
  const page = await browser.newPage();
  await page.goto(await serve(t));
  // a string, not a function: the test's TypeScript output would rewrite the import()
  await page.evaluate(`(async () => {
    const { withDeltaCompression } = await import('/client/delta.js');
    const p = new Pusher('app-key', { cluster: 'mt1', wsHost: '127.0.0.1', wsPort: ${srv.port}, forceTLS: false, enabledTransports: ['ws'], disableStats: true });
    const h = await withDeltaCompression(p);
    window.got = [];
    window.stats = h.stats;
    const ch = p.subscribe('ticker');
    ch.bind('price', (d) => window.got.push(d));
    await new Promise((r) => ch.bind('pusher:subscription_succeeded', () => r()));
  })()`);
  const plain = srv.track(pusherJs(srv.port));
  await connected(plain);
  const want: unknown[] = [];
  const pc = plain.subscribe('ticker');
  pc.bind('price', (d: unknown) => want.push(d));
  await new Promise<void>((r) => pc.bind('pusher:subscription_succeeded', () => r()));
  const sdk = srv.sdk();
  const books = new Books(rng(5));
  for (let i = 0; i < 25; i++) await sdk.trigger('ticker', 'price', books.update('A'));
  await page.waitForFunction('window.got.length >= 25', undefined, { timeout: 20_000 });
  for (let i = 0; i < 200 && want.length < 25; i++) await new Promise((r) => setTimeout(r, 50));
  const got = await page.evaluate('window.got') as unknown[];
  const stats = await page.evaluate('window.stats') as { deltas: number; syncErrors: number };
  t.same(got, want, 'the page got the same 25 events as a plain pusher-js');
  t.ok(stats.deltas >= 20 && stats.syncErrors === 0, `decoded in the page: ${stats.deltas} deltas, ${stats.syncErrors} sync errors`);
});

t.test('client/index.js in Chromium: a tag-filtered subscription gets only the matching events', async (t) => {
  const srv = await startServer({ tag_filtering: { enabled: true }, delta_compression: { enabled: true } });
  t.teardown(() => srv.stop());
  const browser = await launchChromium(t);
  const page = await browser.newPage();
  await page.goto(await serve(t));
  // one pusher-js instance with both extensions: 'quotes' filtered (full messages, spec
  // "Tag filtering"), 'ticker' unfiltered with deltas
  await page.evaluate(`(async () => {
    const { ringcast, Filter } = await import('/client/index.js');
    const { withDeltaCompression } = await import('/client/delta.js');
    const p = new Pusher('app-key', { cluster: 'mt1', wsHost: '127.0.0.1', wsPort: ${srv.port}, forceTLS: false, enabledTransports: ['ws'], disableStats: true });
    const h = await withDeltaCompression(p);
    const client = ringcast(p);
    window.quotes = [];
    window.ticker = [];
    window.stats = h.stats;
    const ok = (ch) => new Promise((resolve, reject) => {
      ch.bind('pusher:subscription_succeeded', () => resolve());
      ch.bind('pusher:subscription_error', (e) => reject(new Error(JSON.stringify(e))));
    });
    const q = client.subscribe('quotes', { filter: Filter.or(Filter.eq('region', 'eu'), Filter.in('region', ['asia'])) });
    for (const e of ['quote', 'end']) q.bind(e, (d) => window.quotes.push([e, d]));
    const tk = client.subscribe('ticker');
    tk.bind('price', (d) => window.ticker.push(d));
    await Promise.all([ok(q), ok(tk)]);
    window.bad = await new Promise((resolve) => client.subscribe('other', { filter: { key: 'region', cmp: 'regex', val: '.*' } }).bind('pusher:subscription_error', resolve));
  })()`);
  const plain = srv.track(pusherJs(srv.port));
  await connected(plain);
  const all: unknown[] = [];
  const pc = plain.subscribe('quotes');
  for (const e of ['quote', 'end']) pc.bind(e, (d: unknown) => all.push([e, d]));
  await new Promise<void>((r) => pc.bind('pusher:subscription_succeeded', () => r()));

  const regions = ['eu', 'us', null, 'asia', 'eu', 'us', null, 'eu', 'asia', 'us'];
  const books = new Books(rng(9));
  for (let i = 0; i < 20; i++) {
    const region = regions[i % regions.length];
    const r = await signedPost(srv.port, APP, 'events', { name: 'quote', channel: 'quotes', data: JSON.stringify({ i, region }), ...(region ? { tags: { region } } : {}) });
    if (r.status !== 200) throw new Error(`publish: ${r.status} ${r.text}`);
    await srv.sdk().trigger('ticker', 'price', books.update('A'));
  }
  // the positive marker: an eu event after all the others
  const r = await signedPost(srv.port, APP, 'events', { name: 'end', channel: 'quotes', data: '{"end":true}', tags: { region: 'eu' } });
  t.equal(r.status, 200);
  await page.waitForFunction('window.quotes.some((x) => x[0] === "end") && window.ticker.length >= 20', undefined, { timeout: 20_000 });
  for (let i = 0; i < 200 && all.length < 21; i++) await new Promise((r) => setTimeout(r, 50));
  t.equal(all.length, 21, 'the plain pusher-js in Node got every event');
  const want = all.filter((x) => {
    const d = (x as [string, { region?: string }])[1];
    return d.region === undefined || d.region === 'eu' || d.region === 'asia';
  });
  t.equal(want.length, 11, 'eu and asia events, and the end marker');
  t.same(await page.evaluate('window.quotes'), want, 'the page got exactly the matching events, in order, with their data');
  t.match(await page.evaluate('window.bad'), { type: 'InvalidFilter', status: 4000 }, 'a bad filter: the channel\'s subscription_error in the page');
  const stats = await page.evaluate('window.stats') as { deltas: number; syncErrors: number };
  t.ok(stats.deltas >= 15 && stats.syncErrors === 0, `the unfiltered channel on the same instance: ${stats.deltas} deltas decoded, no sync error`);
});
