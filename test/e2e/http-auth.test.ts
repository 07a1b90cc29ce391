// test-modes: once (the shard that reads a request checks its signature, the same code on every shard)
// Signed HTTP API requests, against the protocol "HTTP API" and the spec's
// Authentication (HTTP API) and Errors sections.

import t from 'tap';
import { apiStringToSign, signApiQuery } from '../../src/protocol/api-auth';
import { hmacSha256Hex, md5Hex } from '../../src/protocol/hmac';
import { isJsonError, now, rawRequest, type RawResponse } from '../helpers/http';
import { APP, startServer, type TestServer } from '../helpers/server';

const OTHER = { id: 'other-id', key: 'other-key', secret: 'other-secret' } as const;
const OFF = { id: 'off-id', key: 'off-key', secret: 'off-secret', enabled: false } as const;
/** Per-request timeout of this file's raw requests. */
const TIMEOUT_MS = 5000;

/** Asserts a JSON error body {"error": "<message>"} with that status, the message matching `re`, no stack trace and no secret. */
function isError(t: tap.Test, r: RawResponse, status: number, re: RegExp, what: string): void {
  isJsonError(t, r, status, re, what);
  t.notMatch(r.text, /\n\s+at /, `${what}: no stack trace`);
  t.notMatch(r.text, new RegExp(`${APP.secret}|${OTHER.secret}`), `${what}: no secret in the answer`);
}

const EVENT = JSON.stringify({ name: 'e', channel: 'auth-test', data: 'd' });

