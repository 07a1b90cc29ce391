// test-modes: once (the benchmark's request pool, not a server behaviour)
// The benchmark's pre-signed request pool (bench/harness/wrk.ts), against a real server:
// every request is distinct and accepted as sent (200), the one for a channel reaches
// that channel's subscriber, and the pool file is what replay.lua reads. With wrk
// installed, a 1-second wrk run over the pool gets only 2xx answers; without it that
// part fails naming wrk (scripts/deps.sh, run by make test, installs it).

import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { findWrk, signedPublishes, startWrk, writePool } from '../../bench/harness/wrk';
import { APP, RawClient, startServer, type TestServer } from '../helpers/server';

/** Sends raw HTTP/1.1 requests one after another on one keep-alive connection; the status of each. */
function sendAll(port: number, reqs: Buffer[]): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host: '127.0.0.1', port });
    const statuses: number[] = [];
    let buf = Buffer.alloc(0);
    sock.on('error', reject);
    sock.on('connect', () => sock.write(reqs[0]));
    sock.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        const he = buf.indexOf('\r\n\r\n');
        if (he < 0) return;
        const head = buf.toString('latin1', 0, he);
        const len = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 'NaN');
        if (!Number.isFinite(len)) return reject(new Error(`no Content-Length in ${head}`));
        if (buf.length < he + 4 + len) return;
        statuses.push(Number(head.slice(9, 12)));
        buf = buf.subarray(he + 4 + len);
        if (statuses.length === reqs.length) {
          sock.end();
          return resolve(statuses);
        }
        sock.write(reqs[statuses.length]);
      }
    });
  });
}

/** The pool file read back the way replay.lua reads it. */
function readPool(file: string): Buffer[] {
  const data = fs.readFileSync(file);
  const out: Buffer[] = [];
  let pos = 0;
  while (pos < data.length) {
    const nl = data.indexOf(0x0a, pos);
    const len = Number(data.toString('latin1', pos, nl));
    out.push(data.subarray(nl + 1, nl + 1 + len));
    pos = nl + 1 + len;
  }
  return out;
}

let srv: TestServer;
t.before(async () => {
  srv = await startServer({ apps: [{ ...APP, max_client_events_per_second: 10_000_000 }] });
});
t.teardown(() => srv.stop());

const spec = (size: number) => ({
  host: '127.0.0.1', port: srv.port, appId: APP.id, key: APP.key, secret: APP.secret, event: 'bench',
  payloadBytes: 100, channelOf: (i: number) => `own0-${i % 20}`, size,
});

t.test('every pooled request is distinct, accepted, and delivered to its channel', async (t) => {
  const sub = srv.track(await RawClient.connect(srv.wsUrl()));
  sub.send({ event: 'pusher:subscribe', data: { channel: 'own0-7' } });
  await sub.next((f) => f.event === 'pusher_internal:subscription_succeeded', 5000);

  const reqs = signedPublishes(spec(40));
  t.equal(new Set(reqs.map((r) => r.toString('latin1'))).size, 40, 'no two requests are equal');
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ringcast-pool-')), 'pool.bin');
  writePool(file, reqs);
  const back = readPool(file);
  t.same(back.map((b) => b.toString('latin1')), reqs.map((r) => r.toString('latin1')), 'the pool file reads back as written');

  t.same(await sendAll(srv.port, back), reqs.map(() => 200), 'every request answered 200');
  // own0-7 is the channel of requests 7 and 27: both arrive, in order, with distinct data
  const a = await sub.next((f) => f.event === 'bench' && f.channel === 'own0-7', 5000);
  const b = await sub.next((f) => f.event === 'bench' && f.channel === 'own0-7' && f !== a, 5000);
  t.match(a.data, /^@0 7 x+$/);
  t.match(b.data, /^@0 27 x+$/);
  t.equal(a.data.length, b.data.length, 'the same payload length whatever the sequence number');
  fs.rmSync(path.dirname(file), { recursive: true, force: true });
});

const wrkBin = findWrk();
t.test('wrk replays the pool with only 2xx answers', async (t) => {
  // scripts/deps.sh (make test) installs it: its absence is a failure, not a skip
  if (wrkBin === null) return t.fail('wrk is not installed: run scripts/deps.sh (make deps) or apt-get install -y wrk');
  const bin = wrkBin;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ringcast-pool-'));
  const file = path.join(dir, 'pool.bin');
  writePool(file, signedPublishes(spec(200)));
  const r = await startWrk({ bin, url: `http://127.0.0.1:${srv.port}`, poolFile: file, threads: 1, conns: 2, durationS: 1 }).done;
  fs.rmSync(dir, { recursive: true, force: true });
  t.ok(r.requests > 100, `wrk completed ${r.requests} requests`);
  t.equal(r.status_errors, 0, 'no answer ≥ 400');
  t.equal(r.connect_errors + r.read_errors + r.write_errors + r.timeouts, 0, 'no socket error');
});
