import t, { type Test } from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Pusher from 'pusher';
import { apiStringToSign, forEachQueryPair, signApiQuery, TIMESTAMP_TOLERANCE_S, verifyAnyLayout, verifyApiRequest, type SignedRequest } from '../../src/protocol/api-auth';
import { verifySdkLayout } from '../../src/protocol/api-auth-fast';
import { hmacSha256Hex, md5Hex } from '../../src/protocol/hmac';

const KEY = '278d425bdf160c739803';
const SECRET = '7ad3773142a6692b25b8';
const lookup = (k: string): string | null => (k === KEY ? SECRET : null);
const NOW = 1353088179;
const BODY = '{"name":"foo","channels":["project-3"],"data":"{\\"some\\":\\"data\\"}"}';

function req(over: Partial<SignedRequest> & { query: string }): SignedRequest {
  return { method: 'POST', path: '/apps/3/events', authorization: null, body: Buffer.from(BODY), nowSeconds: NOW, ...over };
}
function expectFail(t: Test, r: ReturnType<typeof verifyApiRequest>, status: number, msg: RegExp): void {
  t.equal(r.ok, false);
  if (!r.ok) {
    t.equal(r.status, status);
    t.match(r.error, msg);
    t.notMatch(r.error, SECRET, 'never shows the secret');
  }
}

t.test('worked example from the Pusher REST API docs', async (t) => {
  t.equal(md5Hex(BODY), 'ec365a775a4cd0599faeb73354201b6f');
  const q = 'auth_key=278d425bdf160c739803&auth_timestamp=1353088179&auth_version=1.0'
    + '&body_md5=ec365a775a4cd0599faeb73354201b6f'
    + '&auth_signature=da454824c97ba181a32ccc17a72625ba02771f50b50e1e7430e47a1f3f457e6c';
  const r = verifyApiRequest(req({ query: q }), lookup);
  t.ok(r.ok);
  if (r.ok) {
    t.equal(r.authKey, KEY);
    t.equal(r.params.size, 0, 'params: only the non-auth parameters');
  }
  t.equal(signApiQuery(KEY, SECRET, 'POST', '/apps/3/events', {}, BODY, NOW), q, 'signApiQuery reproduces it');
  t.ok(verifyApiRequest(req({ query: q, method: 'post' }), lookup).ok, 'method is upper-cased');
});

t.test('matches the pusher SDK query signing', async (t) => {
  const sdk = new Pusher({ appId: '3', key: KEY, secret: SECRET, host: '127.0.0.1' });
  const params = { info: 'user_count,subscription_count', filter_by_prefix: 'presence-' };
  const q = sdk.createSignedQueryString({ method: 'GET', path: '/apps/3/channels', params });
  const r = verifyApiRequest(req({ method: 'GET', path: '/apps/3/channels', query: q, body: Buffer.alloc(0), nowSeconds: Math.floor(Date.now() / 1000) }), lookup);
  t.ok(r.ok, r.ok ? '' : r.error);
  if (r.ok) t.equal(r.params.get('filter_by_prefix'), 'presence-');
});

