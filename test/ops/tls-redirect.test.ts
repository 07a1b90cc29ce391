// test-modes: once (the redirect listener is the primary's)
// ssl.redirect_http: HTTPS (and wss) on the main port, and a plain HTTP listener on
// ssl.http_port answering 301 to the same host, path and query on https. A self-signed
// certificate is made for the test (openssl); the `pusher` SDK verifies it (its CA given
// to an https.Agent), pusher-js (faye-websocket, no TLS options) connects over wss with
// verification off for that connection only.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import Pusher from 'pusher';
import PusherJS from 'pusher-js';
import t, { type Test } from 'tap';
import { redirectLocation } from '../../src/listeners/redirect';
import { APP, startServer, type TestServer } from '../helpers/server';

function selfSigned(t: Test): { cert: string; key: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-redirect-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const cert = path.join(dir, 'cert.pem');
  const key = path.join(dir, 'key.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert,
    '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'], { stdio: 'ignore' });
  return { cert, key };
}

/** One plain HTTP request to the redirect listener; the Host header as given (none: omitted, HTTP/1.0). */
function plain(port: number, method: string, target: string, host: string | null): Promise<{ status: number; location: string | undefined }> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => {
      s.write(`${method} ${target} HTTP/1.${host === null ? 0 : 1}\r\n${host === null ? '' : `Host: ${host}\r\n`}Connection: close\r\n\r\n`);
    });
    let text = '';
    s.on('data', (b: Buffer) => { text += b.toString(); });
    s.on('error', reject);
    s.on('end', () => {
      const status = Number(/^HTTP\/1\.\d (\d{3})/.exec(text)?.[1]);
      resolve({ status, location: /\r\nlocation: ([^\r]*)\r\n/i.exec(text)?.[1] });
    });
  });
}

async function tlsServer(t: Test): Promise<{ srv: TestServer; ca: string }> {
  const { cert, key } = selfSigned(t);
  const srv = await startServer({
    domain: 'ringcast.example',
    ssl: { enabled: true, cert_path: cert, key_path: key, redirect_http: true, http_port: 0 },
  });
  t.teardown(() => srv.stop());
  return { srv, ca: readFileSync(cert, 'utf8') };
}

t.test('the redirect listener answers 301 to https, same host, path and query', async (t) => {
  const { srv, ca } = await tlsServer(t);
  const rport = srv.server.redirectPort!;
  t.type(rport, 'number', 'the redirect listener runs');
  t.not(rport, srv.port);

  const get = await plain(rport, 'GET', '/apps/app-id/channels?filter_by_prefix=presence-&info=user_count', `myhost.test:${rport}`);
  t.equal(get.status, 301);
  t.equal(get.location, `https://myhost.test:${srv.port}/apps/app-id/channels?filter_by_prefix=presence-&info=user_count`,
    'Host header host, the HTTPS port, path and query kept');
  const post = await plain(rport, 'POST', '/apps/app-id/events?auth_key=k', '127.0.0.1');
  t.same(post, { status: 301, location: `https://127.0.0.1:${srv.port}/apps/app-id/events?auth_key=k` }, 'any method');
  const noHost = await plain(rport, 'GET', '/up', null);
  t.same(noHost, { status: 301, location: `https://ringcast.example:${srv.port}/up` }, 'no Host header: domain');
  const ws = await plain(rport, 'GET', `/app/${APP.key}?protocol=7`, 'localhost');
  t.equal(ws.location, `https://localhost:${srv.port}/app/${APP.key}?protocol=7`, 'the WebSocket path too');

  // Following the Location reaches the HTTPS server (certificate verified).
  const up = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    https.get(`https://127.0.0.1:${srv.port}/up`, { ca, agent: false }, (res) => {
      let body = '';
      res.on('data', (b: Buffer) => { body += b.toString(); });
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    }).on('error', reject);
  });
  t.equal(up.status, 200);
  t.match(JSON.parse(up.body), { status: 'ok' });

  const plainToTls = await new Promise<NodeJS.ErrnoException | number>((resolve) => {
    http.get({ host: '127.0.0.1', port: srv.port, path: '/up', agent: false }, (res) => resolve(res.statusCode!))
      .on('error', (err) => resolve(err));
  });
  t.not(plainToTls, 200, 'the main port speaks TLS only');
});

t.test('redirectLocation: a Host that is not a host[:port] is not echoed', async (t) => {
  t.equal(redirectLocation('evil.test/path', '/x', 'd.example', 6001), 'https://d.example:6001/x');
  t.equal(redirectLocation('user@evil.test', '/x', 'd.example', 6001), 'https://d.example:6001/x');
  t.equal(redirectLocation('[::1]:80', '/x?a=1', 'd.example', 6001), 'https://[::1]:6001/x?a=1');
  t.equal(redirectLocation('a.test', '/x', 'd.example', 443), 'https://a.test/x', 'the default https port is left out');
  t.equal(redirectLocation('a.test', 'http://a.test/x', 'd.example', 443), 'https://a.test/', 'absolute-form targets go to /');
});

t.test('pusher-js over wss receives an event the SDK publishes over https', async (t) => {
  const { srv, ca } = await tlsServer(t);
  const sdk = new Pusher({
    appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1', port: String(srv.port), useTLS: true,
    agent: new https.Agent({ ca, keepAlive: false }),
  });
  // faye-websocket (pusher-js's Node transport) takes no CA: verification off for this connection only.
  const saved = process.env.NODE_TLS_REJECT_UNAUTHORIZED;
  process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
  const client = new PusherJS(APP.key, {
    cluster: 'mt1', wsHost: '127.0.0.1', wssPort: srv.port, forceTLS: true, enabledTransports: ['ws'], disableStats: true,
  });
  srv.track(client);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not connected: ${client.connection.state}`)), 10_000);
    client.connection.bind('connected', () => { clearTimeout(timer); resolve(); });
  });
  if (saved === undefined) delete process.env.NODE_TLS_REJECT_UNAUTHORIZED;
  else process.env.NODE_TLS_REJECT_UNAUTHORIZED = saved;
  const channel = client.subscribe('tls-news');
  await new Promise<void>((resolve) => channel.bind('pusher:subscription_succeeded', () => resolve()));
  const got = new Promise<unknown>((resolve) => channel.bind('headline', resolve));
  const res = await sdk.trigger('tls-news', 'headline', { text: 'over TLS' });
  t.equal(res.status, 200, 'the SDK published over https');
  t.same(await got, { text: 'over TLS' }, 'pusher-js got it over wss');
});

t.test('ssl.redirect_http without ssl.enabled is refused, naming the key', async (t) => {
  await t.rejects(startServer({ ssl: { redirect_http: true, http_port: 0 } }),
    { code: 'RC_ERR_CONFIG', message: /ssl\.redirect_http needs ssl\.enabled: true/ });
});
