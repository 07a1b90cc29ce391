// test-modes: once (the console's history view reads the channel's owner like REST history; across shards: history/rest)
// The console's view of a history channel (GET /api/apps/:id/history, read from the
// channel's owner as the REST history route is): stored messages with epoch, serial,
// event, data and time, paged; a console publish on a history channel is numbered and
// kept like an API publish; bad queries get a 400 naming what was wrong; the page shows it
// (headless Chromium). And what the
// docs say of console publishes: one to a cache channel is its cached event.

import t, { type Test } from 'tap';
import { APP, RawClient, WORKERS, startServer, type TestServer } from '../helpers/server';
import { TOKEN, bearer, consolePage, consoleRequest } from '../helpers/console';

// Browser globals inside page.waitForFunction callbacks (they run in the page).
declare const document: any;

async function start(t: Test): Promise<{ srv: TestServer; port: number }> {
  const srv = await startServer({
    apps: [{ ...APP, channel_history: { 'log-*': { size: 100, ttl: 300 } } as never }],
    console: { enabled: true, host: '127.0.0.1', port: 0, token: TOKEN },
  });
  t.teardown(() => srv.stop());
  return { srv, port: srv.server.consolePort! };
}

const get = (port: number, query: string) => consoleRequest(port, 'GET', `/api/apps/${APP.id}/history?${query}`, { headers: bearer() });
const publish = (port: number, body: unknown) => consoleRequest(port, 'POST', `/api/apps/${APP.id}/publish`, { headers: bearer(), body: JSON.stringify(body) });

t.test(`the console shows a history channel's stored messages, its own publishes numbered among them (workers ${WORKERS})`, async (t) => {
  const { srv, port } = await start(t);
  const sub = srv.track(await RawClient.connect(srv.wsUrl()));
  await sub.subscribe('log-a');
  const sdk = srv.sdk();
  const before = Date.now();
  for (let i = 1; i <= 5; i++) await sdk.trigger('log-a', 'line', { i });
  const p = await publish(port, { channel: 'log-a', event: 'from-console', data: { i: 6 } });
  t.equal(p.status, 200);
  t.equal((await sub.event('from-console', 'log-a', 5000)).data, JSON.stringify({ i: 6 }), 'the subscriber gets the console publish');

  const all = await get(port, 'channel=log-a&direction=forwards');
  t.equal(all.status, 200);
  t.type(all.json.epoch, 'string');
  t.ok(all.json.epoch.length > 0, 'with its epoch');
  t.same(all.json.items.map((m: { serial: number }) => m.serial), [1, 2, 3, 4, 5, 6], 'serials 1…6: the console publish is numbered and kept');
  t.same(all.json.items.map((m: { event: string }) => m.event), ['line', 'line', 'line', 'line', 'line', 'from-console']);
  t.same(all.json.items[5].data, JSON.stringify({ i: 6 }), 'data as delivered');
  t.same(all.json.items[0].data, JSON.stringify({ i: 1 }));
  t.ok(all.json.items.every((m: { time_ms: number }) => m.time_ms >= before - 1000 && m.time_ms <= Date.now() + 1000), 'each with its time');
  t.equal(all.json.next_cursor, null);

  // pages, newest first (the default), through the cursor
  const seen: number[] = [];
  let query = 'channel=log-a&limit=4';
  for (let i = 0; i < 5; i++) {
    const page = await get(port, query);
    t.equal(page.status, 200);
    seen.push(...page.json.items.map((m: { serial: number }) => m.serial));
    if (page.json.next_cursor === null) break;
    query = `channel=log-a&limit=4&cursor=${encodeURIComponent(page.json.next_cursor)}`;
  }
  t.same(seen, [6, 5, 4, 3, 2, 1], 'two pages, newest first');
  t.same((await get(port, 'channel=log-a&after_serial=4&direction=forwards')).json.items.map((m: { serial: number }) => m.serial), [5, 6]);
  t.same((await get(port, 'channel=log-b')).json.items, [], 'a history channel with nothing stored: no items');
});