t.test('requests sent by the pusher SDK over HTTP are accepted', async (t) => {
  const seen: string[] = [];
  const server = http.createServer((rq, rs) => {
    const chunks: Buffer[] = [];
    rq.on('data', (c: Buffer) => chunks.push(c));
    rq.on('end', () => {
      const url = rq.url ?? '';
      const i = url.indexOf('?');
      const r = verifyApiRequest({
        method: rq.method ?? '', path: i < 0 ? url : url.slice(0, i), query: i < 0 ? '' : url.slice(i + 1),
        authorization: rq.headers.authorization ?? null, body: Buffer.concat(chunks), nowSeconds: Math.floor(Date.now() / 1000),
      }, (k) => (k === 'app-key' ? 'app-secret' : null));
      seen.push(`${rq.method} ${i < 0 ? url : url.slice(0, i)} ${r.ok ? 'ok' : r.error}`);
      rs.writeHead(r.ok ? 200 : r.status, { 'content-type': 'application/json' });
      rs.end(r.ok ? '{}' : JSON.stringify({ error: r.error }));
    });
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  t.teardown(() => server.close());
  const port = String((server.address() as AddressInfo).port);
  const sdk = new Pusher({ appId: '7', key: 'app-key', secret: 'app-secret', host: '127.0.0.1', port, useTLS: false });

  await sdk.trigger(['private-a', 'presence-b;c'], 'my-event', { text: 'héllo & "quotes" +plus' }, { socket_id: '1.2', info: 'subscription_count' });
  await sdk.triggerBatch([{ channel: 'a', name: 'e', data: 'x' }, { channel: 'cache-b', name: 'e', data: { y: 1 } }]);
  await sdk.sendToUser('u1', 'evt', { n: 1 });
  await sdk.terminateUserConnections('u1');
  await sdk.get({ path: '/channels', params: { filter_by_prefix: 'presence-', info: 'user_count' } });
  await sdk.get({ path: '/channels/presence-b/users' });
  await sdk.get({ path: '/channels/private-a', params: { info: 'subscription_count,cache' } });
  t.same(seen, [
    'POST /apps/7/events ok',
    'POST /apps/7/batch_events ok',
    'POST /apps/7/events ok',
    'POST /apps/7/users/u1/terminate_connections ok',
    'GET /apps/7/channels ok',
    'GET /apps/7/channels/presence-b/users ok',
    'GET /apps/7/channels/private-a ok',
  ]);

  const bad = new Pusher({ appId: '7', key: 'app-key', secret: 'wrong', host: '127.0.0.1', port, useTLS: false });
  const err = await bad.trigger('a', 'e', {}).then(() => null, (e: { status?: number }) => e);
  t.equal(err?.status, 401, 'wrong secret → 401');
  t.match(seen[seen.length - 1], /^POST \/apps\/7\/events Invalid signature: /);
});

t.test('missing parameters', async (t) => {
  const full = new URLSearchParams(signApiQuery(KEY, SECRET, 'POST', '/apps/3/events', {}, BODY, NOW));
  for (const [name, msg] of [
    ['auth_key', /^Missing auth_key$/], ['auth_signature', /^Missing auth_signature$/],
    ['auth_timestamp', /^Missing auth_timestamp$/], ['auth_version', /^Missing auth_version$/],
    ['body_md5', /^Missing body_md5/],
  ] as const) {
    const q = new URLSearchParams(full);
    q.delete(name);
    expectFail(t, verifyApiRequest(req({ query: q.toString() }), lookup), 401, msg);
    q.append(name, '');
    if (name !== 'body_md5') expectFail(t, verifyApiRequest(req({ query: q.toString() }), lookup), 401, msg);
  }
  expectFail(t, verifyApiRequest(req({ query: '' }), lookup), 401, /^Missing auth_key$/);
});

t.test('auth_version, timestamp, key', async (t) => {
  const sign = (extra: Record<string, string>, now = NOW) => {
    const q = new URLSearchParams(signApiQuery(KEY, SECRET, 'POST', '/apps/3/events', {}, BODY, now));
    for (const [k, v] of Object.entries(extra)) q.set(k, v);
    return q.toString();
  };
  expectFail(t, verifyApiRequest(req({ query: sign({ auth_version: '2.0' }) }), lookup), 401, /^Unsupported auth_version '2\.0'/);
  expectFail(t, verifyApiRequest(req({ query: sign({ auth_timestamp: 'soon' }) }), lookup), 401, /^Invalid auth_timestamp/);
  expectFail(t, verifyApiRequest(req({ query: sign({ auth_timestamp: '-5' }) }), lookup), 401, /^Invalid auth_timestamp/);
  expectFail(t, verifyApiRequest(req({ query: sign({}, NOW - 601) }), lookup), 401, /^Timestamp expired: .*601 s in the past/);
  expectFail(t, verifyApiRequest(req({ query: sign({}, NOW + 601) }), lookup), 401, /^Timestamp expired: .*601 s in the future/);
  t.ok(verifyApiRequest(req({ query: sign({}, NOW - 600) }), lookup).ok, '600 s old is fine');
  t.ok(verifyApiRequest(req({ query: sign({}, NOW + 600) }), lookup).ok, '600 s ahead is fine');
  const other = signApiQuery('other-key', SECRET, 'POST', '/apps/3/events', {}, BODY, NOW);
  expectFail(t, verifyApiRequest(req({ query: other }), lookup), 401, /^Unknown auth_key$/);
  expectFail(t, verifyApiRequest(req({ query: sign({ auth_key: 'other-key' }) }), lookup), 401, /^Unknown auth_key$/);
});

t.test('body_md5', async (t) => {
  const q = signApiQuery(KEY, SECRET, 'POST', '/apps/3/events', {}, BODY, NOW);
  expectFail(t, verifyApiRequest(req({ query: q, body: Buffer.from(BODY + ' ') }), lookup), 401, /^body_md5 does not match the body$/);
  expectFail(t, verifyApiRequest(req({ query: q, body: Buffer.alloc(0) }), lookup), 401, /^body_md5 does not match the body$/);
  const upper = q.replace(/body_md5=([0-9a-f]+)/, (_, h: string) => 'body_md5=' + h.toUpperCase());
  t.ok(verifyApiRequest(req({ query: upper }), lookup).ok === false, 'upper-case md5 passes the md5 check but is part of the signed string');
  const empty = signApiQuery(KEY, SECRET, 'POST', '/apps/3/events', {}, '', NOW);
  t.notMatch(empty, /body_md5/);
  t.ok(verifyApiRequest(req({ query: empty, body: Buffer.alloc(0) }), lookup).ok, 'no body, no body_md5');
  const bin = Buffer.from([0xff, 0x00, 0xfe]);
  t.ok(verifyApiRequest(req({ query: signApiQuery(KEY, SECRET, 'POST', '/apps/3/events', {}, bin, NOW), body: bin }), lookup).ok, 'raw bytes');
});

t.test('bad signatures', async (t) => {
  const q = signApiQuery(KEY, SECRET, 'POST', '/apps/3/events', { info: 'a' }, BODY, NOW);
  const r = verifyApiRequest(req({ query: q.replace('info=a', 'info=b') }), lookup);
  expectFail(t, r, 401, /^Invalid signature: expected .*"POST\\n\/apps\/3\/events\\nauth_key=278d425bdf160c739803&auth_timestamp=1353088179&auth_version=1.0&body_md5=ec365a775a4cd0599faeb73354201b6f&info=b"$/);
  expectFail(t, verifyApiRequest(req({ query: q, path: '/apps/4/events' }), lookup), 401, /^Invalid signature/);
  expectFail(t, verifyApiRequest(req({ query: q, method: 'GET' }), lookup), 401, /^Invalid signature/);
  expectFail(t, verifyApiRequest(req({ query: q + '&extra=1' }), lookup), 401, /^Invalid signature/);
  expectFail(t, verifyApiRequest(req({ query: q.replace(/auth_signature=[0-9a-f]+/, 'auth_signature=zz') }), lookup), 401, /^Invalid signature/);
  const upperSig = q.replace(/auth_signature=([0-9a-f]+)/, (_, h: string) => 'auth_signature=' + h.toUpperCase());
  t.ok(verifyApiRequest(req({ query: upperSig }), lookup).ok, 'hex case of the signature does not matter');
});

t.test('values with special characters are signed decoded; keys lowercased and sorted', async (t) => {
  const params = { filter_by_prefix: 'presence-a b&c=d+e/é#f%', Info: 'user_count,subscription_count' };
  const q = signApiQuery(KEY, SECRET, 'GET', '/apps/3/channels', params, '', NOW);
  const r = verifyApiRequest(req({ method: 'GET', path: '/apps/3/channels', query: q, body: Buffer.alloc(0) }), lookup);
  t.ok(r.ok, r.ok ? '' : r.error);
  if (r.ok) {
    t.equal(r.params.get('filter_by_prefix'), params.filter_by_prefix);
    t.equal(r.params.get('info'), params.Info);
  }
  // the same string to sign computed by hand
  const sts = 'GET\n/apps/3/channels\nauth_key=' + KEY + '&auth_timestamp=' + NOW + '&auth_version=1.0'
    + '&filter_by_prefix=presence-a b&c=d+e/é#f%&info=user_count,subscription_count';
  t.equal(new URLSearchParams(q).get('auth_signature'), hmacSha256Hex(SECRET, sts));
  t.equal(apiStringToSign('get', '/apps/3/channels', new URLSearchParams(q) as unknown as Map<string, string>), sts);
  t.same(r.ok ? [...r.params.keys()] : [], ['filter_by_prefix', 'info'], 'params: only the non-auth parameters');
  // upper-case keys on the wire are lowercased before signing
  const upperKeys = q.replace('auth_version=', 'AUTH_VERSION=');
  t.ok(verifyApiRequest(req({ method: 'GET', path: '/apps/3/channels', query: upperKeys, body: Buffer.alloc(0) }), lookup).ok);
  expectFail(t, verifyApiRequest(req({ method: 'GET', path: '/apps/3/channels', query: q + '&INFO=x', body: Buffer.alloc(0) }), lookup), 400, /^Duplicate query parameter 'info'$/);
});

t.test('percent-encoded path: signature over either form is accepted', async (t) => {
  const raw = '/apps/3/channels/foo%23cache-60';
  const decoded = '/apps/3/channels/foo#cache-60';
  const opts = { method: 'GET', path: raw, body: Buffer.alloc(0) };
  t.ok(verifyApiRequest(req({ ...opts, query: signApiQuery(KEY, SECRET, 'GET', raw, {}, '', NOW) }), lookup).ok);
  t.ok(verifyApiRequest(req({ ...opts, query: signApiQuery(KEY, SECRET, 'GET', decoded, {}, '', NOW) }), lookup).ok);
  expectFail(t, verifyApiRequest(req({ ...opts, path: '/apps/3/channels/%E0%A4%A', query: signApiQuery(KEY, SECRET, 'GET', decoded, {}, '', NOW) }), lookup), 401, /^Invalid signature/);
});

t.test('Authorization header form', async (t) => {
  const q = new URLSearchParams(signApiQuery(KEY, SECRET, 'POST', '/apps/3/events', {}, BODY, NOW));
  const sig = q.get('auth_signature')!;
  q.delete('auth_signature');
  const withKey = q.toString();
  t.ok(verifyApiRequest(req({ query: withKey, authorization: `${KEY}:${sig}` }), lookup).ok, 'auth_key in query and header');
  expectFail(t, verifyApiRequest(req({ query: withKey, authorization: `other:${sig}` }), lookup), 401, /^auth_key does not match/);
  expectFail(t, verifyApiRequest(req({ query: withKey, authorization: `Bearer ${sig}` }), lookup), 401, /^Malformed Authorization header/);
  expectFail(t, verifyApiRequest(req({ query: withKey, authorization: '' }), lookup), 401, /^Missing auth_signature$/);
  expectFail(t, verifyApiRequest(req({ query: withKey, authorization: `${KEY}:${'0'.repeat(64)}` }), lookup), 401, /^Invalid signature/);

  // key only in the header: the string to sign then has no auth_key
  q.delete('auth_key');
  const sts = apiStringToSign('POST', '/apps/3/events', new Map(q));
  const hsig = hmacSha256Hex(SECRET, sts);
  const r = verifyApiRequest(req({ query: q.toString(), authorization: `${KEY}:${hsig}` }), lookup);
  t.ok(r.ok);
  if (r.ok) t.equal(r.authKey, KEY);
  expectFail(t, verifyApiRequest(req({ query: q.toString() }), lookup), 401, /^Missing auth_key$/);
  // query signature wins over a header
  t.ok(verifyApiRequest(req({ query: signApiQuery(KEY, SECRET, 'POST', '/apps/3/events', {}, BODY, NOW), authorization: 'junk' }), lookup).ok);
});

t.test('signApiQuery refuses reserved parameters', async (t) => {
  t.throws(() => signApiQuery(KEY, SECRET, 'GET', '/x', { auth_key: 'k' }, '', NOW), /auth_key/);
  t.throws(() => signApiQuery(KEY, SECRET, 'GET', '/x', { BODY_MD5: 'k' }, '', NOW), /body_md5/);
  t.throws(() => signApiQuery(KEY, SECRET, 'GET', '/x', { a: '1', A: '2' }, '', NOW), /duplicate/);
});

/** Every pair forEachQueryPair gives, in order. */
function queryPairs(query: string): [string, string][] {
  const out: [string, string][] = [];
  forEachQueryPair(query, (k, v) => { out.push([k, v]); return true; });
  return out;
}

t.test('forEachQueryPair gives exactly what URLSearchParams gives', async (t) => {
  const fixed = ['', '&', '&&a=1&&', 'a', 'a=', '=b', '=', 'a=b=c', 'a=1&a=2', 'A=1&b', 'x=%41', 'x=a+b', 'x=%zz', 'k%3D=v',
    'auth_key=k&auth_timestamp=1&auth_version=1.0&body_md5=abc&auth_signature=def', 'a=1&', '&a=1', 'é=ü&ß'];
  // A fixed-seed generator over the characters that matter to the split (LCG: reproducible).
  let seed = 12345;
  const rnd = (n: number) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n; };
  const alphabet = ['a', 'B', '1', '=', '&', '%', '+', '%41', '%2', '.', '_', 'é', ' '];
  const random: string[] = [];
  for (let i = 0; i < 2000; i++) {
    let q = '';
    const len = rnd(12);
    for (let j = 0; j < len; j++) q += alphabet[rnd(alphabet.length)];
    random.push(q);
  }
  let mismatches = 0;
  for (const q of [...fixed, ...random]) {
    const want = [...new URLSearchParams(q)];
    const got = [...queryPairs(q)];
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      mismatches++;
      if (mismatches <= 5) t.fail(`query ${JSON.stringify(q)}: ${JSON.stringify(got)} ≠ ${JSON.stringify(want)}`);
    }
  }
  t.equal(mismatches, 0, `${fixed.length + random.length} queries, none differ`);
});

