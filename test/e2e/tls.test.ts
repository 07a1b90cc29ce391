// test-modes: once (TLS is terminated by each shard's listener, the same code on every shard)
// TLS: ssl.enabled serves wss:// and https:// from the same port with the given PEM files.
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { RawClient, startServer } from '../helpers/server';

function selfSigned(): { cert: string; key: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-tls-'));
  const cert = path.join(dir, 'cert.pem');
  const key = path.join(dir, 'key.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert,
    '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  return { cert, key };
}

function getJson(port: number, p: string): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    https.get({ host: '127.0.0.1', port, path: p, rejectUnauthorized: false, agent: false }, (res) => {
      let s = '';
      res.on('data', (c) => (s += c));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(s) }));
    }).on('error', reject);
  });
}

t.test('ssl.enabled serves wss and https', async (t) => {
  const { cert, key } = selfSigned();
  const srv = await startServer({ ssl: { enabled: true, cert_path: cert, key_path: key } });
  const up = await getJson(srv.port, '/up');
  t.equal(up.status, 200);
  t.equal(up.body.status, 'ok');
  const c = await RawClient.connect(srv.wsUrl().replace('ws://', 'wss://'), { rejectUnauthorized: false });
  t.match(c.socketId, /^\d+\.\d+$/);
  const ok = await c.subscribe('public-tls');
  t.equal(ok.event, 'pusher_internal:subscription_succeeded');
  await c.close();
  await srv.stop();
});

t.test('ssl.enabled with a missing key file is a config error naming the key', async (t) => {
  await t.rejects(startServer({ ssl: { enabled: true, cert_path: '/nonexistent/cert.pem', key_path: '/nonexistent/key.pem' } }),
    { code: 'RC_ERR_CONFIG', key: /ssl\.(cert|key)_path/ });
});
