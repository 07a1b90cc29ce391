// test-modes: once (the browser side of the fallback transports; sessions across shards: fallback/pusher-js)
// Stock pusher-js 8 (its browser build) in headless Chromium on a page that removes
// `window.WebSocket` and `window.MozWebSocket` before pusher-js loads, as a locked-down
// browser would: pusher-js falls back to HTTP on its own (xhr_streaming; then, forced
// with enabledTransports, xhr_polling). The page is on another origin than the server (so
// every request is CORS-preflighted), authorizes its private channel at the site's own
// endpoint (pusher-js's default ajax authorizer), receives events published with the
// `pusher` SDK and exchanges client events with a WebSocket pusher-js in Node. That HTTP
// carried it is checked twice: the transport pusher-js reports in the page, and the
// server's fallback metrics by transport. Runs with workers 1 and 4 (RINGCAST_TEST_WORKERS).

import t from 'tap';
import { launchChromium, PUSHER_JS_WEB, serveSite } from '../helpers/browser';
import { counterValue, type FallbackTransport } from '../helpers/fallback';
import { collect, connected, pusherJs, subscribed } from '../helpers/pusher-js';
import { WORKERS, startServer } from '../helpers/server';

t.setTimeout(180_000);

const WAIT = { timeout: 30_000 };
// Before pusher-js: no WebSocket constructor of any name.
const PAGE = `<!doctype html><html><head>
<script>delete window.WebSocket; delete window.MozWebSocket; window.wsGone = typeof WebSocket === 'undefined' && typeof MozWebSocket === 'undefined';</script>
<script src="/pusher.js"></script></head><body></body></html>`;

const cases: { transport: FallbackTransport; option: string; label: string }[] = [
  { transport: 'xhr_streaming', option: '', label: 'xhr_streaming' },
  { transport: 'xhr_polling', option: "enabledTransports: ['xhr_polling'],", label: 'xhr' },
];

for (const { transport, option, label } of cases) {
  t.test(`Chromium without WebSocket: pusher-js over ${transport}${option ? ' (enabledTransports)' : ' (its own fallback)'}, workers ${WORKERS}`, async (t) => {
    const srv = await startServer({ metrics: { enabled: true, host: '127.0.0.1', port: 0 } });
    t.teardown(() => srv.stop());
    const metric = (name: string, match: string) => counterValue(srv.server.metricsPort!, name, match);
    const sdk = srv.sdk();
    const auths: string[] = [];
    const site = await serveSite(t, {
      '/': { text: PAGE, type: 'text/html' },
      '/pusher.js': { file: PUSHER_JS_WEB, type: 'text/javascript' },
      // the application's auth endpoint: pusher-js posts socket_id and channel_name as a form
      '/auth': (req, res, body) => {
        const form = new URLSearchParams(body);
        const socketId = form.get('socket_id') ?? '';
        const channel = form.get('channel_name') ?? '';
        auths.push(channel);
        try {
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(sdk.authorizeChannel(socketId, channel)));
        } catch (e) {
          res.writeHead(400, { 'content-type': 'text/plain' }).end(String(e));
        }
      },
    });
    const browser = await launchChromium(t);
    // a context of its own: no transport cached in localStorage by another case
    const context = await browser.newContext();
    t.teardown(() => context.close());
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(site);
    t.equal(await page.evaluate('window.wsGone'), true, 'the page has no WebSocket before pusher-js loads');

    // wsHost/wsPort are the server's too: only the missing WebSocket makes pusher-js use HTTP
    await page.evaluate(`(async () => {
      window.got = [];
      const p = window.p = new Pusher('app-key', {
        cluster: 'mt1', forceTLS: false, disableStats: true,
        wsHost: '127.0.0.1', wsPort: ${srv.port},
        httpHost: '127.0.0.1', httpPort: ${srv.port},
        ${option}
        channelAuthorization: { endpoint: '/auth', transport: 'ajax' },
      });
      await new Promise((resolve) => p.connection.bind('connected', resolve));
      window.transport = p.connection.connection.transport.name;
      window.socketId = p.connection.socket_id;
      const ok = (ch) => new Promise((resolve, reject) => {
        ch.bind('pusher:subscription_succeeded', () => resolve());
        ch.bind('pusher:subscription_error', (e) => reject(new Error(JSON.stringify(e))));
      });
      const pub = p.subscribe('public-news');
      const priv = p.subscribe('private-chat');
      pub.bind('news', (d) => window.got.push(['news', d]));
      priv.bind('msg', (d) => window.got.push(['msg', d]));
      priv.bind('client-from-node', (d) => window.got.push(['client-from-node', d]));
      await Promise.all([ok(pub), ok(priv)]);
    })()`);
    t.equal(await page.evaluate('window.transport'), transport, `pusher-js in the page connected with ${transport}`);
    t.match(await page.evaluate('window.socketId'), /^\d+\.\d+$/, 'a socket_id from connection_established');
    t.same(auths, ['private-chat'], 'the private channel was authorized at the site\'s endpoint');

    // a WebSocket pusher-js in Node on the same private channel
    const node = srv.track(pusherJs(srv.port));
    await connected(node);
    const ch = await subscribed(node, 'private-chat');
    const fromPage = collect(ch, 'client-from-page');
    await page.evaluate(`window.p.channel('private-chat').trigger('client-from-page', { hi: 'from the page' })`);
    await fromPage.until(1, 'the page\'s client event', 20_000);
    t.same(fromPage.got, [{ hi: 'from the page' }], 'the page\'s client event (through xhr_send) reached the WebSocket client');
    ch.trigger('client-from-node', { hi: 'from node' });

    await sdk.trigger('public-news', 'news', { n: 1 });
    await sdk.trigger('private-chat', 'msg', { n: 2 });
    await sdk.trigger('public-news', 'news', { n: 3 });
    await page.waitForFunction('window.got.length >= 4', undefined, WAIT);
    const got = await page.evaluate('window.got') as [string, unknown][];
    t.same(got.filter((g) => g[0] !== 'client-from-node'), [['news', { n: 1 }], ['msg', { n: 2 }], ['news', { n: 3 }]], 'the published events, in order, on both channels');
    t.same(got.filter((g) => g[0] === 'client-from-node'), [['client-from-node', { hi: 'from node' }]], 'the WebSocket client\'s client event reached the page');
    t.equal(await page.evaluate('window.p.connection.state'), 'connected', 'still connected');
    t.equal(await page.evaluate('window.p.connection.socket_id'), await page.evaluate('window.socketId'), 'the same connection throughout');

    // the server saw the page's requests on the transport's endpoints, and a single HTTP session
    t.ok(await metric('fallback_requests_total', `transport="${label}"`) >= 1, `receiving requests on ${label}`);
    t.ok(await metric('fallback_requests_total', 'transport="xhr_send"') >= 3, 'xhr_send: the subscribes and the client event');
    t.ok(await metric('fallback_requests_total', 'transport="options"') >= 1, 'CORS preflights from the page\'s origin');
    if (transport === 'xhr_polling') t.equal(await metric('fallback_requests_total', 'transport="xhr_streaming"'), 0, 'no stream was opened');
    t.equal(await metric('fallback_sessions_total', 'app_id="app-id"'), 1, 'one HTTP session');
    t.same(errors, [], 'no error in the page');
  });
}