/** The SDK-layout shortcut alone (api-auth-fast.ts): null when it leaves the decision to the general check. */
function fastOnly(r: SignedRequest) {
  return verifySdkLayout(r.method, r.path, r.query, r.body, r.nowSeconds, TIMESTAMP_TOLERANCE_S, lookup);
}

/**
 * The SDK layout is checked on bytes by a shortcut (api-auth-fast.ts); every other
 * layout, and every refusal, by the general check. The shortcut must take the SDK layout
 * and never accept what the general check refuses: the same request signed the same way,
 * in many layouts, is accepted in each with the same params; spoiled, refused in each.
 */
t.test('every query layout decides alike: SDK-layout shortcut or general check', async (t) => {
  let seed = 777;
  const rnd = (n: number) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n; };
  const extras: Record<string, string>[] = [{}, { info: 'user_count' }, { filter_by_prefix: 'presence-', info: 'subscription_count,user_count' }, { a: '1', zz: 'x y' }, { b: 'é' }];
  const spoilers: ((q: string) => string)[] = [
    (q) => q.replace(/auth_timestamp=(\d)/, (_, d: string) => 'auth_timestamp=' + ((Number(d) + 1) % 10)),
    (q) => q + '&auth_key=' + KEY,
    (q) => q.replace(/&?auth_version=1\.0/i, ''),
    (q) => q.replace(/auth_version=1\.0/i, 'auth_version=1.1'),
    (q) => q.replace(/auth_signature=([0-9a-f])/, (_, h: string) => 'auth_signature=' + (h === '0' ? '1' : '0')),
    (q) => q.replace(/body_md5=([0-9a-f])/, (_, h: string) => 'body_md5=' + (h === '0' ? '1' : '0')),
    (q) => q.replace(/auth_key=[^&]*/i, 'auth_key=unknown'),
    (q) => q.replace(/auth_timestamp=\d+/i, 'auth_timestamp=' + (NOW - TIMESTAMP_TOLERANCE_S - 1)),
    (q) => q.replace(/auth_signature=[0-9a-f]+/, (m) => m.slice(0, -1)),
    (q) => q.replace(/auth_signature=[0-9a-f]+/, (m) => m.slice(0, -1) + 'g'),
  ];
  let fastTaken = 0;
  let failures = 0;
  const N = 600;
  for (let i = 0; i < N; i++) {
    const extra = extras[rnd(extras.length)];
    const body = rnd(3) === 0 ? '' : BODY;
    const signed = new URLSearchParams(signApiQuery(KEY, SECRET, 'POST', '/apps/3/events', extra, body, NOW));
    let pairs = [...signed];
    const layout = rnd(6);
    if (layout === 1) pairs = pairs.reverse(); // unsorted, signature first
    if (layout === 2) pairs = pairs.map(([k, v]) => [k === 'auth_version' ? 'AUTH_VERSION' : k, v]); // a key in capitals
    if (layout === 3) pairs.splice(1, 0, pairs.splice(pairs.length - 1, 1)[0]); // signature in the middle
    const encoded = layout === 4; // percent-encoded where URLSearchParams would
    const query = encoded ? new URLSearchParams(pairs).toString() : pairs.map(([k, v]) => k + '=' + v).join('&');
    const request = req({ query, body: Buffer.from(body) });
    const r = verifyApiRequest(request, lookup);
    const general = verifyAnyLayout(request, lookup);
    const fast = fastOnly(request);
    if (fast !== null) fastTaken++;
    const want = Object.entries(extra).sort().join();
    if (!r.ok || !general.ok || [...r.params].sort().join() !== want || [...general.params].sort().join() !== want) {
      failures++;
      t.fail(`layout ${layout}: ${query}: ${r.ok ? [...r.params].join() : r.error}`);
    }
    if ((layout === 0 || layout === 5) && !/[\u0080-\uffff]/.test(query) && fast === null) { failures++; t.fail(`SDK layout not taken by the shortcut: ${query}`); }
    const bad = spoilers[rnd(spoilers.length)](query);
    if (bad === query) continue;
    const spoiled = req({ query: bad, body: Buffer.from(body) });
    const rb = verifyApiRequest(spoiled, lookup);
    if (rb.ok || fastOnly(spoiled) !== null) { failures++; t.fail(`spoiled still accepted: ${bad}`); }
    const gb = verifyAnyLayout(spoiled, lookup);
    if (!rb.ok && !gb.ok && rb.error !== gb.error) { failures++; t.fail(`different wording: ${rb.error} / ${gb.error}`); }
  }
  t.equal(failures, 0, `${N} requests`);
  t.ok(fastTaken > N / 4, `the shortcut decided ${fastTaken} of ${N}`);

  // the shortcut's own edge cases
  const q = signApiQuery(KEY, SECRET, 'POST', '/apps/3/events', {}, BODY, NOW);
  t.ok(fastOnly(req({ query: q })), 'the SDK layout');
  t.ok(fastOnly(req({ query: q, method: 'post' })), 'method in lower case');
  t.equal(fastOnly(req({ query: q.replace('auth_key=', 'auth_key=' + KEY + '&auth_key=') })), null, 'a repeated key');
  expectFail(t, verifyApiRequest(req({ query: q.replace('auth_key=', 'auth_key=' + KEY + '&auth_key=') }), lookup), 400, /^Duplicate query parameter 'auth_key'$/);
  t.equal(fastOnly(req({ query: q + '&x' })), null, 'a pair after the signature');
  expectFail(t, verifyApiRequest(req({ query: q + '&x' }), lookup), 401, /^Invalid signature/);
  t.equal(fastOnly(req({ query: q.replace('&auth_signature=', '&&auth_signature=') })), null, 'an empty pair');
  t.ok(verifyApiRequest(req({ query: q.replace('&auth_signature=', '&&auth_signature=') }), lookup).ok, 'an empty pair is skipped, as URLSearchParams does');
  t.ok(fastOnly(req({ query: q.replace(/auth_signature=([0-9a-f]+)/, (_, h: string) => 'auth_signature=' + h.toUpperCase()) })), 'signature in capitals');
  t.equal(fastOnly(req({ query: q, body: Buffer.from(BODY + ' ') })), null, 'body changed');
  t.equal(fastOnly(req({ query: q, body: Buffer.alloc(0) })), null, 'body dropped');
  t.equal(fastOnly(req({ query: q, path: '/apps/3/event' })), null, 'another path');
  const longer = (n: number) => req({
    method: 'GET', path: '/apps/3/channels', body: Buffer.alloc(0),
    query: signApiQuery(KEY, SECRET, 'GET', '/apps/3/channels', { filter_by_prefix: 'p'.repeat(n) }, '', NOW),
  });
  t.ok(fastOnly(longer(300)), 'a string to sign of several blocks');
  t.equal(fastOnly(longer(5000)), null, 'a request line longer than the shortcut takes (4,096 characters)');
  t.ok(verifyApiRequest(longer(5000), lookup).ok, 'which the general check accepts');
  const bigBody = JSON.stringify({ name: 'e', channels: ['c'], data: 'd'.repeat(20000) });
  t.ok(fastOnly(req({ query: signApiQuery(KEY, SECRET, 'POST', '/apps/3/events', {}, bigBody, NOW), body: Buffer.from(bigBody) })), 'a large body');
});