t.test('bad history queries get a 400 naming what was wrong', async (t) => {
  const { port } = await start(t);
  const cases: [string, RegExp][] = [
    ['', /channel is missing: \/api\/apps\/\{id\}\/history\?channel=<name>/],
    ['channel=', /channel is missing/],
    ['channel=plain', /channel "plain" has no history: no pattern of the app's channel_history matches it \(patterns: log-\*\)/],
    ['channel=bad%20name!', /invalid character/],
    ['channel=log-a&limit=0', /limit must be an integer from 1 to 1000/],
    ['channel=log-a&direction=sideways', /direction must be backwards or forwards/],
    ['channel=log-a&after_serial=-1', /after_serial must be a non-negative integer/],
    ['channel=log-a&cursor=nope', /cursor is not one this server gave/],
  ];
  for (const [q, msg] of cases) {
    const r = await get(port, q);
    t.equal(r.status, 400, q);
    t.match(r.json.error, msg);
  }
  t.equal((await consoleRequest(port, 'GET', `/api/apps/${APP.id}/history?channel=log-a`)).status, 401, 'without the token: 401');
  t.equal((await consoleRequest(port, 'GET', '/api/apps/nope/history?channel=log-a', { headers: bearer() })).status, 404, 'an unknown app: 404');
  t.equal((await consoleRequest(port, 'POST', `/api/apps/${APP.id}/history?channel=log-a`, { headers: bearer(), body: '{}' })).status, 405);
});

t.test(`a console publish to a cache channel is its cached event (in this process) (workers ${WORKERS})`, async (t) => {
  const { srv, port } = await start(t);
  const first = srv.track(await RawClient.connect(srv.wsUrl()));
  t.equal((await first.subscribe('cache-news')).event, 'pusher_internal:subscription_succeeded');
  t.equal((await first.next((f) => f.channel === 'cache-news' && f.event === 'pusher:cache_miss', 5000)).event, 'pusher:cache_miss', 'nothing cached yet');
  t.equal((await publish(port, { channel: 'cache-news', event: 'headline', data: { n: 1 } })).status, 200);
  t.equal((await first.event('headline', 'cache-news', 5000)).data, JSON.stringify({ n: 1 }));
  const late = srv.track(await RawClient.connect(srv.wsUrl()));
  t.equal((await late.subscribe('cache-news')).event, 'pusher_internal:subscription_succeeded');
  const got = await late.next((f) => f.channel === 'cache-news' && f.event !== 'pusher_internal:subscription_succeeded', 5000);
  t.equal(got.event, 'headline', 'a later subscriber gets the console publish as the cached event');
  t.equal(got.data, JSON.stringify({ n: 1 }));
});

t.test(`the page shows a channel's history, newest first, with an Older button (Chromium, workers ${WORKERS})`, async (t) => {
  const { srv, port } = await start(t);
  const sdk = srv.sdk();
  for (let i = 1; i <= 55; i++) await sdk.trigger('log-page', 'line', { i });
  const { page } = await consolePage(t, port);
  await page.fill('#history-channel', 'log-page');
  await page.click('#history-submit');
  await page.waitForFunction(() => document.querySelectorAll('#history tbody tr').length === 50, undefined, { timeout: 10_000 });
  const first = await page.$$eval('#history tbody tr:first-child td', (tds) => tds.map((td) => td.textContent ?? ''));
  t.equal(first[0], '55', 'newest first: serial 55');
  t.match(first[1], /^\d{4}-\d\d-\d\dT/, 'its time');
  t.equal(first[2], 'line');
  t.equal(first[3], JSON.stringify({ i: 55 }));
  t.match(await page.textContent('#history-result'), /^Epoch \S+: 50 messages shown, newest first\.$/);
  t.equal(await page.isHidden('#history-older'), false, 'more are stored: Older is offered');
  await page.click('#history-older');
  await page.waitForFunction(() => document.querySelectorAll('#history tbody tr').length === 55, undefined, { timeout: 10_000 });
  t.equal(await page.textContent('#history tbody tr:last-child td'), '1', 'down to serial 1');
  t.equal(await page.isHidden('#history-older'), true, 'and nothing older');

  await page.fill('#history-channel', 'plain');
  await page.click('#history-submit');
  await page.waitForFunction(() => document.getElementById('history-result')!.className === 'error', undefined, { timeout: 10_000 });
  t.match(await page.textContent('#history-result'), /channel "plain" has no history/);
  t.equal(await page.$$eval('#history tbody tr', (trs) => trs.length), 0, 'no rows for it');
});
