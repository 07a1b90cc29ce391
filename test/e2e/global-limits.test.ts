// The global defaults of the per-app limits (event_limits, channel_limits, presence), the
// cache channels' TTL and the CORS preflight lists, each shown by what a client gets: an
// app that sets none of its own limits gets the global ones; an app that sets its own
// (max_event_name_length, max_channel_name_length) gets those instead.

import t, { type Test } from 'tap';
import { isJsonError, rawRequest, signedPost } from '../helpers/http';
import { APP, RawClient, startServer, type Frame, type TestServer } from '../helpers/server';

/** Sets its own event and channel name limits; the rest comes from the global sections. */
const OWN = { id: 'own-id', key: 'own-key', secret: 'own-secret', max_event_name_length: 8, max_channel_name_length: 12 };

let srv: TestServer;
t.before(async () => {
  srv = await startServer({
    apps: [{ ...APP }, OWN],
    event_limits: { max_channels_at_once: 2, max_name_length: 20, max_batch_size: 2 },
    channel_limits: { max_name_length: 24, cache_ttl: 1 },
    presence: { max_members_per_channel: 1, max_member_size_in_kb: 1 },
    cors: { methods: ['GET', 'POST', 'OPTIONS', 'PURGE'], allowed_headers: ['Content-Type', 'X-Ringcast-Test'] },
  });
});
t.teardown(() => srv.stop());

async function client(t: Test, key: string = APP.key): Promise<RawClient> {
  const c = await RawClient.connect(srv.wsUrl(key));
  t.teardown(() => c.close().catch(() => undefined));
  return c;
}

function subError(t: Test, f: Frame, status: number, what: string): void {
  t.equal(f.event, 'pusher:subscription_error', `${what}: subscription_error`);
  t.equal(f.data?.status, status, `${what}: status ${status}`);
}

t.test('event_limits: the app without its own limits gets the global ones', async (t) => {
  const ev = (extra: Record<string, unknown>) => ({ name: 'e', channel: 'lim', data: 'd', ...extra });
  isJsonError(t, await signedPost(srv.port, APP, 'events', ev({ channel: undefined, channels: ['a', 'b', 'c'] })), 400, /2/,
    'event_limits.max_channels_at_once 2: three channels refused');
  t.equal((await signedPost(srv.port, APP, 'events', ev({ channel: undefined, channels: ['a', 'b'] }))).status, 200, 'two channels accepted');
  isJsonError(t, await signedPost(srv.port, APP, 'events', ev({ name: 'n'.repeat(21) })), 400, /20 characters/,
    'event_limits.max_name_length 20: a 21-character name refused');
  t.equal((await signedPost(srv.port, APP, 'events', ev({ name: 'n'.repeat(20) }))).status, 200, 'a 20-character name accepted');
  const item = (i: number) => ({ name: `b${i}`, channel: 'lim', data: 'd' });
  isJsonError(t, await signedPost(srv.port, APP, 'batch_events', { batch: [item(1), item(2), item(3)] }), 400, /batch/,
    'event_limits.max_batch_size 2: a batch of 3 refused');
  t.equal((await signedPost(srv.port, APP, 'batch_events', { batch: [item(1), item(2)] })).status, 200, 'a batch of 2 accepted');
});

t.test('an app\'s own max_event_name_length and max_channel_name_length beat the global ones', async (t) => {
  isJsonError(t, await signedPost(srv.port, OWN, 'events', { name: 'n'.repeat(9), channel: 'own', data: 'd' }), 400, /8 characters/,
    'max_event_name_length 8 (global 20): a 9-character name refused');
  t.equal((await signedPost(srv.port, OWN, 'events', { name: 'n'.repeat(8), channel: 'own', data: 'd' })).status, 200, '8 characters accepted');
  const c = await client(t, OWN.key);
  subError(t, await c.subscribe('c'.repeat(13)), 4009, 'max_channel_name_length 12 (global 24): a 13-character channel');
  t.equal((await c.subscribe('c'.repeat(12))).event, 'pusher_internal:subscription_succeeded', 'a 12-character channel');
});