t.test('HTTP API authentication', async (t) => {
  const srv: TestServer = await startServer({ apps: [{ ...APP }, { ...OTHER }, { ...OFF }] });
  t.teardown(() => srv.stop());
  const port = srv.port;
  const channelsPath = `/apps/${APP.id}/channels`;
  const eventsPath = `/apps/${APP.id}/events`;
  const get = (pathAndQuery: string, headers?: Record<string, string>) => rawRequest(port, 'GET', pathAndQuery, undefined, headers, TIMEOUT_MS);
  const post = (pathAndQuery: string, body: string, headers?: Record<string, string>) => rawRequest(port, 'POST', pathAndQuery, body, headers, TIMEOUT_MS);

  t.test('query form: accepted from the pusher SDK and from signApiQuery', async (t) => {
    const res = await srv.sdk().get({ path: '/channels', params: {} });
    t.equal(res.status, 200);
    t.same(await res.json(), { channels: {} });
    const trig = await srv.sdk().trigger('auth-test', 'e', { x: 1 });
    t.equal(trig.status, 200);
    const batch = await srv.sdk().triggerBatch([{ channel: 'auth-test', name: 'e', data: 'd' }]);
    t.equal(batch.status, 200);

    const r = await get(`${channelsPath}?${signApiQuery(APP.key, APP.secret, 'GET', channelsPath, { filter_by_prefix: 'presence-' }, '', now())}`);
    t.same({ status: r.status, body: r.json }, { status: 200, body: { channels: {} } }, 'GET with an extra parameter');
    const p = await post(`${eventsPath}?${signApiQuery(APP.key, APP.secret, 'POST', eventsPath, {}, EVENT, now())}`, EVENT);
    t.same({ status: p.status, body: p.json }, { status: 200, body: { ok: true } }, 'POST with body_md5');
    const other = await srv.sdk(OTHER).get({ path: '/channels', params: {} });
    t.equal(other.status, 200, 'the second app with its own credentials');
  });

  t.test('Authorization: <key>:<signature> header form', async (t) => {
    // Signed query without auth_signature; the signature goes in the header.
    const split = (q: string) => {
      const i = q.indexOf('&auth_signature=');
      return { query: q.slice(0, i), signature: q.slice(i + '&auth_signature='.length) };
    };
    const g = split(signApiQuery(APP.key, APP.secret, 'GET', channelsPath, {}, '', now()));
    const r = await get(`${channelsPath}?${g.query}`, { authorization: `${APP.key}:${g.signature}` });
    t.same({ status: r.status, body: r.json }, { status: 200, body: { channels: {} } }, 'GET, auth_key also in the query');

    const p = split(signApiQuery(APP.key, APP.secret, 'POST', eventsPath, {}, EVENT, now()));
    const rp = await post(`${eventsPath}?${p.query}`, EVENT, { authorization: `${APP.key}:${p.signature}` });
    t.same({ status: rp.status, body: rp.json }, { status: 200, body: { ok: true } }, 'POST with body_md5 in the query');

    // auth_key only in the header: the signature covers the remaining parameters.
    const params = new Map([['auth_timestamp', String(now())], ['auth_version', '1.0']]);
    const sig = hmacSha256Hex(APP.secret, apiStringToSign('GET', channelsPath, params));
    const r2 = await get(`${channelsPath}?auth_timestamp=${params.get('auth_timestamp')}&auth_version=1.0`, { authorization: `${APP.key}:${sig}` });
    t.same({ status: r2.status, body: r2.json }, { status: 200, body: { channels: {} } }, 'auth_key only in the header');

    isError(t, await get(`${channelsPath}?${g.query}`, { authorization: `${APP.key}:${'0'.repeat(64)}` }), 401, /signature/i, 'wrong signature in the header');
    isError(t, await get(`${channelsPath}?${g.query}`, { authorization: 'garbage' }), 401, /Authorization/, 'malformed header');
    isError(t, await get(`${channelsPath}?${g.query}`, { authorization: `${OTHER.key}:${g.signature}` }), 401, /auth_key/, 'header key differs from auth_key');
  });

  t.test('missing auth parameters → 401', async (t) => {
    isError(t, await get(channelsPath), 401, /auth_key|auth_signature/, 'no query at all');
    const full = new URLSearchParams(signApiQuery(APP.key, APP.secret, 'GET', channelsPath, {}, '', now()));
    for (const drop of ['auth_key', 'auth_signature', 'auth_timestamp', 'auth_version']) {
      const q = new URLSearchParams(full);
      q.delete(drop);
      isError(t, await get(`${channelsPath}?${q}`), 401, new RegExp(drop), `without ${drop}`);
    }
    isError(t, await post(eventsPath, EVENT), 401, /auth_/, 'POST without any auth');
  });

  t.test('wrong signature → 401', async (t) => {
    const q = signApiQuery(APP.key, APP.secret, 'GET', channelsPath, {}, '', now());
    const flipped = q.replace(/auth_signature=([0-9a-f])/, (_, c: string) => `auth_signature=${c === '0' ? '1' : '0'}`);
    isError(t, await get(`${channelsPath}?${flipped}`), 401, /signature/i, 'one hex digit changed');
    isError(t, await get(`${channelsPath}?${signApiQuery(APP.key, 'not-the-secret', 'GET', channelsPath, {}, '', now())}`), 401, /signature/i, 'signed with another secret');
    isError(t, await get(`${channelsPath}?${signApiQuery(APP.key, APP.secret, 'POST', channelsPath, {}, '', now())}`), 401, /signature/i, 'signed for another method');
    isError(t, await get(`${channelsPath}?${signApiQuery(APP.key, APP.secret, 'GET', '/apps/app-id/channels/x', {}, '', now())}`), 401, /signature/i, 'signed for another path');
    const signedParams = signApiQuery(APP.key, APP.secret, 'GET', channelsPath, { filter_by_prefix: 'a' }, '', now());
    isError(t, await get(`${channelsPath}?${signedParams.replace('filter_by_prefix=a', 'filter_by_prefix=b')}`), 401, /signature/i, 'a signed parameter changed');
    isError(t, await get(`${channelsPath}?${q}&info=user_count`), 401, /signature/i, 'an unsigned parameter added');
    isError(t, await get(`${channelsPath}?${signApiQuery('no-such-key', APP.secret, 'GET', channelsPath, {}, '', now())}`), 401, /auth_key/, 'unknown auth_key');
    const v2 = signApiQuery(APP.key, APP.secret, 'GET', channelsPath, {}, '', now()).replace('auth_version=1.0', 'auth_version=2.0');
    isError(t, await get(`${channelsPath}?${v2}`), 401, /auth_version/, 'auth_version other than 1.0');
  });

  t.test('auth_timestamp must be within 600 s', async (t) => {
    const at = (ts: number) => get(`${channelsPath}?${signApiQuery(APP.key, APP.secret, 'GET', channelsPath, {}, '', ts)}`);
    isError(t, await at(now() - 601), 401, /[Tt]imestamp/, '601 s old');
    // +602, not +601: a second boundary passing between signing and checking would make
    // +601 read as +600 (accepted) on the server.
    isError(t, await at(now() + 602), 401, /[Tt]imestamp/, '602 s in the future');
    isError(t, await at(now() - 3600), 401, /[Tt]imestamp/, 'an hour old');
    const old = await at(now() - 599);
    t.same({ status: old.status, body: old.json }, { status: 200, body: { channels: {} } }, '599 s old is accepted');
    const ahead = await at(now() + 598);
    t.same({ status: ahead.status, body: ahead.json }, { status: 200, body: { channels: {} } }, '598 s ahead is accepted');
    const q = signApiQuery(APP.key, APP.secret, 'GET', channelsPath, {}, '', now()).replace(/auth_timestamp=\d+/, 'auth_timestamp=soon');
    isError(t, await get(`${channelsPath}?${q}`), 401, /auth_timestamp/, 'not a number');
  });

  t.test('body_md5', async (t) => {
    const other = JSON.stringify({ name: 'e', channel: 'auth-test', data: 'other' });
    // Signed over another body: body_md5 (and signature) match `other`, not what is sent.
    isError(t, await post(`${eventsPath}?${signApiQuery(APP.key, APP.secret, 'POST', eventsPath, {}, other, now())}`, EVENT), 401, /body_md5/, 'body_md5 of another body');
    // Correctly signed, but without body_md5 (signed as if the body were empty).
    isError(t, await post(`${eventsPath}?${signApiQuery(APP.key, APP.secret, 'POST', eventsPath, {}, '', now())}`, EVENT), 401, /body_md5/, 'POST with a body but no body_md5');
    // body_md5 of the empty body on a POST with a body.
    const emptyMd5 = signApiQuery(APP.key, APP.secret, 'POST', eventsPath, {}, '', now());
    const q = new URLSearchParams(emptyMd5);
    const sigless = new Map([...q].filter(([k]) => k !== 'auth_signature'));
    sigless.set('body_md5', md5Hex(''));
    const sig = hmacSha256Hex(APP.secret, apiStringToSign('POST', eventsPath, sigless));
    const qs = [...sigless].map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join('&') + `&auth_signature=${sig}`;
    isError(t, await post(`${eventsPath}?${qs}`, EVENT), 401, /body_md5/, 'body_md5 of an empty body');
    const ok = await post(`${eventsPath}?${signApiQuery(APP.key, APP.secret, 'POST', eventsPath, {}, EVENT, now())}`, EVENT);
    t.same({ status: ok.status, body: ok.json }, { status: 200, body: { ok: true } }, 'matching body_md5 is accepted');
  });

  t.test('auth_key of another app → 401', async (t) => {
    // OTHER's key and secret, a valid signature, but the path names APP.
    isError(t, await get(`${channelsPath}?${signApiQuery(OTHER.key, OTHER.secret, 'GET', channelsPath, {}, '', now())}`), 401, /auth_key|app/, 'GET');
    isError(t, await post(`${eventsPath}?${signApiQuery(OTHER.key, OTHER.secret, 'POST', eventsPath, {}, EVENT, now())}`, EVENT), 401, /auth_key|app/, 'POST');
    // APP's key with OTHER's secret: the secret of the key's app decides.
    isError(t, await get(`${channelsPath}?${signApiQuery(APP.key, OTHER.secret, 'GET', channelsPath, {}, '', now())}`), 401, /signature/i, 'key of one app, secret of another');
  });

  t.test('unknown app id in the path → 404; disabled app → 404 once authenticated', async (t) => {
    const path = '/apps/no-such-app/channels';
    isError(t, await get(`${path}?${signApiQuery(APP.key, APP.secret, 'GET', path, {}, '', now())}`), 404, /no-such-app/, 'unknown app (GET)');
    const ep = '/apps/no-such-app/events';
    isError(t, await post(`${ep}?${signApiQuery(APP.key, APP.secret, 'POST', ep, {}, EVENT, now())}`, EVENT), 404, /no-such-app/, 'unknown app (POST)');
    isError(t, await get(path), 404, /no-such-app/, 'unknown app without auth');

    // Documented choice (README, HTTP API): the spec's statuses have no 403; a disabled app
    // answers 404 once the request is authenticated (before that, 401 as for any app).
    const off = `/apps/${OFF.id}/channels`;
    isError(t, await get(`${off}?${signApiQuery(OFF.key, OFF.secret, 'GET', off, {}, '', now())}`), 404, /disabled/, 'disabled app, signed');
    const offEv = `/apps/${OFF.id}/events`;
    isError(t, await post(`${offEv}?${signApiQuery(OFF.key, OFF.secret, 'POST', offEv, {}, EVENT, now())}`, EVENT), 404, /disabled/, 'disabled app, publish');
    isError(t, await get(`${off}?${signApiQuery(OFF.key, 'wrong', 'GET', off, {}, '', now())}`), 401, /signature/i, 'disabled app, bad signature is still 401');
    isError(t, await get(off), 401, /auth/i, 'disabled app, unsigned: 401 (nothing said about the app)');
    const sdkErr = await srv.sdk(OFF).trigger('c', 'e', 'd').then(() => null, (e: { status?: number }) => e);
    t.equal(sdkErr?.status, 404, 'the SDK sees 404');
    const sdkBatch = await srv.sdk(OFF).triggerBatch([{ channel: 'c', name: 'e', data: 'd' }]).then(() => null, (e: { status?: number }) => e);
    t.equal(sdkBatch?.status, 404, 'batch_events: 404');
    const sdkGet = await srv.sdk(OFF).get({ path: '/channels/c/users' }).then(() => null, (e: { status?: number }) => e);
    t.equal(sdkGet?.status, 404, 'channel users: 404');
  });

  t.test('unknown routes → 404 JSON', async (t) => {
    isError(t, await get('/nope'), 404, /\/nope/, 'GET /nope');
    isError(t, await get(`/apps/${APP.id}/unknown`), 404, /unknown/, 'GET /apps/{id}/unknown');
    isError(t, await post(`/apps/${APP.id}/channels`, '{}'), 404, /POST/, 'POST to a GET route');
    isError(t, await get(`/apps/${APP.id}/events`), 404, /GET/, 'GET to a POST route');
    isError(t, await rawRequest(port, 'DELETE', `/apps/${APP.id}/events`, undefined, {}, TIMEOUT_MS), 404, /DELETE/, 'DELETE');
    isError(t, await get('/'), 404, /GET \//, 'GET /');
  });
});
