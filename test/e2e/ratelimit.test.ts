// Rate limiting end to end (spec "Rate limiting", the protocol "HTTP API"), memory driver:
// the per-app API bucket (429, Retry-After, X-RateLimit-*), what is and is not limited,
// per-process limits across shards, recovery, the per-IP window with X-Forwarded-For and
// trust_hops, max_backend_events_per_second, the WebSocket window (4301), driver none.

import t from 'tap';
import { rawRequest, signedGet, signedPost, type RawResponse } from '../helpers/http';
import { APP, RawClient, WORKERS, eventually, sleep, startServer } from '../helpers/server';
import { settle } from '../helpers/settle';
import { metric } from '../faults/api';

const LIM = { id: 'lim-id', key: 'lim-key', secret: 'lim-secret', max_client_events_per_second: 4 } as const;
const OTHER = { id: 'other-id', key: 'other-key', secret: 'other-secret', max_client_events_per_second: 4 } as const;
const AUTH = { id: 'auth-id', key: 'auth-key', secret: 'auth-secret', max_client_events_per_second: 3 } as const;
const ALL = { id: 'all-id', key: 'all-key', secret: 'all-secret', max_client_events_per_second: 50 } as const;
const REC = { id: 'rec-id', key: 'rec-key', secret: 'rec-secret', max_client_events_per_second: 2 } as const;
const BE = { id: 'be-id', key: 'be-key', secret: 'be-secret', max_backend_events_per_second: 2 } as const;

function isRateLimitHeaders(t: tap.Test, r: RawResponse, limit: number, what: string): void {
  t.equal(r.headers['x-ratelimit-limit'], String(limit), `${what}: X-RateLimit-Limit`);
  t.match(r.headers['x-ratelimit-remaining'], /^\d+$/, `${what}: X-RateLimit-Remaining is a count`);
  t.match(r.headers['x-ratelimit-reset'], /^\d+$/, `${what}: X-RateLimit-Reset is whole seconds`);
}

function is429(t: tap.Test, r: RawResponse, limit: number, what: string): void {
  t.equal(r.status, 429, `${what}: 429 (${r.text})`);
  t.same(Object.keys(r.json ?? {}), ['error'], `${what}: {"error": ...}`);
  t.match(r.headers['retry-after'], /^[1-9]\d*$/, `${what}: Retry-After, whole seconds ≥ 1`);
  isRateLimitHeaders(t, r, limit, what);
  t.equal(r.headers['x-ratelimit-remaining'], '0', `${what}: nothing remaining`);
}

