// test-modes: once (the console's login and its throttle run in the primary thread: the shard count does not change them)
// Console login (console/auth.ts, console/throttle.ts): the console token is the login; an
// app secret only with console.allow_app_secret; every refusal names what was wrong; an
// address that fails console.login_max_failures logins in console.login_window is refused
// with 429 + Retry-After (counted), while another address still logs in; the table of
// addresses stays within console.login_max_addresses.

import t, { type Test } from 'tap';
import { ConfigError, loadConfig, type ConfigInput } from '../../src/config';
import { APP, WORKERS, startServer, type TestServer } from '../helpers/server';
import { TOKEN, bearer, consoleRequest, metricValue } from '../helpers/console';

const OTHER = { id: 'other', key: 'other-key', secret: 'other-secret-0000' };

async function start(t: Test, console: Record<string, unknown> = {}): Promise<{ srv: TestServer; port: number; metrics: number }> {
  const srv = await startServer({
    apps: [{ ...APP }, OTHER],
    metrics: { enabled: true, host: '127.0.0.1', port: 0 },
    console: { enabled: true, host: '127.0.0.1', port: 0, token: TOKEN, ...console },
  } as ConfigInput);
  t.teardown(() => srv.stop());
  return { srv, port: srv.server.consolePort!, metrics: srv.server.metricsPort! };
}

t.test('the console needs a token unless app secrets are allowed; the keys have CONSOLE_* variables', async (t) => {
  const base = { apps: [{ ...APP }], port: 6001 };
  try {
    loadConfig({ env: {}, overrides: { ...base, console: { enabled: true } } });
    t.fail('a console without a token was accepted');
  } catch (err) {
    t.ok(err instanceof ConfigError);
    t.equal((err as ConfigError).key, 'console.token');
    t.match((err as Error).message, /console\.token is needed when console\.enabled is true .*console\.allow_app_secret: true/);
  }
  t.equal(loadConfig({ env: {}, overrides: { ...base, console: { enabled: true, allow_app_secret: true } } }).console.token, null, 'app secrets only: accepted');
  t.equal(loadConfig({ env: {}, overrides: base }).console.enabled, false, 'a console that is off needs nothing');
  const env = loadConfig({ env: {
    CONSOLE_TOKEN: TOKEN, CONSOLE_ALLOW_APP_SECRET: 'true', CONSOLE_LOGIN_MAX_FAILURES: '5', CONSOLE_LOGIN_WINDOW: '120',
    CONSOLE_LOGIN_MAX_ADDRESSES: '500', CONSOLE_STREAM_MAX_BUFFERED_KB: '64',
  }, overrides: base }).console;
  t.match(env, { token: TOKEN, allow_app_secret: true, login_max_failures: 5, login_window: 120, login_max_addresses: 500, stream_max_buffered_kb: 64 });
  for (const [key, value, msg] of [
    ['login_max_failures', 0, /console\.login_max_failures/], ['login_window', 0, /console\.login_window/],
    ['login_max_addresses', 2, /console\.login_max_addresses/], ['stream_max_buffered_kb', 1, /console\.stream_max_buffered_kb/],
    ['allow_app_secret', 'yes', /console\.allow_app_secret/],
  ] as const) {
    t.throws(() => loadConfig({ env: {}, overrides: { ...base, console: { [key]: value } } }), msg, `${key}: ${value} refused`);
  }
});

t.test(`app secrets do not log in by default, and each refusal says why (workers ${WORKERS})`, async (t) => {
  const { port } = await start(t);
  const cases: [Record<string, string>, RegExp][] = [
    [{}, /no console token: send Authorization: Bearer <console\.token>/],
    [{ authorization: 'Basic eDp5' }, /must be "Bearer <console\.token>"/],
    [bearer('wrong-token-000000000'), /^wrong console token$/],
    [{ ...bearer(OTHER.secret), 'x-console-app': OTHER.id }, /app secrets do not log in to this console \(console\.allow_app_secret is false\)/],
    [bearer(APP.secret), /^wrong console token$/],
  ];
  for (const [headers, msg] of cases) {
    const r = await consoleRequest(port, 'GET', '/api/session', { headers });
    t.equal(r.status, 401, JSON.stringify(headers));
    t.match(r.json.error, msg);
    t.equal(r.headers['www-authenticate'], 'Bearer realm="ringcast console"');
  }
  const ok = await consoleRequest(port, 'GET', '/api/session', { headers: bearer() });
  t.equal(ok.status, 200);
  t.same(ok.json.apps.map((a: { id: string }) => a.id), [APP.id, OTHER.id], 'the token sees every app');
});