t.test('channel_limits.max_name_length: the global channel name limit', async (t) => {
  const c = await client(t);
  subError(t, await c.subscribe('c'.repeat(25)), 4009, 'a 25-character channel (limit 24)');
  t.equal((await c.subscribe('c'.repeat(24))).event, 'pusher_internal:subscription_succeeded', 'a 24-character channel');
});

t.test('presence: the global member count and member size limits', async (t) => {
  const join = (c: RawClient, member: { user_id: string; user_info?: Record<string, unknown> }) => {
    const a = srv.sdk().authorizeChannel(c.socketId, 'presence-g', member);
    return c.subscribe('presence-g', { auth: a.auth, channel_data: a.channel_data });
  };
  const [a, b, big] = [await client(t), await client(t), await client(t)];
  t.equal((await join(a, { user_id: 'u1' })).event, 'pusher_internal:subscription_succeeded', 'the first member joins');
  subError(t, await join(b, { user_id: 'u2' }), 4100, 'presence.max_members_per_channel 1: a second user');
  const f = await join(big, { user_id: 'u1', user_info: { blob: 'x'.repeat(1100) } });
  subError(t, f, 4301, 'presence.max_member_size_in_kb 1: user_info of 1.1 KB');
});

t.test('channel_limits.cache_ttl: a cache channel forgets its event after the TTL', async (t) => {
  t.equal((await signedPost(srv.port, APP, 'events', { name: 'price', channel: 'cache-ttl', data: '1' })).status, 200);
  const early = await client(t);
  await early.subscribe('cache-ttl');
  t.equal((await early.event('price', 'cache-ttl')).data, '1', 'within the TTL: the cached event');
  const publishedAt = Date.now();
  // cache_ttl 1 s: past it (and a margin for the expiry check), a new subscriber gets a miss
  await new Promise((r) => setTimeout(r, 1500 - (Date.now() - publishedAt)));
  const late = await client(t);
  await late.subscribe('cache-ttl');
  const miss = await late.next((f) => f.channel === 'cache-ttl' && (f.event === 'pusher:cache_miss' || f.event === 'price'));
  t.equal(miss.event, 'pusher:cache_miss', 'after 1.5 s: cache_miss, not the expired event');
});

t.test('cors.methods and cors.allowed_headers are what a preflight is answered', async (t) => {
  const res = await fetch(`http://127.0.0.1:${srv.port}/apps/${APP.id}/events`, {
    method: 'OPTIONS',
    headers: { origin: 'http://example.test', 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-ringcast-test' },
  });
  t.equal(res.status, 204);
  t.equal(res.headers.get('access-control-allow-methods'), 'GET, POST, OPTIONS, PURGE', 'cors.methods');
  t.equal(res.headers.get('access-control-allow-headers'), 'Content-Type, X-Ringcast-Test', 'cors.allowed_headers');
});

t.test('http_fallback.enabled: false, and the fallback path is not served', async (t) => {
  const open = async (port: number) => {
    const r = await rawRequest(port, 'POST', `/pusher/app/${APP.key}/123/gl000001/xhr?protocol=7&client=js&version=8.6.0&t=1&n=1`, '', { 'content-length': '0' });
    return r;
  };
  const on = await open(srv.port);
  t.equal(on.status, 200, 'enabled (the default): a polling request opens a session');
  t.match(on.text, /^o\n/, 'its first line is the open frame');
  const off = await startServer({ http_fallback: { enabled: false } });
  t.teardown(() => off.stop());
  const r = await open(off.port);
  t.equal(r.status, 404, 'http_fallback.enabled false: the same request is not found');
  t.notMatch(r.text, /^o\n/, 'and opens nothing');
});
