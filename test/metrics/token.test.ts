// test-modes: once (the /metrics listener and its token check are the primary's)
// metrics.token: with a token set, GET /metrics without `Authorization: Bearer <token>`
// is answered 401 with a body naming what was wrong (nothing is collected); with the
// token, 200 and the metrics. Without a token /metrics stays open. METRICS_TOKEN sets it.
// metrics.host defaults to 127.0.0.1; a wildcard host without a token is refused at startup.
// Runs with RINGCAST_TEST_WORKERS=1 and =4.

import http from 'node:http';
import { networkInterfaces } from 'node:os';
import t from 'tap';
import { loadConfig } from '../../src/config';
import { APP, RawClient, startServer } from '../helpers/server';

const TOKEN = 'scrape-me-0123456789';

function get(port: number, headers: Record<string, string> = {}): Promise<{ status: number; text: string; auth: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/metrics', headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, text: Buffer.concat(chunks).toString('utf8'), auth: res.headers['www-authenticate'] }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(5000, () => req.destroy(new Error('GET /metrics timed out')));
    req.end();
  });
}

t.test('METRICS_TOKEN sets metrics.token; default empty', async (t) => {
  const apps = [{ ...APP }];
  t.equal(loadConfig({ env: {}, overrides: { apps } }).metrics.token, '');
  t.equal(loadConfig({ env: { METRICS_TOKEN: TOKEN }, overrides: { apps } }).metrics.token, TOKEN);
});

t.test('with metrics.token, /metrics needs the bearer token', async (t) => {
  const srv = await startServer({ metrics: { enabled: true, port: 0, host: '127.0.0.1', token: TOKEN } });
  t.teardown(() => srv.stop());
  srv.track(await RawClient.connect(srv.wsUrl()));
  const port = srv.server.metricsPort!;

  const none = await get(port);
  t.equal(none.status, 401, 'no Authorization header');
  t.match(none.text, /missing Authorization header/);
  t.equal(none.auth, 'Bearer realm="metrics"');
  t.notMatch(none.text, /ringcast_/, 'no metric in a refusal');

  const wrong = await get(port, { authorization: `Bearer ${TOKEN}x` });
  t.equal(wrong.status, 401, 'wrong token');
  t.match(wrong.text, /wrong bearer token/);

  const shorter = await get(port, { authorization: `Bearer ${TOKEN.slice(0, -1)}` });
  t.equal(shorter.status, 401, 'a prefix of the token');

  const basic = await get(port, { authorization: `Basic ${Buffer.from(`u:${TOKEN}`).toString('base64')}` });
  t.equal(basic.status, 401, 'another scheme');
  t.match(basic.text, /not `Bearer <token>`/);

  const ok = await get(port, { authorization: `Bearer ${TOKEN}` });
  t.equal(ok.status, 200, 'the token');
  t.match(ok.text, new RegExp(`ringcast_connections_active\\{app_id="${APP.id}"\\} 1`));
  // Prometheus writes the scheme as configured (`type: Bearer`); the scheme is case-insensitive (RFC 7235)
  t.equal((await get(port, { authorization: `bearer ${TOKEN}` })).status, 200, 'scheme in lower case');
});

t.test('without metrics.token, /metrics is open', async (t) => {
  const srv = await startServer({ metrics: { enabled: true, port: 0, host: '127.0.0.1' } });
  t.teardown(() => srv.stop());
  const r = await get(srv.server.metricsPort!);
  t.equal(r.status, 200);
  t.match(r.text, /ringcast_connections_active/);
});

t.test('metrics.host is loopback by default; a wildcard host needs metrics.token', async (t) => {
  const apps = [{ ...APP }];
  t.equal(loadConfig({ env: {}, overrides: { apps } }).metrics.host, '127.0.0.1');
  for (const host of ['0.0.0.0', '::']) {
    t.throws(() => loadConfig({ env: {}, overrides: { apps, metrics: { enabled: true, host } } }),
      /metrics\.host.*wildcard address: \/metrics would be open on every interface without a token; set metrics\.token/, `${host} without a token is refused`);
    t.equal(loadConfig({ env: {}, overrides: { apps, metrics: { enabled: true, host, token: TOKEN } } }).metrics.host, host, `${host} with a token`);
  }
  t.equal(loadConfig({ env: { METRICS_HOST: '0.0.0.0' }, overrides: { apps } }).metrics.host, '0.0.0.0', 'metrics off: no listener, nothing refused');

  // the default listener answers on loopback, and on no other interface
  const srv = await startServer({ metrics: { enabled: true, port: 0 } });
  t.teardown(() => srv.stop());
  const port = srv.server.metricsPort!;
  t.equal((await get(port)).status, 200, 'loopback scrape');
  const other = Object.values(networkInterfaces()).flat().find((i) => i !== undefined && i.family === 'IPv4' && !i.internal);
  if (other === undefined) return;
  await t.rejects(getFrom(other.address, port), { code: 'ECONNREFUSED' }, `not on ${other.address}`);
});

function getFrom(host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host, port, path: '/metrics', agent: false }, (res) => { res.resume(); resolve(res.statusCode!); });
    req.on('error', reject);
    req.end();
  });
}
