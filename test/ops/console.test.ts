// test-modes: once (the console's API and page are the primary's; its live stream across shards: console/stream)
// The live console in headless Chromium (Debian `chromium`, driven by playwright-core):
// log in with the token, see a pusher-js client (in another page of the same browser)
// appear as a connection and on its channel, publish from the form and see the client
// receive it, see API and member events in the live log. A wrong token gets nothing
// (401 on every /api route, checked over HTTP too); with console.allow_app_secret (on
// here; off by default, test/console/login.test.ts) an app secret sees only its app.

import http from 'node:http';
import t, { type Test } from 'tap';
import type { Page } from 'playwright-core';
import { launchChromium, serveSite } from '../helpers/browser';
import { consolePage } from '../helpers/console';
import { ConfigError, loadConfig } from '../../src/config';
import { APP, RawClient, WORKERS, startServer, type TestServer } from '../helpers/server';

// Browser globals inside page.evaluate / waitForFunction callbacks (they run in the page;
// the project compiles without the DOM library).
declare const document: any;
declare const window: any;
type HTMLOptionElement = { value: string };

const PUSHER_JS = require.resolve('pusher-js/dist/web/pusher.min.js');
const TOKEN = 'console-token-0123456789';
const OTHER = { id: 'other', key: 'other-key', secret: 'other-secret' };

interface Answer { status: number; body: string }

function request(port: number, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => { text += c.toString(); });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** An app's own page with pusher-js, as a site would serve it: from 127.0.0.1 too. */
const clientSite = (t: Test): Promise<string> => serveSite(t, {
  '/pusher.min.js': { file: PUSHER_JS, type: 'text/javascript' },
  '*': { text: '<!doctype html><title>app</title><script src="/pusher.min.js"></script>', type: 'text/html' },
});

/** Lines of the page's live log. */
function logLines(page: Page): Promise<string[]> {
  return page.$$eval('#log li', (lis) => lis.map((li) => li.textContent ?? ''));
}

async function waitLog(page: Page, text: string, timeout = 10_000): Promise<void> {
  await page.waitForFunction((s) => [...document.querySelectorAll('#log li')].some((li) => (li.textContent ?? '').includes(s)), text, { timeout });
}

async function start(t: Test): Promise<{ srv: TestServer; port: number }> {
  const srv = await startServer({ apps: [{ ...APP }, OTHER], console: { enabled: true, host: '127.0.0.1', port: 0, token: TOKEN, allow_app_secret: true, login_max_failures: 1000 } });
  t.teardown(() => srv.stop());
  t.type(srv.server.consolePort, 'number');
  t.not(srv.server.consolePort, srv.port, 'the console has its own port');
  return { srv, port: srv.server.consolePort! };
}

