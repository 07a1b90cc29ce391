// GET /apps/{id}/channels, /channels/{name}, /channels/{name}/users, /up, /up/{id} and
// CORS, against the protocol "HTTP API" and the spec's Endpoints and Errors.

import t from 'tap';
import { signApiQuery } from '../../src/protocol/api-auth';
import { isJsonError as isError, now, rawRequest as request, signedGet as signedGetFrom, type RawResponse } from '../helpers/http';
import { APP, RawClient, eventually, spreadClients, startServer, type TestServer } from '../helpers/server';

/** A request without a body on its own connection, 5 s timeout. */
function rawRequest(port: number, method: string, pathAndQuery: string, headers: Record<string, string> = {}): Promise<RawResponse> {
  return request(port, method, pathAndQuery, undefined, headers, 5000);
}

/** An app that only ever has presence channels occupied. */
const SOLO = { id: 'solo-id', key: 'solo-key', secret: 'solo-secret' } as const;

/** A signed GET of /apps/{APP.id}{sub} (sub as it goes on the wire, percent-encoding included), 5 s timeout. */
function signedGet(srv: TestServer, sub: string, params: Record<string, string> = {}, headers: Record<string, string> = {}): Promise<RawResponse> {
  return signedGetFrom(srv.port, APP, sub.replace(/^\//, ''), params, headers, 5000);
}

/** Asserts 200 and that body; returns it. */
function ok(t: tap.Test, r: RawResponse, body: unknown, what: string): void {
  t.same({ status: r.status, body: r.json }, { status: 200, body }, what);
}

async function sub(t: tap.Test, c: RawClient, channel: string, channelData?: unknown): Promise<void> {
  const f = channel.startsWith('private-') || channel.startsWith('presence-')
    ? await c.subscribeAuthed(channel, channelData)
    : await c.subscribe(channel);
  if (f.event !== 'pusher_internal:subscription_succeeded') t.fail(`subscribe ${channel}: ${JSON.stringify(f)}`);
}

function unsub(c: RawClient, channel: string): void {
  c.send({ event: 'pusher:unsubscribe', data: { channel } });
}

/** Polls a signed GET until `pred` holds on its JSON body (public subscriptions reach the owner shard async). */
async function until(srv: TestServer, sub: string, params: Record<string, string>, pred: (body: any) => boolean, what: string): Promise<any> {
  let last: RawResponse | undefined;
  await eventually(async () => {
    last = await signedGet(srv, sub, params);
    return last.status === 200 && pred(last.json);
  }, 3000, what).catch((err: Error) => {
    throw new Error(`${err.message}; last answer: ${last?.status} ${last?.text}`);
  });
  return last!.json;
}

t.test('channel queries, health checks and default CORS (one server)', async (t) => {
  const srv = await startServer({ apps: [{ ...APP }, { ...SOLO }, { id: 'off-id', key: 'off-key', secret: 'off-secret', enabled: false }] });
  t.teardown(() => srv.stop());

  t.test('GET /channels lists only occupied channels, filter_by_prefix, user_count', async (t) => {
    ok(t, await signedGet(srv, '/channels'), { channels: {} }, 'nothing occupied yet');
    const [a, b, c] = await spreadClients(srv, 3);
    await sub(t, a, 'list-a');
    await sub(t, b, 'list-b');
    await sub(t, c, 'list-b');
    await sub(t, a, 'private-list');
    await sub(t, a, 'presence-list', { user_id: 'u1' });
    await sub(t, b, 'presence-list', { user_id: 'u2' });
    await sub(t, c, 'presence-list', { user_id: 'u2' });
    await sub(t, c, 'presence-other', { user_id: 'u3' });
    await sub(t, b, 'gone');
    unsub(b, 'gone');

    const all = { 'list-a': {}, 'list-b': {}, 'private-list': {}, 'presence-list': {}, 'presence-other': {} };
    await until(srv, '/channels', {}, (b) => JSON.stringify(Object.keys(b.channels).sort()) === JSON.stringify(Object.keys(all).sort()), 'the five occupied channels');
    ok(t, await signedGet(srv, '/channels'), { channels: all }, 'each with {} as info; the vacated one is not listed');

    ok(t, await signedGet(srv, '/channels', { filter_by_prefix: 'list-' }), { channels: { 'list-a': {}, 'list-b': {} } }, 'filter_by_prefix=list-');
    ok(t, await signedGet(srv, '/channels', { filter_by_prefix: 'private-' }), { channels: { 'private-list': {} } }, 'filter_by_prefix=private-');
    ok(t, await signedGet(srv, '/channels', { filter_by_prefix: 'nothing-' }), { channels: {} }, 'a prefix that matches nothing');
    ok(t, await signedGet(srv, '/channels', { filter_by_prefix: 'presence-', info: 'user_count' }),
      { channels: { 'presence-list': { user_count: 2 }, 'presence-other': { user_count: 1 } } }, 'presence- with user_count (u2 twice counts once)');

    const res = await srv.sdk().get({ path: '/channels', params: { filter_by_prefix: 'presence-', info: 'user_count' } });
    t.same(await res.json(), { channels: { 'presence-list': { user_count: 2 }, 'presence-other': { user_count: 1 } } }, 'via SDK');

    ok(t, await signedGet(srv, '/channels', { filter_by_prefix: 'presence-l', info: 'user_count' }),
      { channels: { 'presence-list': { user_count: 2 } } }, 'a longer presence- prefix with user_count');
    isError(t, await signedGet(srv, '/channels', { info: 'user_count' }), 400, /filter_by_prefix=presence-/, 'user_count without a prefix');
    isError(t, await signedGet(srv, '/channels', { info: 'user_count', filter_by_prefix: 'list-' }), 400, /filter_by_prefix=presence-/, 'user_count with a non-presence prefix');
    isError(t, await signedGet(srv, '/channels', { info: 'user_count', filter_by_prefix: 'presence' }), 400, /filter_by_prefix=presence-/, 'user_count with "presence" (no dash: would match other names)');
    isError(t, await signedGet(srv, '/channels', { info: 'subscription_count' }), 400, /info|subscription_count/, 'info attribute not allowed on the list');

    // Pusher's HTTP API reference: user_count needs filter_by_prefix=presence-, even when
    // every occupied channel happens to be a presence channel (the answer must not depend
    // on what else is occupied at the time).
    const solo = srv.track(await RawClient.connect(srv.wsUrl(SOLO.key)));
    const f = await solo.subscribeAuthed('presence-solo', { user_id: 's1' }, SOLO);
    t.equal(f.event, 'pusher_internal:subscription_succeeded');
    const refused = await srv.sdk(SOLO).get({ path: '/channels', params: { info: 'user_count' } }).then(() => null, (e: { status?: number; body?: string }) => e);
    t.equal(refused?.status, 400, 'only presence channels occupied: user_count without the prefix is still 400 (SDK)');
    t.match(refused?.body, /filter_by_prefix=presence-/, 'the SDK error carries the message');
    const res2 = await srv.sdk(SOLO).get({ path: '/channels', params: { filter_by_prefix: 'presence-', info: 'user_count' } });
    t.same(await res2.json(), { channels: { 'presence-solo': { user_count: 1 } } }, 'with the prefix (SDK)');
  });

  t.test('GET /channels/{name}: occupied, subscription_count, user_count', async (t) => {
    ok(t, await signedGet(srv, '/channels/empty-one'), { occupied: false }, 'an empty channel');
    ok(t, await signedGet(srv, '/channels/empty-one', { info: 'subscription_count' }), { occupied: false, subscription_count: 0 }, 'empty, with subscription_count');
    ok(t, await signedGet(srv, '/channels/presence-empty', { info: 'user_count,subscription_count' }),
      { occupied: false, subscription_count: 0, user_count: 0 }, 'empty presence channel');

    const cs = await spreadClients(srv, 6);
    for (const c of cs) await sub(t, c, 'counted');
    await until(srv, '/channels/counted', { info: 'subscription_count' }, (b) => b.subscription_count === cs.length, 'subscription_count across shards');
    ok(t, await signedGet(srv, '/channels/counted', { info: 'subscription_count' }), { occupied: true, subscription_count: cs.length },
      `${cs.length} connections on ${new Set(cs.map((c) => c.socketId.split('.')[0])).size} shard(s)`);
    ok(t, await signedGet(srv, '/channels/counted'), { occupied: true }, 'no info: only occupied');
    isError(t, await signedGet(srv, '/channels/counted', { info: 'user_count' }), 400, /presence/, 'user_count on a public channel');
    isError(t, await signedGet(srv, '/channels/counted', { info: 'members' }), 400, /info|members/, 'unknown info attribute');
    const res = await srv.sdk().get({ path: '/channels/counted', params: { info: 'subscription_count' } });
    t.same(await res.json(), { occupied: true, subscription_count: cs.length }, 'via SDK');

    // presence: 3 connections, 2 users
    await sub(t, cs[0], 'presence-info', { user_id: 'p1', user_info: { name: 'One' } });
    await sub(t, cs[1], 'presence-info', { user_id: 'p2' });
    await sub(t, cs[2], 'presence-info', { user_id: 'p2' });
    ok(t, await signedGet(srv, '/channels/presence-info', { info: 'user_count,subscription_count' }),
      { occupied: true, subscription_count: 3, user_count: 2 }, 'presence channel counts');
    ok(t, await signedGet(srv, '/channels/presence-info', { info: 'user_count' }), { occupied: true, user_count: 2 }, 'only user_count');

    // Everyone leaves: the channel becomes unoccupied.
    for (const c of cs) unsub(c, 'counted');
    await until(srv, '/channels/counted', { info: 'subscription_count' }, (b) => b.occupied === false, 'counted to be vacated');
    ok(t, await signedGet(srv, '/channels/counted', { info: 'subscription_count' }), { occupied: false, subscription_count: 0 }, 'vacated after unsubscribes');

    // Leaving by disconnecting counts too.
    await Promise.all(cs.slice(0, 3).map((c) => c.close()));
    await until(srv, '/channels/presence-info', { info: 'user_count,subscription_count' }, (b) => b.occupied === false, 'presence-info to be vacated');
    ok(t, await signedGet(srv, '/channels/presence-info', { info: 'user_count,subscription_count' }),
      { occupied: false, subscription_count: 0, user_count: 0 }, 'vacated after disconnects');
    ok(t, await signedGet(srv, '/channels', { filter_by_prefix: 'presence-info' }), { channels: {} }, 'and no longer listed');
  });

  t.test('GET /channels/{name}/users', async (t) => {
    const cs = await spreadClients(srv, 4);
    await sub(t, cs[0], 'presence-users', { user_id: 'alice', user_info: { a: 1 } });
    await sub(t, cs[1], 'presence-users', { user_id: 'bob' });
    await sub(t, cs[2], 'presence-users', { user_id: 'bob' });
    await sub(t, cs[3], 'public-users');
    const r = await signedGet(srv, '/channels/presence-users/users');
    t.equal(r.status, 200, r.text);
    t.same(Object.keys(r.json), ['users']);
    t.same([...r.json.users].sort((x: { id: string }, y: { id: string }) => (x.id < y.id ? -1 : 1)), [{ id: 'alice' }, { id: 'bob' }], 'one entry per user, id only');
    const res = await srv.sdk().get({ path: '/channels/presence-users/users', params: {} });
    t.equal(((await res.json()) as { users: unknown[] }).users.length, 2, 'via SDK');
    ok(t, await signedGet(srv, '/channels/presence-nobody/users'), { users: [] }, 'an empty presence channel');
    isError(t, await signedGet(srv, '/channels/public-users/users'), 400, /presence/, 'public channel');
    isError(t, await signedGet(srv, '/channels/private-x/users'), 400, /presence/, 'private channel');

    unsub(cs[0], 'presence-users');
    await until(srv, '/channels/presence-users/users', {}, (b) => b.users.length === 1, 'alice to leave');
    ok(t, await signedGet(srv, '/channels/presence-users/users'), { users: [{ id: 'bob' }] }, 'after alice left');
  });

  t.test('channel names that need percent-encoding in the path', async (t) => {
    const name = 'presence-a@b=c';
    const [c] = await spreadClients(srv, 1);
    await sub(t, c, name, { user_id: 'enc' });
    const enc = encodeURIComponent(name); // presence-a%40b%3Dc
    t.equal(enc, 'presence-a%40b%3Dc');
    ok(t, await signedGet(srv, `/channels/${enc}`, { info: 'user_count,subscription_count' }),
      { occupied: true, subscription_count: 1, user_count: 1 }, 'encoded path');
    ok(t, await signedGet(srv, `/channels/${name}`, { info: 'user_count' }), { occupied: true, user_count: 1 }, 'raw @ and = in the path');
    ok(t, await signedGet(srv, `/channels/${enc}/users`), { users: [{ id: 'enc' }] }, 'users, encoded path');
    const res = await srv.sdk().get({ path: `/channels/${enc}/users`, params: {} });
    t.same(await res.json(), { users: [{ id: 'enc' }] }, 'users via SDK with an encoded path');
    // Signed over the decoded path, sent encoded (clients differ): accepted too.
    const path = `/apps/${APP.id}/channels/${name}`;
    const q = signApiQuery(APP.key, APP.secret, 'GET', path, {}, '', now());
    ok(t, await rawRequest(srv.port, 'GET', `/apps/${APP.id}/channels/${enc}?${q}`), { occupied: true }, 'signature over the decoded path');

    const cache = 'room#cache-60';
    await sub(t, c, cache);
    await until(srv, `/channels/${encodeURIComponent(cache)}`, {}, (b) => b.occupied === true, `${cache} to be occupied`);
    ok(t, await signedGet(srv, `/channels/${encodeURIComponent(cache)}`, { info: 'subscription_count' }),
      { occupied: true, subscription_count: 1 }, '# encoded as %23');
    ok(t, await signedGet(srv, '/channels', { filter_by_prefix: 'room' }), { channels: { [cache]: {} } }, 'listed under its real name');

    isError(t, await signedGet(srv, '/channels/bad%20name'), 400, /channel/, 'a space is not a valid channel name');
    isError(t, await signedGet(srv, '/channels/bad%2'), 400, /channel|encoding/, 'broken percent-encoding');
    isError(t, await signedGet(srv, `/channels/${'x'.repeat(201)}`), 400, /channel/, 'name over 200 characters');
  });

  t.test('GET /up and /up/{id}', async (t) => {
    const up = await rawRequest(srv.port, 'GET', '/up');
    t.equal(up.status, 200);
    t.match(up.headers['content-type'], /application\/json/);
    t.same(Object.keys(up.json).sort(), ['status', 'timestamp']);
    t.equal(up.json.status, 'ok');
    t.ok(Number.isInteger(up.json.timestamp), 'timestamp is an integer');
    t.ok(Math.abs(up.json.timestamp - now()) <= 2, `timestamp ${up.json.timestamp} is close to now (${now()}), in seconds`);

    ok(t, await rawRequest(srv.port, 'GET', `/up/${APP.id}`), { status: 'ok' }, 'GET /up/{id}');
    isError(t, await rawRequest(srv.port, 'GET', '/up/no-such-app'), 404, /no-such-app/, 'GET /up/{unknown}');
    isError(t, await rawRequest(srv.port, 'GET', '/up/off-id'), 404, /disabled/, 'GET /up/{disabled}: 404, as its API requests');
    isError(t, await rawRequest(srv.port, 'GET', '/upx'), 404, /upx/, 'GET /upx');
  });

  t.test('CORS, default config: any origin', async (t) => {
    const origin = { origin: 'https://anywhere.example' };

    const up = await rawRequest(srv.port, 'GET', '/up', origin);
    t.equal(up.headers['access-control-allow-origin'], '*', '/up');
    t.equal(up.headers['access-control-allow-credentials'], undefined, 'no credentials with *');
    const noOrigin = await rawRequest(srv.port, 'GET', '/up');
    t.equal(noOrigin.headers['access-control-allow-origin'], '*', 'also without an Origin header');
    const api = await signedGet(srv, '/channels', {}, origin);
    t.equal(api.status, 200);
    t.equal(api.headers['access-control-allow-origin'], '*', 'API answer');
    const err = await rawRequest(srv.port, 'GET', `/apps/${APP.id}/channels`, origin);
    t.equal(err.status, 401);
    t.equal(err.headers['access-control-allow-origin'], '*', 'API error answer');
    const notFound = await rawRequest(srv.port, 'GET', '/nope', origin);
    t.equal(notFound.headers['access-control-allow-origin'], '*', '404 answer');

    const pre = await rawRequest(srv.port, 'OPTIONS', `/apps/${APP.id}/events`, {
      ...origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type, authorization',
    });
    t.equal(pre.status, 204, 'preflight → 204');
    t.equal(pre.text, '', 'no body');
    t.equal(pre.headers['access-control-allow-origin'], '*');
    const methods = String(pre.headers['access-control-allow-methods']).split(/\s*,\s*/);
    for (const m of ['GET', 'POST', 'OPTIONS']) t.ok(methods.includes(m), `Allow-Methods has ${m}`);
    const allowed = String(pre.headers['access-control-allow-headers']).toLowerCase().split(/\s*,\s*/);
    for (const h of ['content-type', 'authorization', 'x-requested-with']) t.ok(allowed.includes(h), `Allow-Headers has ${h}`);
    const preUp = await rawRequest(srv.port, 'OPTIONS', '/up', origin);
    t.equal(preUp.status, 204, 'preflight on any path');
  });
});

t.test('CORS with an origin list and credentials: only a listed origin is echoed', async (t) => {
  const srv = await startServer({ cors: { origin: ['https://a.example'], credentials: true } });
  t.teardown(() => srv.stop());
  const good = { origin: 'https://a.example' };
  const bad = { origin: 'https://b.example' };

  for (const [what, get] of [
    ['/up', (h: Record<string, string>) => rawRequest(srv.port, 'GET', '/up', h)],
    ['API', (h: Record<string, string>) => signedGet(srv, '/channels', {}, h)],
    ['API error', (h: Record<string, string>) => rawRequest(srv.port, 'GET', `/apps/${APP.id}/channels`, h)],
    ['/up/{id}', (h: Record<string, string>) => rawRequest(srv.port, 'GET', `/up/${APP.id}`, h)],
    ['preflight', (h: Record<string, string>) => rawRequest(srv.port, 'OPTIONS', `/apps/${APP.id}/events`, { ...h, 'access-control-request-method': 'POST' })],
  ] as const) {
    const yes = await get(good);
    t.equal(yes.headers['access-control-allow-origin'], 'https://a.example', `${what}: listed origin echoed`);
    t.match(String(yes.headers.vary), /Origin/i, `${what}: Vary: Origin`);
    t.equal(yes.headers['access-control-allow-credentials'], 'true', `${what}: Allow-Credentials`);
    const no = await get(bad);
    t.equal(no.headers['access-control-allow-origin'], undefined, `${what}: other origin gets no ACAO`);
    t.equal(no.headers['access-control-allow-credentials'], undefined, `${what}: other origin gets no Allow-Credentials`);
    const none = await get({});
    t.equal(none.headers['access-control-allow-origin'], undefined, `${what}: no Origin, no ACAO`);
  }
});
