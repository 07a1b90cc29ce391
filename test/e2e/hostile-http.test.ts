// HTTP API before the body: the app, the per-IP window, the signature over the query
// (which commits to body_md5) and the app's bucket are decided from the request line and
// headers, so a refused request is answered while its client is still uploading — here
// it never finishes: the body is declared and only a first part is sent. And the shard's
// in-flight body budget (limits.http_body_bytes_in_flight) answers 503 beyond it.

import http from 'node:http';
import t from 'tap';
import { signApiQuery } from '../../src/protocol/api-auth';
import { hmacSha256Hex, md5Hex } from '../../src/protocol/hmac';
import { now, rawRequest, readResponse, signedGet, type RawResponse } from '../helpers/http';
import { APP, WORKERS, startServer } from '../helpers/server';

const LIM = { id: 'lim-id', key: 'lim-key', secret: 'lim-secret', max_client_events_per_second: 1 } as const;
const OFF = { id: 'off-id', key: 'off-key', secret: 'off-secret', enabled: false } as const;
const MiB = 1024 * 1024;

interface Upload {
  /** The answer, whenever it comes. */
  answer: Promise<RawResponse>;
  /** Sends the rest of the body. */
  finish(): void;
  destroy(): void;
}

/** A POST that declares `body` and sends only its first `sent` bytes until finish(). */
function upload(port: number, pathAndQuery: string, body: Buffer, sent: number, headers: Record<string, string> = {}): Upload {
  const req = http.request({
    host: '127.0.0.1', port, method: 'POST', path: pathAndQuery, agent: false,
    // keep-alive: a refusal is answered at once (with Connection: close, once the upload is read: http/body.ts)
    headers: { 'content-type': 'application/json', 'content-length': String(body.length), connection: 'keep-alive', ...headers },
  });
  const answer = new Promise<RawResponse>((resolve, reject) => {
    req.on('response', (res) => readResponse(res).then(resolve, reject));
    req.on('error', reject);
  });
  answer.catch(() => { /* read by the test, or destroyed */ });
  req.write(body.subarray(0, sent));
  return {
    answer,
    finish: () => req.end(body.subarray(sent)),
    destroy: () => req.destroy(),
  };
}

