// Backend hooks end to end (the protocol "Backend hooks"): a real ringcast, a real backend
// (node:http in this process, hook-backend.ts), raw WebSocket clients, pusher-js and the
// `pusher` SDK. Each hook allows, denies and (client_event, publish) replaces data; denials
// reach the client exactly as the protocol writes them; calls are signed so that the SDK's
// webhook() verifies them; a connection's hooked operations complete in its order.

import t, { type Test } from 'tap';
import WebSocket from 'ws';
import { startHookBackend, allHooks, type HookBackend } from '../helpers/hook-backend';
import { connected, pusherJs } from '../helpers/pusher-js';
import { APP, RawClient, WORKERS, startServer, type Frame, type TestServer } from '../helpers/server';
import { signedGet } from '../helpers/http';
import { startReceiver } from '../webhooks/receiver';

async function setup(t: Test, hooks: (url: string) => Record<string, unknown>, extra: Record<string, unknown> = {}, appExtra: Record<string, unknown> = {}): Promise<{ srv: TestServer; backend: HookBackend }> {
  const backend = await startHookBackend();
  const srv = await startServer({ apps: [{ ...APP, hooks: hooks(backend.url), ...appExtra }], ...extra });
  t.teardown(async () => {
    await srv.stop();
    await backend.close();
  });
  return { srv, backend };
}

const dataOf = (f: Frame) => (typeof f.data === 'string' ? JSON.parse(f.data) : f.data);

t.test(`subscribe hook: allow, deny with reason (connection kept), channel patterns, the call's body and signature (workers ${WORKERS})`, async (t) => {
  const { srv, backend } = await setup(t, (url) => ({ url, subscribe: { enabled: true, channels: ['room-*', 'private-*'] } }));
  backend.answer = (c) => (c.body.channel === 'room-closed' ? { allow: false, reason: 'room closed for maintenance' } : { allow: true });
  const c = srv.track(await RawClient.connect(srv.wsUrl(), { headers: { origin: 'https://app.example', 'user-agent': 'hook-test/1.0' } }));

  t.equal((await c.subscribe('room-open')).event, 'pusher_internal:subscription_succeeded');
  const denied = await c.subscribe('room-closed');
  t.equal(denied.event, 'pusher:subscription_error');
  t.same(dataOf(denied), { type: 'AuthError', error: 'room closed for maintenance', status: 403 });
  t.equal((await c.subscribe('lobby')).event, 'pusher_internal:subscription_succeeded', 'a channel no pattern matches is not hooked');
  t.equal((await c.subscribeAuthed('private-a')).event, 'pusher_internal:subscription_succeeded');
  await c.sync();
  t.same(backend.calls.map((x) => x.body.channel), ['room-open', 'room-closed', 'private-a'], 'one call per hooked subscribe, in order');

  const call = backend.calls[0];
  t.ok(call.valid, 'the pusher SDK webhook() verifies the signature');
  t.equal(call.headers['x-pusher-key'], APP.key);
  t.equal(call.headers['content-type'], 'application/json');
  t.equal(call.body.hook, 'subscribe');
  t.equal(call.body.app_id, APP.id);
  t.equal(call.body.socket_id, c.socketId);
  t.type(call.body.time_ms, 'number');
  t.same(call.body.connection, { ip: '127.0.0.1', origin: 'https://app.example', user_agent: 'hook-test/1.0' });
  t.notOk('user_id' in call.body, 'no user: not signed in, not presence');

  const bad = await c.subscribe('private-b', { auth: 'app-key:0000' });
  t.equal(dataOf(bad).status, 401, 'a bad signature is refused before the hook');
  await c.sync();
  t.equal(backend.calls.length, 3, 'the hook was not called for it');

  const ch = await signedGet(srv.port, APP, 'channels');
  t.notOk('room-closed' in ch.json.channels, 'a denied channel is not occupied');
});

