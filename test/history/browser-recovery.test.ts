// test-modes: once (the browser side of recovery; the server side runs with 4 shards in client-recovery, rewind-storm and redis)
// client/recovery.js (withRecovery) in headless Chromium, loaded as the browser loads it
// (an ES module import of the client's files), on pusher-js 8's browser build and on
// Laravel Echo 2 (its IIFE build, broadcaster pusher, `withRecovery(echo.connector.pusher)`).
// The page connects through a TCP proxy run by the test; the proxy resets the connection
// (no close frame: what a dropped network does) and refuses new ones while 200 messages
// are published on each of 3 history channels; once let back in, pusher-js reconnects by
// itself and each channel ends with every message once, in order, then a live one. With a
// history of 3 the resume fails (too_old): onFailed and the channel event both say so.
// Any shard count (RINGCAST_TEST_WORKERS).

import { readFileSync } from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import type { Page } from 'playwright-core';
import { launchChromium, PUSHER_JS_WEB, ROOT, serveSite } from '../helpers/browser';
import { cutProxy } from '../helpers/cut-proxy';
import { publishNumbered } from '../helpers/pusher-js';
import { APP, WORKERS, eventually, startServer } from '../helpers/server';

t.setTimeout(240_000);

const CHANNELS = ['room-1', 'room-2', 'room-3'];
const BEFORE = 10;
const DURING = 200;
const CLIENT_FILES = new Set(['index.js', 'filter.js', 'recovery.js']);

const PAGE = `<!doctype html><html><head>
<script src="/pusher.js"></script>
<script src="/echo.js"></script>
<script type="module">
import { withRecovery } from '/client/index.js';
window.withRecovery = withRecovery;
window.loaded = true;
</script></head><body></body></html>`;

type Kind = 'pusher-js' | 'laravel-echo';

/**
 * Page-side setup (a string: the test's compiler has no DOM types). Defines window.sub(name):
 * subscribes, records `msg` data's i in window.got[name] and `ringcast:recovery_failed` in
 * window.onChannel; resolves at subscription_succeeded.
 */
function setupScript(kind: Kind, port: number): string {
  const options = `{ cluster: 'mt1', forceTLS: false, disableStats: true, wsHost: '127.0.0.1', wsPort: ${port}, enabledTransports: ['ws'] }`;
  const client = kind === 'pusher-js'
    ? `const pusher = new Pusher('${APP.key}', ${options});
       window.sub = (name) => new Promise((resolve) => {
         const ch = pusher.subscribe(name);
         ch.bind('msg', (d) => window.got[name].push(d.i));
         ch.bind('ringcast:recovery_failed', (d) => window.onChannel.push([name, d]));
         ch.bind('pusher:subscription_succeeded', () => resolve());
       });`
    : `const echo = new Echo.default({ broadcaster: 'pusher', key: '${APP.key}', ...${options} });
       const pusher = echo.connector.pusher;
       window.sub = (name) => new Promise((resolve) => {
         echo.channel(name)
           .listen('.msg', (d) => window.got[name].push(d.i))
           .listen('.ringcast:recovery_failed', (d) => window.onChannel.push([name, d]))
           .subscribed(() => resolve());
       });`;
  return `(async () => {
    window.got = { ${[...CHANNELS, 'room-x'].map((c) => `'${c}': []`).join(', ')} };
    window.failed = [];
    window.onChannel = [];
    ${client}
    window.pusher = pusher;
    window.recovery = withRecovery(pusher, { onFailed: (channel, info) => window.failed.push([channel, info]) });
    await new Promise((resolve) => pusher.connection.bind('connected', resolve));
  })()`;
}

async function openPage(t: Test, kind: Kind, historySize: number) {
  const srv = await startServer({ apps: [{ ...APP, channel_history: { 'room-*': { size: historySize, ttl: 120 } } as never }] });
  t.teardown(() => srv.stop());
  const px = await cutProxy(srv.port);
  t.teardown(() => px.close());
  const site = await serveSite(t, {
    '/': { text: PAGE, type: 'text/html' },
    '/pusher.js': { file: PUSHER_JS_WEB, type: 'text/javascript' },
    '/echo.js': { file: path.join(ROOT, 'node_modules/laravel-echo/dist/echo.iife.js'), type: 'text/javascript' },
    '*': (req, res) => {
      const name = (req.url ?? '').split('?')[0].replace(/^\/client\//, '');
      if (!CLIENT_FILES.has(name)) return res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'text/javascript' }).end(readFileSync(path.join(ROOT, 'client', name)));
    },
  });
  const browser = await launchChromium(t);
  const page = await browser.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(site);
  await page.waitForFunction('window.loaded === true', undefined, { timeout: 20_000 });
  await page.evaluate(setupScript(kind, px.port));
  return { srv, px, sdk: srv.sdk(), page, errors };
}