/** The answer within `ms`, or a failure saying the server waited for the body. */
async function answeredEarly(u: Upload, ms = 5000): Promise<RawResponse> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms: the server waits for the body`)), ms); });
  try {
    return await Promise.race([u.answer, late]);
  } finally {
    clearTimeout(timer);
    u.destroy();
  }
}

const event = (n: number) => Buffer.from(JSON.stringify({ name: 'e', channel: 'c', data: 'x'.repeat(n) }));

t.test(`refused before the body is read, workers: ${WORKERS}`, async (t) => {
  const srv = await startServer({ apps: [{ ...APP }, { ...LIM }, { ...OFF }] });
  t.teardown(() => srv.stop());
  const body = event(4 * MiB);
  const path = `/apps/${APP.id}/events`;
  const signed = (secret: string, b: Buffer | string = body) => `${path}?${signApiQuery(APP.key, secret, 'POST', path, {}, b, now())}`;
  const cases: [string, string, Record<string, string>, number, RegExp][] = [
    ['unknown app', `/apps/nope/events?${signApiQuery(APP.key, APP.secret, 'POST', '/apps/nope/events', {}, body, now())}`, {}, 404, /App nope not found/],
    ['no signature at all', path, {}, 401, /Missing auth_key/],
    ['signed with another secret', signed('not-the-secret'), {}, 401, /Invalid signature/],
    ['signed for an empty body (no body_md5)', signed(APP.secret, ''), {}, 401, /Missing body_md5/],
    ['a disabled app', `/apps/${OFF.id}/events?${signApiQuery(OFF.key, OFF.secret, 'POST', `/apps/${OFF.id}/events`, {}, body, now())}`, {}, 404, /disabled/],
  ];
  const q = `auth_key=${APP.key}&auth_timestamp=${now()}&auth_version=1.0&body_md5=${md5Hex(body)}`;
  cases.push(['Authorization header with a wrong signature', `${path}?${q}`, { authorization: `${APP.key}:${hmacSha256Hex('wrong', `POST\n${path}\n${q}`)}` }, 401, /Invalid signature/]);
  for (const [what, pq, headers, status, re] of cases) {
    const r = await answeredEarly(upload(srv.port, pq, body, 16 * 1024, headers));
    t.equal(r.status, status, `${what}: ${status} with 16 KiB of ${body.length} bytes sent`);
    t.match(r.json, { error: re }, `${what}: ${r.text}`);
  }

  // Connection: close: answered once the upload is read (and dropped), never a reset.
  const closing = upload(srv.port, signed('not-the-secret'), body, 16 * 1024, { connection: 'close' });
  const early = await Promise.race([closing.answer.then(() => 'answered'), new Promise((r) => setTimeout(() => r('waiting'), 300))]);
  t.equal(early, 'waiting', 'Connection: close: no answer while the upload goes on');
  closing.finish();
  const late = await closing.answer;
  t.equal(late.status, 401, 'Connection: close: 401 once the body is in');

  // The app's bucket (1 request a second): spent by a GET, the POST is refused unread.
  const limPath = `/apps/${LIM.id}/events`;
  t.equal((await signedGet(srv.port, LIM, 'channels')).status, 200, 'the bucket spent');
  const r = await answeredEarly(upload(srv.port, `${limPath}?${signApiQuery(LIM.key, LIM.secret, 'POST', limPath, {}, body, now())}`, body, 16 * 1024));
  t.equal(r.status, 429, `over the app bucket: 429 before the body (${r.text})`);
  t.match(r.headers['retry-after'], /^\d+$/);

  // What is admitted still works, in both forms: query signature and Authorization header.
  const small = event(100);
  t.equal((await rawRequest(srv.port, 'POST', signed(APP.secret, small), small)).status, 200, 'a signed publish');
  const q2 = `auth_key=${APP.key}&auth_timestamp=${now()}&auth_version=1.0&body_md5=${md5Hex(small)}`;
  const viaHeader = await rawRequest(srv.port, 'POST', `${path}?${q2}`, small, { authorization: `${APP.key}:${hmacSha256Hex(APP.secret, `POST\n${path}\n${q2}`)}` });
  t.equal(viaHeader.status, 200, `Authorization header form (${viaHeader.text})`);
  const other = Buffer.from(JSON.stringify({ name: 'e', channel: 'c', data: 'y' }));
  const mismatch = await rawRequest(srv.port, 'POST', signed(APP.secret, small), other);
  t.equal(mismatch.status, 401, 'a body that does not match the signed body_md5 (checked once read)');
  t.match(mismatch.json, { error: /body_md5 does not match the body/ });
});

t.test(`in-flight body budget, workers: ${WORKERS}`, async (t) => {
  // event data up to 1 MiB, so that an admitted upload is published (200)
  const srv = await startServer({ http: { request_limit_in_mb: 1 }, limits: { http_body_bytes_in_flight: 1.5 * MiB }, apps: [{ ...APP, max_event_payload_in_kb: 1024 }] });
  t.teardown(() => srv.stop());
  const path = `/apps/${APP.id}/events`;
  const body = event(MiB - 200);
  // One more upload than shards: some shard gets two, and 1.5 MiB holds only one of them.
  const uploads: Upload[] = [];
  for (let i = 0; i <= WORKERS; i++) uploads.push(upload(srv.port, `${path}?${signApiQuery(APP.key, APP.secret, 'POST', path, {}, body, now())}`, body, 64 * 1024));
  const first = await Promise.race(uploads.map((u, i) => u.answer.then((r) => ({ r, i }))));
  t.equal(first.r.status, 503, `an upload past the budget: 503 before its body (${first.r.text})`);
  t.match(first.r.json, { error: /limits\.http_body_bytes_in_flight/ });
  t.equal(first.r.headers['retry-after'], '1');
  for (const u of uploads) u.finish();
  const all = await Promise.all(uploads.map((u) => u.answer));
  const statuses = all.map((r) => r.status);
  t.ok(statuses.every((s) => s === 200 || s === 503), `only 200 and 503: ${statuses}`);
  t.ok(statuses.includes(200), 'the admitted uploads are published');
  // The budget is given back: one after the other, each is admitted.
  for (let i = 0; i < 3; i++) {
    const u = upload(srv.port, `${path}?${signApiQuery(APP.key, APP.secret, 'POST', path, {}, body, now())}`, body, body.length);
    u.finish();
    t.equal((await u.answer).status, 200, `sequential upload #${i + 1}`);
  }
});