t.test('presence: a denied member leaves no trace (member_added, GET users, webhooks)', async (t) => {
  const receiver = await startReceiver();
  t.teardown(() => receiver.close());
  const { srv, backend } = await setup(t, (url) => ({ url, subscribe: { enabled: true, channels: ['presence-*'] } }), {},
    { webhooks: [{ url: receiver.url, event_types: ['member_added', 'member_removed'] }] });
  backend.answer = (c) => (c.body.user_id === 'bob' ? { allow: false, reason: 'bob is banned' } : { allow: true });
  const ch = 'presence-team';
  const alice = srv.track(await RawClient.connect(srv.wsUrl()));
  t.equal((await alice.subscribeAuthed(ch, { user_id: 'alice' })).event, 'pusher_internal:subscription_succeeded');
  const bob = srv.track(await RawClient.connect(srv.wsUrl()));
  const denied = await bob.subscribeAuthed(ch, { user_id: 'bob', user_info: { name: 'Bob' } });
  t.same(dataOf(denied), { type: 'AuthError', error: 'bob is banned', status: 403 });
  const bobCall = backend.calls.find((c) => c.body.user_id === 'bob')!;
  t.equal(bobCall.body.channel_data, JSON.stringify({ user_id: 'bob', user_info: { name: 'Bob' } }), 'channel_data as the client sent it');
  // positive marker: a later, allowed member
  const carol = srv.track(await RawClient.connect(srv.wsUrl()));
  t.equal((await carol.subscribeAuthed(ch, { user_id: 'carol' })).event, 'pusher_internal:subscription_succeeded');
  const added = await alice.event('pusher_internal:member_added', ch);
  t.equal(dataOf(added).user_id, 'carol', 'the first member_added alice sees is carol, never bob');
  const users = await signedGet(srv.port, APP, `channels/${ch}/users`);
  t.same(users.json.users.map((u: { id: string }) => u.id).sort(), ['alice', 'carol']);
  await receiver.until((r) => r.flatMap((x) => x.body.events).some((e) => e.user_id === 'carol'), 10_000, 'member_added carol');
  t.notOk(receiver.events().some((e) => e.user_id === 'bob'), 'no webhook names bob');
  t.equal((await bob.subscribe('lobby')).event, 'pusher_internal:subscription_succeeded', 'bob\'s connection is kept');
});

t.test('client_event hook: allow, deny (4301 with channel, kept), replace data; a burst stays in order with a backend answering late', async (t) => {
  const { srv, backend } = await setup(t, (url) => ({ url, client_event: { enabled: true, channels: ['private-chat'] } }));
  backend.answer = async (c) => {
    const d = c.body.data as { n: number; text?: string };
    // earlier events are answered later: an event waits for the one before it anyway
    await new Promise((r) => setTimeout(r, (10 - (d.n ?? 0)) * 15));
    if (d.n === 5) return { allow: false, reason: 'five is not allowed' };
    if (d.text === 'darn') return { allow: true, data: { n: d.n, text: '****' } };
    return { allow: true };
  };
  const ch = 'private-chat';
  const a = srv.track(await RawClient.connect(srv.wsUrl()));
  const b = srv.track(await RawClient.connect(srv.wsUrl()));
  await a.subscribeAuthed(ch);
  await b.subscribeAuthed(ch);
  for (let n = 0; n < 10; n++) a.send({ event: 'client-msg', channel: ch, data: n === 7 ? { n, text: 'darn' } : { n } });
  const got: unknown[] = [];
  for (let i = 0; i < 9; i++) got.push(dataOf(await b.event('client-msg', ch, 10_000)));
  t.same(got, [0, 1, 2, 3, 4, 6, 7, 8, 9].map((n) => (n === 7 ? { n, text: '****' } : { n })), 'in the order sent, 5 denied, 7 replaced');
  const err = await a.event('pusher:error');
  t.same(err, { event: 'pusher:error', channel: ch, data: { code: 4301, message: 'five is not allowed' } });
  t.same(backend.calls.map((c) => (c.body.data as { n: number }).n), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 'called in order, one at a time');
  const call = backend.calls[0].body;
  t.equal(call.hook, 'client_event');
  t.equal(call.event, 'client-msg');
  t.equal(call.channel, ch);
  t.equal(call.socket_id, a.socketId);
  t.equal((await a.subscribe('still-open')).event, 'pusher_internal:subscription_succeeded', 'the sender is kept');
});

t.test('connect hook: the socket_id in the call is the client\'s; deny → pusher:error 4009 and close 4009', async (t) => {
  const { srv, backend } = await setup(t, (url) => ({ url, connect: { enabled: true } }), { rate_limiter: { api: { trust_hops: 1 } } });
  backend.answer = (c) => (c.body.connection?.user_agent === 'blocked-agent' ? { allow: false, reason: 'agent not welcome' } : { allow: true });
  const ok = srv.track(await RawClient.connect(srv.wsUrl(), { headers: { 'x-forwarded-for': '198.51.100.1, 203.0.113.9', 'user-agent': 'fine' } }));
  t.match(ok.socketId, /^\d+\.\d+$/);
  t.equal(backend.calls[0].body.socket_id, ok.socketId, 'the socket_id the client then gets');
  t.equal(backend.calls[0].body.hook, 'connect');
  t.equal(backend.calls[0].body.connection?.ip, '203.0.113.9', 'X-Forwarded-For honoured with trust_hops 1');
  const no = new RawClient(new WebSocket(srv.wsUrl(), { headers: { 'user-agent': 'blocked-agent' } }));
  t.same(await no.next(() => true), { event: 'pusher:error', data: { code: 4009, message: 'agent not welcome' } }, 'the first frame, no connection_established');
  t.equal(await no.closed(), 4009);
  t.equal(no.closeReason, 'agent not welcome');
});