t.test(`console in Chromium: log in, watch a pusher-js client, publish to it (workers ${WORKERS})`, async (t) => {
  const { srv, port } = await start(t);
  const { page, browser } = await consolePage(t, port, TOKEN);
  t.same(await page.$$eval('#app-select option', (os) => os.map((o) => (o as HTMLOptionElement).value)), ['app-id', 'other'], 'the token sees every app');
  // the first state poll answers after the page is shown ('–' until then)
  await page.waitForFunction(() => document.querySelector('#connections')?.textContent !== '–', undefined, { timeout: 10_000 });
  t.equal(await page.textContent('#connections'), '0');

  // The live log is on once an API event shows up in it (the shards heard of the watcher).
  const sdk = srv.sdk();
  for (let i = 0; ; i++) {
    await sdk.trigger('warmup', 'warm', { i });
    try {
      await waitLog(page, 'api warm on warmup', 500);
      break;
    } catch (err) {
      if (i > 40) throw err;
    }
  }

  // A pusher-js client in another page of the same browser.
  const client = await browser.newPage();
  await client.goto(await clientSite(t));
  const socketId = await client.evaluate(({ key, wsPort }) => {
    const w = window as unknown as { got: unknown[]; p: { disconnect(): void } };
    w.got = [];
    const Pusher = (window as unknown as { Pusher: new (key: string, o: object) => any }).Pusher;
    const p = new Pusher(key, { cluster: 'mt1', wsHost: '127.0.0.1', wsPort, forceTLS: false, enabledTransports: ['ws'], disableStats: true });
    w.p = p;
    const ch = p.subscribe('console-room');
    ch.bind('hello', (d: unknown) => w.got.push(d));
    ch.bind('from-sdk', (d: unknown) => w.got.push(d));
    return new Promise<string>((resolve) => ch.bind('pusher:subscription_succeeded', () => resolve(p.connection.socket_id as string)));
  }, { key: APP.key, wsPort: srv.port });
  t.match(socketId, /^\d+\.\d+$/);

  await page.waitForFunction(() => document.getElementById('connections')!.textContent === '1', undefined, { timeout: 10_000 });
  t.pass('the console counts the client');
  await page.waitForFunction(() => document.querySelector('#channels tr[data-channel="console-room"] .subs')?.textContent === '1', undefined, { timeout: 10_000 });
  t.pass('its channel is listed with one subscriber');
  await waitLog(page, `connection open ${socketId}`);
  t.pass('its connection is in the live log');

  // Publish from the form: the client receives it.
  await page.fill('#publish-channel', 'console-room');
  await page.fill('#publish-event', 'hello');
  await page.fill('#publish-data', '{"from":"console"}');
  await page.click('#publish-submit');
  await page.waitForFunction(() => (document.getElementById('publish-result')!.textContent ?? '').startsWith('Published'), undefined, { timeout: 10_000 });
  await client.waitForFunction(() => (window as unknown as { got: unknown[] }).got.length >= 1, undefined, { timeout: 10_000 });
  t.same(await client.evaluate(() => (window as unknown as { got: unknown[] }).got[0]), { from: 'console' }, 'the client got the event from the console');
  await waitLog(page, 'api hello on console-room (from the console)');

  // An API event from the SDK, and a presence member, show in the console as well.
  await sdk.trigger('console-room', 'from-sdk', { n: 2 });
  await client.waitForFunction(() => (window as unknown as { got: unknown[] }).got.length >= 2, undefined, { timeout: 10_000 });
  await waitLog(page, 'api from-sdk on console-room: {"n":2}');
  const member = srv.track(await RawClient.connect(srv.wsUrl()));
  t.equal((await member.subscribeAuthed('presence-lobby', { user_id: 'ada', user_info: { name: 'Ada' } })).event, 'pusher_internal:subscription_succeeded');
  await waitLog(page, 'member added ada on presence-lobby');
  await page.waitForFunction(() => [...document.querySelectorAll('#presence [data-channel="presence-lobby"] li')].some((li) => li.textContent === 'ada {"name":"Ada"}'), undefined, { timeout: 10_000 });
  t.pass('the presence member is listed');
  await page.waitForFunction(() => document.getElementById('connections')!.textContent === '2', undefined, { timeout: 10_000 });

  // A client event between two connections shows too, with its sender.
  const peer = srv.track(await RawClient.connect(srv.wsUrl()));
  for (const c of [member, peer]) t.equal((await c.subscribeAuthed('private-chat')).event, 'pusher_internal:subscription_succeeded');
  member.send({ event: 'client-ping', channel: 'private-chat', data: { hi: 1 } });
  t.same((await peer.event('client-ping', 'private-chat', 5000)).data, { hi: 1 });
  await waitLog(page, `client client-ping on private-chat from ${member.socketId}`);
  await peer.close();
  await page.waitForFunction(() => document.getElementById('connections')!.textContent === '2', undefined, { timeout: 10_000 });

  // The client leaves: its close is logged and the count drops.
  await client.evaluate(() => (window as unknown as { p: { disconnect(): void } }).p.disconnect());
  await waitLog(page, `connection close ${socketId}`);
  await page.waitForFunction(() => document.getElementById('connections')!.textContent === '1', undefined, { timeout: 10_000 });
  t.ok((await logLines(page)).length >= 6, 'the live log holds the events');

  // A form error is shown, not sent.
  await page.fill('#publish-channel', 'bad channel!');
  await page.click('#publish-submit');
  await page.waitForFunction(() => document.getElementById('publish-result')!.className === 'error', undefined, { timeout: 10_000 });
  t.match(await page.textContent('#publish-result'), /invalid character/);
});