const evaluate = <T>(page: Page, js: string): Promise<T> => page.evaluate(js) as Promise<T>;

/** The page is connected again (after at least one new connection through the proxy). */
async function reconnected(page: Page, px: { accepted(): number }, before: number): Promise<void> {
  await eventually(async () => px.accepted() > before && await evaluate<string>(page, 'window.pusher.connection.state') === 'connected', 60_000, 'pusher-js to reconnect');
}

for (const kind of ['pusher-js', 'laravel-echo'] as const) {
  t.test(`Chromium, ${kind} with withRecovery: a dropped TCP connection misses nothing (${WORKERS} workers)`, async (t) => {
    const { px, sdk, page, errors } = await openPage(t, kind, 500);
    await evaluate(page, `Promise.all(${JSON.stringify(CHANNELS)}.map((c) => window.sub(c)))`);
    await eventually(() => evaluate<boolean>(page, `${JSON.stringify(CHANNELS)}.every((c) => window.recovery.positions.has(c))`), 10_000, 'positions');
    const publish = (from: number, to: number) => publishNumbered(sdk, CHANNELS, from, to);
    const counts = () => evaluate<number[]>(page, `${JSON.stringify(CHANNELS)}.map((c) => window.got[c].length)`);
    await publish(1, BEFORE);
    await eventually(async () => (await counts()).every((n) => n === BEFORE), 10_000, 'the first messages');

    px.cut();
    await publish(BEFORE + 1, BEFORE + DURING);
    t.same(await counts(), CHANNELS.map(() => BEFORE), 'nothing arrived while cut off');
    const before = px.accepted();
    px.allow();
    await reconnected(page, px, before);
    await eventually(async () => (await counts()).every((n) => n >= BEFORE + DURING), 30_000, 'the missed messages');
    // a live one after the replay: the marker that nothing else is on its way
    await publish(BEFORE + DURING + 1, BEFORE + DURING + 1);
    await eventually(() => evaluate<boolean>(page, `${JSON.stringify(CHANNELS)}.every((c) => window.got[c].includes(${BEFORE + DURING + 1}))`), 10_000, 'the live message after');
    const got = await evaluate<Record<string, number[]>>(page, 'window.got');
    const want = Array.from({ length: BEFORE + DURING + 1 }, (_, i) => i + 1);
    for (const c of CHANNELS) t.same(got[c], want, `${c}: every message once, in order`);
    t.same(await evaluate(page, 'window.failed'), [], 'no recovery failed');
    await evaluate(page, 'window.pusher.disconnect()');
    t.same(errors, [], 'no error in the page');
  });

  t.test(`Chromium, ${kind} with withRecovery: a failed resume calls onFailed and emits ringcast:recovery_failed (${WORKERS} workers)`, async (t) => {
    const { px, sdk, page, errors } = await openPage(t, kind, 3);
    await evaluate(page, "window.sub('room-x')");
    await eventually(() => evaluate<boolean>(page, "window.recovery.positions.has('room-x')"), 10_000, 'positions');
    t.same(await evaluate(page, 'window.failed'), [], 'positions only: nothing to report');
    px.cut();
    for (let i = 0; i < 6; i++) await sdk.trigger('room-x', 'msg', { i }); // size 3: the oldest are gone
    const before = px.accepted();
    px.allow();
    await reconnected(page, px, before);
    await eventually(() => evaluate<boolean>(page, 'window.failed.length === 1 && window.onChannel.length === 1'), 30_000, 'the failure report');
    const failed = await evaluate<[string, { recovered: boolean; reason: string }][]>(page, 'window.failed');
    t.equal(failed[0][0], 'room-x');
    t.match(failed[0][1], { recovered: false, reason: 'too_old' });
    t.match(await evaluate(page, 'window.onChannel'), [['room-x', { reason: 'too_old' }]], 'the channel event');
    // after a failure the subscription is live: a new message arrives
    await sdk.trigger('room-x', 'msg', { i: 99 });
    await eventually(() => evaluate<boolean>(page, "window.got['room-x'].includes(99)"), 10_000, 'a live message after the failure');
    t.notOk((await evaluate<number[]>(page, "window.got['room-x']")).some((i) => i >= 0 && i < 6), 'none of the lost messages replayed');
    await evaluate(page, 'window.pusher.disconnect()');
    t.same(errors, [], 'no error in the page');
  });
}