t.test(`memory driver, workers: ${WORKERS}`, async (t) => {
  const srv = await startServer({ apps: [{ ...APP }, { ...LIM }, { ...OTHER }, { ...AUTH }, { ...ALL }, { ...REC }, { ...BE }] });
  t.teardown(() => srv.stop());

  t.test('per-app bucket: headers on success, 429 past the capacity, per process across shards', async (t) => {
    const first = await signedGet(srv.port, LIM, 'channels');
    t.equal(first.status, 200);
    isRateLimitHeaders(t, first, 4, 'success');
    t.equal(first.headers['x-ratelimit-remaining'], '3', 'one token of 4 taken');
    t.equal(first.headers['x-ratelimit-reset'], '1', 'full again within 1 s');
    const started = Date.now();
    const burst = await Promise.all(Array.from({ length: 12 }, () => signedGet(srv.port, LIM, 'channels')));
    const elapsed = (Date.now() - started) / 1000;
    const ok = burst.filter((r) => r.status === 200).length;
    const refused = burst.filter((r) => r.status === 429);
    t.ok(ok <= 3 + Math.ceil(elapsed * 4), `at most the 3 left plus the refill were granted across ${WORKERS} shard(s) (${ok} in ${elapsed.toFixed(2)} s)`);
    t.ok(refused.length > 0, `the rest got 429 (${refused.length})`);
    t.equal(ok + refused.length, 12, 'nothing else than 200 or 429');
    if (refused[0]) is429(t, refused[0], 4, 'refused');
    t.match(refused[0]?.json?.error, /rate limit/i);

    const other = await signedGet(srv.port, OTHER, 'channels');
    t.equal(other.status, 200, 'another app has its own bucket');
    t.equal(other.headers['x-ratelimit-remaining'], '3');
  });

  t.test('/up and /up/{id} are not limited and carry no rate-limit headers', async (t) => {
    for (let i = 0; i < 10; i++) await signedGet(srv.port, REC, 'channels');
    for (let i = 0; i < 6; i++) {
      const up = await rawRequest(srv.port, 'GET', '/up');
      t.equal(up.status, 200);
      t.equal(up.headers['x-ratelimit-limit'], undefined);
      const upApp = await rawRequest(srv.port, 'GET', `/up/${REC.id}`);
      t.equal(upApp.status, 200, '/up/{id} of an app with an empty bucket');
      t.equal(upApp.headers['x-ratelimit-limit'], undefined);
    }
  });

  t.test('every limited endpoint takes a token and carries the headers', async (t) => {
    const rs = [
      await signedPost(srv.port, ALL, 'events', { name: 'e', channel: 'c', data: '{}' }),
      await signedPost(srv.port, ALL, 'batch_events', { batch: [{ name: 'e', channel: 'c', data: '{}' }] }),
      await signedGet(srv.port, ALL, 'channels'),
      await signedGet(srv.port, ALL, 'channels/c'),
      await signedGet(srv.port, ALL, 'channels/presence-x/users'),
      await signedGet(srv.port, ALL, 'channels/not-presence/users'),
    ];
    const remaining = rs.map((r) => Number(r.headers['x-ratelimit-remaining']));
    t.same(rs.map((r) => r.status), [200, 200, 200, 200, 200, 400], 'statuses');
    for (const r of rs) isRateLimitHeaders(t, r, 50, `${r.status}`);
    t.ok(remaining.every((n, i) => i === 0 || n <= remaining[i - 1] || n - remaining[i - 1] <= 2), `remaining goes down (${remaining})`);
    t.ok(remaining[5] <= 44 + 5, 'six tokens taken (up to the refill)');
  });

  t.test('unauthenticated requests do not drain the app bucket', async (t) => {
    for (let i = 0; i < 10; i++) {
      const bad = await rawRequest(srv.port, 'GET', `/apps/${AUTH.id}/channels?auth_key=${AUTH.key}&auth_timestamp=1&auth_version=1.0&auth_signature=00`);
      t.equal(bad.status, 401);
      t.equal(bad.headers['x-ratelimit-limit'], undefined, 'no rate-limit headers before authentication');
    }
    const unknown = await rawRequest(srv.port, 'GET', '/apps/nope/channels');
    t.equal(unknown.status, 404);
    const good = await signedGet(srv.port, AUTH, 'channels');
    t.equal(good.status, 200);
    t.equal(good.headers['x-ratelimit-remaining'], '2', 'the first signed request finds a full bucket');
  });

  t.test('recovers after Retry-After', async (t) => {
    let refused: RawResponse | null = null;
    for (let i = 0; i < 10 && !refused; i++) {
      const r = await signedGet(srv.port, REC, 'channels');
      if (r.status === 429) refused = r;
    }
    t.ok(refused, 'got a 429');
    await sleep(Number(refused!.headers['retry-after']) * 1000);
    const again = await signedGet(srv.port, REC, 'channels');
    t.equal(again.status, 200, 'allowed again after Retry-After seconds');
  });

  t.test('max_backend_events_per_second: one token per event × channel', async (t) => {
    const two = await signedPost(srv.port, BE, 'events', { name: 'e', channels: ['a', 'b'], data: '{}' });
    t.equal(two.status, 200, '2 channels = 2 events: allowed');
    isRateLimitHeaders(t, two, 1000, 'the app bucket headers');
    const more = await signedPost(srv.port, BE, 'events', { name: 'e', channels: ['a', 'b'], data: '{}' });
    t.equal(more.status, 429, `2 more within the second: 429 (${more.text})`);
    t.match(more.headers['retry-after'], /^[1-9]\d*$/, 'Retry-After');
    t.equal(more.headers['x-ratelimit-limit'], '2', 'headers of the backend limit');
    t.match(more.json?.error, /backend event rate limit/i);
    const batch = await signedPost(srv.port, BE, 'batch_events', { batch: [{ name: 'e', channel: 'a', data: '1' }, { name: 'e', channels: ['b', 'c'], data: '2' }] });
    t.equal(batch.status, 429, 'a batch of 3 events over a limit of 2 never fits');
    t.match(batch.json?.error, /3 events/);
    await sleep(Number(more.headers['retry-after']) * 1000 + 100);
    const after = await signedPost(srv.port, BE, 'batch_events', { batch: [{ name: 'e', channel: 'a', data: '1' }, { name: 'e', channel: 'b', data: '2' }] });
    t.equal(after.status, 200, `after the refill a batch of 2 passes (${after.text})`);
    const invalid = await signedPost(srv.port, BE, 'events', { name: 'e', channels: ['bad name'], data: '{}' });
    t.equal(invalid.status, 400, 'an invalid request is refused before it takes backend tokens');
    const unlimited = await Promise.all(Array.from({ length: 5 }, () => signedPost(srv.port, ALL, 'events', { name: 'e', channels: ['a', 'b', 'c'], data: '{}' })));
    t.same(unlimited.map((r) => r.status), [200, 200, 200, 200, 200], 'null = unlimited');
  });
});