t.test('publish hook via the pusher SDK: allow, deny 403, replace, a batch refused whole naming the item, replaced data over the limit', async (t) => {
  const { srv, backend } = await setup(t, (url) => ({ url, publish: { enabled: true, channels: ['news-*'] } }), {}, { max_event_payload_in_kb: 1 });
  backend.answer = (c) => {
    const d = c.body.data as string;
    if (d.includes('spam')) return { allow: false, reason: 'looks like spam' };
    if (d.includes('huge')) return { allow: true, data: 'x'.repeat(2000) };
    if (d.includes('darn')) return { allow: true, data: JSON.stringify({ text: '****' }) };
    return { allow: true };
  };
  const sub = srv.track(await RawClient.connect(srv.wsUrl()));
  await sub.subscribe('news-a');
  await sub.subscribe('other');
  const sdk = srv.sdk();

  const ok = await sdk.trigger('news-a', 'post', { text: 'hello' });
  t.equal(ok.status, 200);
  t.same(dataOf(await sub.event('post', 'news-a')), { text: 'hello' });
  t.equal(backend.calls[0].body.hook, 'publish');
  t.equal(backend.calls[0].body.data, JSON.stringify({ text: 'hello' }), 'data as the API got it');
  t.ok(backend.calls[0].valid);

  const denied = await sdk.trigger('news-a', 'post', { text: 'spam spam' }).then(() => null, (e: { status: number; body: string }) => e);
  t.equal(denied?.status, 403);
  t.same(JSON.parse(denied!.body), { error: 'looks like spam' });

  await sdk.trigger(['news-a', 'other'], 'post', { text: 'darn' });
  t.same(dataOf(await sub.event('post', 'news-a')), { text: '****' }, 'replaced on the hooked channel');
  t.same(dataOf(await sub.event('post', 'other')), { text: 'darn' }, 'as sent on a channel no pattern matches');

  const big = await sdk.trigger('news-a', 'post', { text: 'huge' }).then(() => null, (e: { status: number; body: string }) => e);
  t.equal(big?.status, 413);
  t.match(JSON.parse(big!.body).error, /data is 2000 bytes, more than the 1 KB allowed \(as replaced by the publish hook\)/);

  const batch = await sdk.triggerBatch([
    { channel: 'news-a', name: 'one', data: 'fine' },
    { channel: 'news-a', name: 'two', data: 'spam' },
  ]).then(() => null, (e: { status: number; body: string }) => e);
  t.equal(batch?.status, 403);
  t.same(JSON.parse(batch!.body), { error: 'batch[1]: looks like spam' });
  await sdk.trigger('news-a', 'marker', 'end');
  const after = await sub.event('marker', 'news-a');
  t.ok(after);
  t.notOk(sub.frames.some((f) => f.event === 'one'), 'nothing of the refused batch was delivered');
});

t.test('pusher-js: a denied subscribe is pusher:subscription_error on the channel; client events replaced between pusher-js clients', async (t) => {
  const { srv, backend } = await setup(t, (url) => allHooks(url, { connect: { enabled: false }, publish: { enabled: false } }));
  backend.answer = (c) => {
    if (c.body.hook === 'subscribe' && c.body.channel === 'private-secret') return { allow: false, reason: 'not for you' };
    if (c.body.hook === 'client_event') return { allow: true, data: { said: 'rewritten' } };
    return { allow: true };
  };
  const p1 = srv.track(pusherJs(srv.port));
  const p2 = srv.track(pusherJs(srv.port));
  await connected(p1);
  await connected(p2);
  const err = await new Promise<unknown>((resolve) => p1.subscribe('private-secret').bind('pusher:subscription_error', resolve));
  t.same(err, { type: 'AuthError', error: 'not for you', status: 403 });
  const c1 = p1.subscribe('private-room');
  const c2 = p2.subscribe('private-room');
  await Promise.all([c1, c2].map((c) => new Promise((r) => c.bind('pusher:subscription_succeeded', r))));
  const got = new Promise((resolve) => c2.bind('client-say', resolve));
  c1.trigger('client-say', { said: 'original' });
  t.same(await got, { said: 'rewritten' });
});

t.test('an app without hooks next to one with them: no call', async (t) => {
  const backend = await startHookBackend();
  const srv = await startServer({ apps: [{ ...APP }, { id: 'hooked', key: 'hooked-key', secret: 'hooked-secret', hooks: allHooks(backend.url) }] });
  t.teardown(async () => {
    await srv.stop();
    await backend.close();
  });
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  await c.subscribeAuthed('private-x');
  c.send({ event: 'client-x', channel: 'private-x', data: {} });
  await c.sync();
  await srv.sdk().trigger('private-x', 'e', {});
  await c.event('e', 'private-x');
  t.equal(backend.calls.length, 0, 'another app\'s hooks are not called');
});