t.test('a wrong token gets nothing', async (t) => {
  const { srv, port } = await start(t);
  const browser = await launchChromium(t);
  const page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${port}/`);
  await page.fill('#login-token', 'not-the-token-0000000');
  await page.click('#login-submit');
  await page.waitForFunction(() => (document.getElementById('login-error')!.textContent ?? '') !== '', undefined, { timeout: 10_000 });
  t.equal(await page.textContent('#login-error'), 'wrong console token');
  t.equal(await page.isHidden('#main'), true, 'nothing shown');

  const page0 = await request(port, 'GET', '/');
  t.equal(page0.status, 200, 'the page itself (a login form) is served');
  t.notMatch(page0.body, /app-id|app-key/, 'and holds no data');

  const sub = srv.track(await RawClient.connect(srv.wsUrl()));
  await sub.subscribe('guarded');
  const publish = JSON.stringify({ channel: 'guarded', event: 'bad', data: '{}' });
  const bad: Record<string, string>[] = [{}, { authorization: 'Bearer wrong-token-00000000' }, { authorization: `Bearer ${APP.secret}` },
    { authorization: `Bearer ${OTHER.secret}`, 'x-console-app': APP.id }, { authorization: `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}` }];
  for (const headers of bad) {
    const what = JSON.stringify(headers);
    for (const [method, path] of [['GET', '/api/session'], ['GET', '/api/apps/app-id'], ['GET', '/api/apps/app-id/events'], ['POST', '/api/apps/app-id/publish']]) {
      const r = await request(port, method, path, { ...headers, 'content-type': 'application/json' }, method === 'POST' ? publish : undefined);
      t.equal(r.status, 401, `${method} ${path} with ${what}: 401`);
      t.notMatch(r.body, /app-id|app-key|other/, 'no data in the answer');
    }
  }
  // Nothing was published: a later legitimate publish is the first event the subscriber gets.
  const ok = await request(port, 'POST', '/api/apps/app-id/publish', { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    JSON.stringify({ channel: 'guarded', event: 'good', data: '{}' }));
  t.equal(ok.status, 200);
  t.equal((await sub.next((f) => f.channel === 'guarded' && !f.event.startsWith('pusher'), 5000)).event, 'good', 'the refused publishes never arrived');
});

t.test('an app secret logs in to that app only', async (t) => {
  const { port } = await start(t);
  const auth = { authorization: `Bearer ${OTHER.secret}`, 'x-console-app': OTHER.id };
  const s = await request(port, 'GET', '/api/session', auth);
  t.equal(s.status, 200);
  t.same(JSON.parse(s.body).apps.map((a: { id: string }) => a.id), ['other']);
  t.equal((await request(port, 'GET', '/api/apps/other', auth)).status, 200);
  const hidden = await request(port, 'GET', '/api/apps/app-id', auth);
  t.equal(hidden.status, 404, 'another app is not found');
  const state = JSON.parse((await request(port, 'GET', '/api/apps/other', auth)).body);
  t.same(Object.keys(state).sort(), ['channels', 'connections', 'enabled', 'id', 'key', 'presence', 'truncated']);
  t.notMatch(JSON.stringify(state), /secret/, 'the state never holds a secret');
});

t.test('the console is off by default, and its config is checked', async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.stop());
  t.equal(srv.server.consolePort, null, 'no console listener');
  const base = { env: {}, overrides: { apps: [{ ...APP }], port: 6001 } };
  const fails = (console: object, key: string, msg: RegExp) => {
    try {
      loadConfig({ ...base, overrides: { ...base.overrides, console } });
      t.fail(`accepted ${JSON.stringify(console)}`);
    } catch (err) {
      t.ok(err instanceof ConfigError);
      t.equal((err as ConfigError).key, key);
      t.match((err as Error).message, msg);
    }
  };
  fails({ enabled: true, port: 6001 }, 'console.port', /must differ from port: the console is never served on the public port/);
  fails({ enabled: true, token: 'short' }, 'console.token', /at least 16 characters/);
  fails({ enabled: 'yes' }, 'console.enabled', /boolean/);
  const env = loadConfig({ env: { CONSOLE_ENABLED: 'true', CONSOLE_PORT: '7000', CONSOLE_TOKEN: TOKEN, CONSOLE_HOST: '127.0.0.2' }, overrides: base.overrides });
  t.match(env.console, { enabled: true, host: '127.0.0.2', port: 7000, token: TOKEN, allow_app_secret: false }, 'CONSOLE_* variables');
});

t.test('after a reload the console serves the apps in force', async (t) => {
  const { srv, port } = await start(t);
  const NEW = { id: 'new', key: 'new-key', secret: 'new-secret' };
  const next = loadConfig({ env: {}, overrides: {
    host: '127.0.0.1', port: 0, workers: WORKERS, log: { level: 'error' },
    apps: [{ ...APP }, NEW], console: { enabled: true, host: '127.0.0.1', port: 0, token: TOKEN, allow_app_secret: true },
  } });
  t.same((await srv.server.reload(next)).removed, ['other']);
  const s = await request(port, 'GET', '/api/session', { authorization: `Bearer ${TOKEN}` });
  t.same(JSON.parse(s.body).apps.map((a: { id: string }) => a.id), ['app-id', 'new']);
  t.equal((await request(port, 'GET', '/api/session', { authorization: `Bearer ${OTHER.secret}`, 'x-console-app': OTHER.id })).status, 401, 'a removed app\'s secret no longer logs in');
  t.equal((await request(port, 'GET', '/api/apps/new', { authorization: `Bearer ${NEW.secret}`, 'x-console-app': NEW.id })).status, 200, 'an added app\'s secret does');
});

t.test(`the live log follows a shard restarted after a crash (workers ${WORKERS})`, async (t) => {
  process.env.RINGCAST_TEST_HOOKS = '1';
  t.teardown(() => { delete process.env.RINGCAST_TEST_HOOKS; });
  const { srv, port } = await start(t);
  // The live log over plain HTTP: every `data:` line of the stream.
  const events: { kind: string; op?: string; socket_id?: string; shard: number }[] = [];
  const stream = http.get({ host: '127.0.0.1', port, path: '/api/apps/app-id/events', agent: false, headers: { authorization: `Bearer ${TOKEN}` } }, (res) => {
    let buf = '';
    res.on('data', (c: Buffer) => {
      buf += c.toString();
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        for (const line of buf.slice(0, i).split('\n')) if (line.startsWith('data: ')) events.push(JSON.parse(line.slice(6)));
        buf = buf.slice(i + 2);
      }
    });
  });
  t.teardown(() => stream.destroy());
  const seen = async (pred: (e: (typeof events)[number]) => boolean, what: string) => {
    for (let i = 0; i < 200 && !events.some(pred); i++) await new Promise((r) => setTimeout(r, 50));
    t.ok(events.some(pred), what);
  };
  // on: a first connection shows
  let first = await RawClient.connect(srv.wsUrl());
  for (let i = 0; i < 40 && !events.some((e) => e.socket_id === first.socketId); i++) {
    await first.close();
    first = await RawClient.connect(srv.wsUrl());
    await new Promise((r) => setTimeout(r, 100));
  }
  await seen((e) => e.kind === 'connection' && e.socket_id === first.socketId, 'the live log is on');
  await first.close();

  const { socketIdPrefix } = await srv.server.testCrashShard!(0);
  // Connections on the replacement shard show in the same stream: the hub adopts a new
  // shard thread within a second (console/hub.ts), so keep connecting until one shows.
  const onNew = (e: (typeof events)[number]) => e.kind === 'connection' && e.op === 'open' && (e.socket_id ?? '').startsWith(`${socketIdPrefix}.`);
  let landed = 0;
  for (let i = 0; i < 100 && !events.some(onNew); i++) {
    const c = srv.track(await RawClient.connect(srv.wsUrl()));
    if (c.socketId.startsWith(`${socketIdPrefix}.`)) landed++;
    await new Promise((r) => setTimeout(r, 50));
  }
  t.ok(landed > 0, 'connections landed on the replacement shard');
  t.ok(events.some(onNew), 'and they are in the live log');
});