t.test(`per-IP window with trust_hops 1 and the WebSocket window, workers: ${WORKERS}`, async (t) => {
  const srv = await startServer({
    apps: [{ ...APP }],
    rate_limiter: { api: { max_requests: 3, window_seconds: 60, trust_hops: 1 }, websocket: { max_requests: 3, window_seconds: 60 } },
    metrics: { enabled: true, port: 0, host: '127.0.0.1' }, // the WebSocket test reads the drops
  });
  t.teardown(() => srv.stop());
  const from = (xff: string) => ({ 'x-forwarded-for': xff });

  t.test('the address is the rightmost X-Forwarded-For entry', async (t) => {
    for (let i = 0; i < 3; i++) {
      const r = await signedGet(srv.port, APP, 'channels', {}, from(`6.6.6.${i}, 1.1.1.1`));
      t.equal(r.status, 200, `request ${i + 1} of 3 from 1.1.1.1`);
    }
    const over = await signedGet(srv.port, APP, 'channels', {}, from('7.7.7.7, 1.1.1.1'));
    t.equal(over.status, 429, 'the 4th from 1.1.1.1 (a forged left part does not help)');
    t.match(over.json?.error, /too many requests from this address/i);
    t.equal(over.headers['x-ratelimit-limit'], '3', 'headers of the window');
    t.equal(over.headers['x-ratelimit-remaining'], '0');
    const retry = Number(over.headers['retry-after']);
    t.ok(retry >= 1 && retry <= 60, `Retry-After until the window ends (${retry})`);
    t.equal((await signedGet(srv.port, APP, 'channels', {}, from('1.1.1.1, 2.2.2.2'))).status, 200, 'another address has its own window');
    t.equal((await rawRequest(srv.port, 'GET', '/up', undefined, from('1.1.1.1'))).status, 200, '/up is not limited');
  });

  t.test('the window counts unauthenticated requests too (it is checked before authentication)', async (t) => {
    for (let i = 0; i < 3; i++) {
      const r = await rawRequest(srv.port, 'GET', `/apps/${APP.id}/channels?auth_key=${APP.key}&auth_signature=00`, undefined, from('3.3.3.3'));
      t.equal(r.status, 401);
    }
    t.equal((await signedGet(srv.port, APP, 'channels', {}, from('3.3.3.3'))).status, 429);
  });

  t.test('WebSocket: over max_requests frames per window → 4301, frame dropped, connection open', async (t) => {
    const c = srv.track(await RawClient.connect(srv.wsUrl()));
    // Three frames allowed: a subscribe (the channel of the marker below) and two pings.
    t.equal((await c.subscribe('ws-window')).event, 'pusher_internal:subscription_succeeded');
    for (let i = 0; i < 2; i++) {
      c.send({ event: 'pusher:ping', data: {} });
      await c.event('pusher:pong');
    }
    const drops = () => metric(srv.server.metricsPort!, 'rate_limit_exceeded_total', { limit_type: 'websocket' });
    const before = await drops();
    c.send({ event: 'pusher:ping', data: {} });
    const err = await c.event('pusher:error');
    t.equal(err.data.code, 4301, 'pusher:error 4301');
    t.match(err.data.message, /rate limit/i);
    c.send({ event: 'pusher:ping', data: {} });
    c.send({ event: 'pusher:subscribe', data: { channel: 'dropped' } });
    // Nothing this connection sends is answered now: the server counting both frames shows
    // it has read them, and a marker published after that comes after any answer.
    await eventually(async () => (await drops()) === before + 3, 3000, 'the two later frames to be counted as dropped');
    await settle(srv, c, 'ws-window', { headers: from('9.9.9.9') }); // an address with its own API window
    t.same(c.frames, [], 'later frames of the window are dropped silently (one error per window)');
    t.equal(c.closeCode, null, 'the connection stays open');
    const d = srv.track(await RawClient.connect(srv.wsUrl()));
    d.send({ event: 'pusher:ping', data: {} });
    await d.event('pusher:pong');
    t.pass('another connection has its own window');
  });
});

t.test(`per-IP window with trust_hops 0 ignores X-Forwarded-For, workers: ${WORKERS}`, async (t) => {
  const srv = await startServer({ apps: [{ ...APP }], rate_limiter: { api: { max_requests: 2, window_seconds: 60, trust_hops: 0 } } });
  t.teardown(() => srv.stop());
  t.equal((await signedGet(srv.port, APP, 'channels', {}, { 'x-forwarded-for': '1.1.1.1' })).status, 200);
  t.equal((await signedGet(srv.port, APP, 'channels', {}, { 'x-forwarded-for': '2.2.2.2' })).status, 200);
  t.equal((await signedGet(srv.port, APP, 'channels', {}, { 'x-forwarded-for': '3.3.3.3' })).status, 429, 'all three came from 127.0.0.1');
});

t.test(`rate_limiter.enabled false: nothing limited, no headers, workers: ${WORKERS}`, async (t) => {
  const srv = await startServer({
    apps: [{ ...APP, max_client_events_per_second: 1, max_backend_events_per_second: 1 }],
    rate_limiter: { enabled: false, websocket: { max_requests: 1, window_seconds: 60 } },
  });
  t.teardown(() => srv.stop());
  for (let i = 0; i < 4; i++) {
    const r = await signedPost(srv.port, APP, 'events', { name: 'e', channels: ['a', 'b'], data: '{}' });
    t.equal(r.status, 200);
    t.equal(r.headers['x-ratelimit-limit'], undefined);
  }
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  for (let i = 0; i < 3; i++) {
    c.send({ event: 'pusher:ping', data: {} });
    await c.event('pusher:pong');
  }
  t.pass('no WebSocket window either');
});
