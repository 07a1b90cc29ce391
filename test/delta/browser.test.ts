// client/delta.js in headless Chromium (Debian `chromium`, driven by playwright-core)
// against a real server: pusher-js's browser build, the client module as shipped
// (ES modules, `fossil-delta` resolved by an import map), Fossil deltas decoded in the
// page; channel.bind() gets exactly the data a plain pusher-js in Node gets.

import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import t from 'tap';
import { chromium } from 'playwright-core';
import { connected, pusherJs } from '../helpers/pusher-js';
import { startServer } from '../helpers/server';
import { Books, rng } from './clients';

const ROOT = path.resolve(__dirname, '../../..');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

const FILES: Record<string, [string, string]> = {
  '/pusher.js': [path.join(ROOT, 'node_modules/pusher-js/dist/web/pusher.js'), 'text/javascript'],
  '/fossil-delta.js': [path.join(ROOT, 'node_modules/fossil-delta/fossil-delta.js'), 'text/javascript'],
  '/client/delta.js': [path.join(ROOT, 'client/delta.js'), 'text/javascript'],
  '/client/delta-core.js': [path.join(ROOT, 'client/delta-core.js'), 'text/javascript'],
};
const PAGE = `<!doctype html><html><head>
<script type="importmap">{"imports":{"fossil-delta":"/fossil-delta.js"}}</script>
<script src="/pusher.js"></script></head><body></body></html>`;

function serve(): Promise<http.Server> {
  const srv = http.createServer((req, res) => {
    const f = FILES[req.url ?? ''];
    if (req.url === '/') {
      res.writeHead(200, { 'content-type': 'text/html' }).end(PAGE);
    } else if (f) {
      res.writeHead(200, { 'content-type': f[1] }).end(fs.readFileSync(f[0]));
    } else {
      res.writeHead(404).end();
    }
  });
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve(srv)));
}

t.test('client/delta.js in Chromium decodes Fossil deltas for channel.bind()', { skip: fs.existsSync(CHROMIUM) ? false : `no ${CHROMIUM}` }, async (t) => {
  const srv = await startServer({});
  t.teardown(() => srv.stop());
  const web = await serve();
  t.teardown(() => new Promise<void>((r) => web.close(() => r())));
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  t.teardown(() => browser.close());
  const page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${(web.address() as { port: number }).port}/`);
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