t.test('with console.allow_app_secret an app secret logs in to its app only', async (t) => {
  const { port } = await start(t, { allow_app_secret: true });
  const own = { ...bearer(OTHER.secret), 'x-console-app': OTHER.id };
  const s = await consoleRequest(port, 'GET', '/api/session', { headers: own });
  t.equal(s.status, 200);
  t.same(s.json.apps.map((a: { id: string }) => a.id), [OTHER.id]);
  t.equal((await consoleRequest(port, 'GET', `/api/apps/${APP.id}`, { headers: own })).status, 404, 'another app is not found');
  const wrong = await consoleRequest(port, 'GET', '/api/session', { headers: { ...bearer(APP.secret), 'x-console-app': OTHER.id } });
  t.equal(wrong.status, 401);
  t.match(wrong.json.error, /wrong console token, or wrong app id and secret/);
  t.equal((await consoleRequest(port, 'GET', '/api/session', { headers: { ...bearer(TOKEN), 'x-console-app': OTHER.id } })).status, 200, 'the token still works');
});

t.test(`a brute force is throttled per address; another address still logs in (workers ${WORKERS})`, async (t) => {
  const { port, metrics } = await start(t, { login_max_failures: 3, login_window: 60 });
  const attacker = '127.0.0.1';
  const statuses: number[] = [];
  let retryAfter = '';
  for (let i = 0; i < 50; i++) {
    const r = await consoleRequest(port, 'GET', '/api/session', { headers: bearer(`guess-${String(i).padStart(16, '0')}`), from: attacker });
    statuses.push(r.status);
    if (r.status === 429) {
      retryAfter = String(r.headers['retry-after']);
      t.match(r.json.error, /too many failed console logins from this address: try again in \d+ s/);
    }
  }
  t.same(statuses.slice(0, 2), [401, 401], 'the first failures are answered 401');
  t.ok(statuses.slice(2).every((s) => s === 429), 'from the third failure on: 429');
  t.ok(Number(retryAfter) >= 1 && Number(retryAfter) <= 60, `Retry-After ${retryAfter} s is within the window`);
  t.equal(await metricValue(metrics, 'console_login_failures_total'), 3, 'only 3 guesses were checked at all');
  t.equal(await metricValue(metrics, 'console_login_throttled_total'), 47, 'the other 47 were throttled (counted)');

  const blocked = await consoleRequest(port, 'GET', '/api/session', { headers: bearer(), from: attacker });
  t.equal(blocked.status, 429, 'the blocked address is refused even with the right token');
  t.equal((await consoleRequest(port, 'POST', `/api/apps/${APP.id}/publish`, { headers: bearer(), from: attacker, body: '{}' })).status, 429, 'on every /api route');
  const other = await consoleRequest(port, 'GET', '/api/session', { headers: bearer(), from: '127.0.0.2' });
  t.equal(other.status, 200, 'a correct login from another address works');
  t.equal((await consoleRequest(port, 'GET', '/', { from: attacker })).status, 200, 'the page itself (no data) is still served');
});

t.test('behind a trusted proxy (http.trusted_proxies) the throttle counts per client address, not per proxy', async (t) => {
  const srv = await startServer({
    apps: [{ ...APP }],
    http: { trusted_proxies: ['127.0.0.1'] },
    console: { enabled: true, host: '127.0.0.1', port: 0, token: TOKEN, login_max_failures: 2, login_window: 60 },
  } as ConfigInput);
  t.teardown(() => srv.stop());
  const port = srv.server.consolePort!;
  const via = (client: string) => ({ ...bearer('wrong-guess-0000000000'), 'x-forwarded-for': client });
  const statuses: number[] = [];
  for (let i = 0; i < 3; i++) statuses.push((await consoleRequest(port, 'GET', '/api/session', { headers: via('203.0.113.9'), from: '127.0.0.1' })).status);
  t.same(statuses, [401, 429, 429], 'the client behind the proxy is throttled');
  const other = await consoleRequest(port, 'GET', '/api/session', { headers: { ...bearer(), 'x-forwarded-for': '203.0.113.10' }, from: '127.0.0.1' });
  t.equal(other.status, 200, 'another client behind the same proxy logs in');
  const forged = await consoleRequest(port, 'GET', '/api/session', { headers: { ...bearer(), 'x-forwarded-for': '203.0.113.9' }, from: '127.0.0.2' });
  t.equal(forged.status, 200, 'from an untrusted peer the header is not read (127.0.0.2 itself is not blocked)');
});

t.test('a blocked address may try again once its window is over; a success forgets its failures', async (t) => {
  const { port } = await start(t, { login_max_failures: 2, login_window: 1 });
  const from = '127.0.0.3';
  const wrong = () => consoleRequest(port, 'GET', '/api/session', { headers: bearer('wrong-token-000000000'), from });
  t.equal((await wrong()).status, 401);
  t.equal((await consoleRequest(port, 'GET', '/api/session', { headers: bearer(), from })).status, 200, 'a success …');
  t.equal((await wrong()).status, 401, '… forgot the first failure (this one is the first again)');
  t.equal((await wrong()).status, 429, 'the second failure in the window blocks');
  const t0 = Date.now();
  let status = 429;
  while (status === 429 && Date.now() - t0 < 10_000) {
    await new Promise((r) => setTimeout(r, 100));
    status = (await consoleRequest(port, 'GET', '/api/session', { headers: bearer(), from })).status;
  }
  t.equal(status, 200, `the right token works again after the window (${Date.now() - t0} ms)`);
});

t.test('the table of failing addresses is bounded (console.login_max_addresses), its evictions counted', async (t) => {
  const { port, metrics } = await start(t, { login_max_failures: 2, login_window: 60, login_max_addresses: 16 });
  const addrs = Array.from({ length: 40 }, (_, i) => `127.0.1.${i + 1}`);
  for (const from of addrs) {
    t.equal((await consoleRequest(port, 'GET', '/api/session', { headers: bearer('wrong-token-000000000'), from })).status, 401);
  }
  t.equal(await metricValue(metrics, 'console_login_evictions_total'), 24, '40 addresses into 16 places: 24 forgotten');
  // the newest 16 are remembered: a second failure blocks them; the first, forgotten, starts again
  t.equal((await consoleRequest(port, 'GET', '/api/session', { headers: bearer('wrong-token-000000000'), from: addrs[39] })).status, 429);
  t.equal((await consoleRequest(port, 'GET', '/api/session', { headers: bearer('wrong-token-000000000'), from: addrs[0] })).status, 401);
});

t.test('addresses whose window is over make room first (not counted as forgotten)', async (t) => {
  const { port, metrics } = await start(t, { login_max_failures: 2, login_window: 1, login_max_addresses: 16 });
  const wrong = (from: string) => consoleRequest(port, 'GET', '/api/session', { headers: bearer('wrong-token-000000000'), from });
  for (let i = 1; i <= 16; i++) t.equal((await wrong(`127.0.2.${i}`)).status, 401);
  await new Promise((r) => setTimeout(r, 1200)); // the window (1 s) of all 16 is over
  for (let i = 1; i <= 16; i++) t.equal((await wrong(`127.0.3.${i}`)).status, 401);
  t.equal(await metricValue(metrics, 'console_login_evictions_total'), 0, 'the expired entries made room');
  t.equal((await wrong('127.0.3.16')).status, 429, 'the new ones are remembered');
});
