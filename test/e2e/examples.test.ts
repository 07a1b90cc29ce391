// test-modes: once (the examples as a user runs them; the server paths they use run with 1 and 4 shards elsewhere)
// examples/publish.ts and the backend of examples/chat-server.ts (its answers to bad
// input, its hooks endpoint: examples/hooks-backend.ts), against a test server. The chat page itself: test/e2e/chat-browser.test.ts.

import { createHmac } from 'node:crypto';
import t from 'tap';
import { CHANNEL, LOG_CHANNEL, MAX_TEXT, startChatServer } from '../../examples/chat-server';
import { HOOKS_PATH, startHooksBackend } from '../../examples/hooks-backend';
import { publish } from '../../examples/publish';
import { collect, connected, pusherJs, subscribed } from '../helpers/pusher-js';
import { APP, startServer } from '../helpers/server';

t.test('examples/publish.ts publishes with the pusher SDK', async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.stop());
  const client = srv.track(pusherJs(srv.port));
  await connected(client);
  const got: unknown[] = [];
  const ch = client.subscribe('news');
  ch.bind('headline', (d: unknown) => got.push(d));
  await new Promise<void>((r) => ch.bind('pusher:subscription_succeeded', () => r()));

  const r = await publish({ host: '127.0.0.1', port: srv.port, channels: ['news', 'other'], event: 'headline', data: { title: 'hi' }, appId: APP.id, key: APP.key, secret: APP.secret });
  t.same(r, { status: 200, subscriptionCount: 1 });
  await new Promise<void>((resolve) => {
    const check = (): void => (got.length > 0 ? resolve() : void setTimeout(check, 10));
    check();
  });
  t.same(got, [{ title: 'hi' }]);

  await t.rejects(publish({ host: '127.0.0.1', port: srv.port, channels: [], event: 'e', data: 1 }), /at least one --channel/);
  const refused = await publish({ host: '127.0.0.1', port: srv.port, channels: ['news'], event: 'e', data: 1, appId: APP.id, key: APP.key, secret: 'wrong' })
    .then(() => 'accepted', (e: { status?: number }) => e.status);
  t.equal(refused, 401, 'a wrong secret is refused with 401');
});

t.test('the chat backend refuses bad input with a clear error', async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.stop());
  const chat = await startChatServer({ port: 0, ringcastHost: '127.0.0.1', ringcastPort: srv.port, appId: APP.id, key: APP.key, secret: APP.secret });
  t.teardown(() => chat.close());
  const base = `http://127.0.0.1:${chat.port}`;
  const form = (o: Record<string, string>): RequestInit => ({ method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(o).toString() });
  const json = (o: unknown): RequestInit => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof o === 'string' ? o : JSON.stringify(o) });
  const answer = async (path: string, init?: RequestInit): Promise<[number, string]> => {
    const res = await fetch(base + path, init);
    return [res.status, res.status === 204 ? '' : ((await res.json()) as { error: string }).error];
  };

  const cfg = (await (await fetch(`${base}/config.json`)).json()) as { key: string; wsPort: number; channel: string };
  t.same(cfg, { key: APP.key, wsHost: '127.0.0.1', wsPort: srv.port, channel: CHANNEL, log: LOG_CHANNEL });
  t.equal((await fetch(`${base}/pusher.min.js`)).status, 200, 'pusher-js is served with the page');
  t.equal((await fetch(`${base}/client/recovery.js`)).status, 200, 'the recovery plug-in is served with the page');

  // Presence auth signs what the SDK would, and names what is missing or wrong.
  const ok = await fetch(`${base}/pusher/auth`, form({ socket_id: '123.456', channel_name: CHANNEL, user_id: 'u1', name: 'Ann' }));
  const auth = (await ok.json()) as { auth: string; channel_data: string };
  t.equal(ok.status, 200);
  t.same(JSON.parse(auth.channel_data), { user_id: 'u1', user_info: { name: 'Ann' } });
  t.same(auth, srv.sdk().authorizeChannel('123.456', CHANNEL, { user_id: 'u1', user_info: { name: 'Ann' } }));
  t.same(await answer('/pusher/auth', form({ channel_name: CHANNEL })), [400, 'socket_id is required']);
  t.same(await answer('/pusher/auth', form({ socket_id: '1.2', channel_name: CHANNEL, user_id: 'u1' })), [400, 'name is required']);
  t.same(await answer('/pusher/auth', form({ socket_id: '1.2', channel_name: CHANNEL, user_id: 'a b', name: 'x' })), [400, 'user_id may hold letters, digits, - and _ only']);
  t.same(await answer('/pusher/auth', form({ socket_id: '1.2', channel_name: CHANNEL, user_id: 'u', name: 'x'.repeat(41) })), [400, 'name is longer than 40 characters']);
  t.same(await answer('/pusher/auth', form({ socket_id: '1.2', channel_name: 'presence-other', user_id: 'u', name: 'x' })), [403, 'this backend signs presence-chat and private- channels only, not presence-other']);
  t.equal((await fetch(`${base}/pusher/auth`, form({ socket_id: '1.2', channel_name: 'private-x' }))).status, 200, 'private channels are signed');

  // Messages.
  t.same(await answer('/messages', json({ name: 'Ann', text: 'hi' })), [204, '']);
  t.same(await answer('/messages', json('{')), [400, 'the body is not JSON']);
  t.same(await answer('/messages', json({ name: 'Ann' })), [400, 'text is required']);
  t.same(await answer('/messages', json({ name: 'Ann', text: 'x'.repeat(MAX_TEXT + 1) })), [400, `text is longer than ${MAX_TEXT} characters`]);
  t.same(await answer('/messages', json('x'.repeat(20_000))), [413, 'body over 16384 bytes']);
  t.same(await answer('/nowhere'), [404, 'no route GET /nowhere']);

  // ringcast down: the backend says so.
  await srv.stop();
  const [status, error] = await answer('/messages', json({ name: 'Ann', text: 'hi' }));
  t.equal(status, 502);
  t.match(error, new RegExp(`^cannot reach ringcast at 127.0.0.1:${srv.port} \\(`));
});

t.test('the chat backend answers hook calls signed with the app secret only', async (t) => {
  const chat = await startChatServer({ port: 0, ringcastHost: '127.0.0.1', ringcastPort: 1, appId: APP.id, key: APP.key, secret: APP.secret });
  t.teardown(() => chat.close());
  const call = async (body: object | string, secret: string = APP.secret, key: string = APP.key): Promise<[number, unknown]> => {
    const raw = typeof body === 'string' ? body : JSON.stringify(body);
    const res = await fetch(`http://127.0.0.1:${chat.port}${HOOKS_PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-pusher-key': key, 'x-pusher-signature': createHmac('sha256', secret).update(raw).digest('hex') },
      body: raw,
    });
    return [res.status, await res.json()];
  };
  const member = (name: string): string => JSON.stringify({ user_id: 'u1', user_info: { name } });
  const subscribe = (name: string) => ({ hook: 'subscribe', app_id: APP.id, socket_id: '1.2', channel: CHANNEL, channel_data: member(name) });

  t.same(await call(subscribe('Ann')), [200, { allow: true }], 'a member is let in');
  t.same(await call(subscribe('MALLORY')), [200, { allow: false, reason: 'MALLORY is not welcome in presence-chat' }], 'a blocked name is refused, without case');
  const publish = { hook: 'publish', app_id: APP.id, channel: LOG_CHANNEL, event: 'message', data: JSON.stringify({ name: 'Ann', text: 'Darn it, darning is hard', at: 1 }) };
  t.same(await call(publish), [200, { allow: true, data: JSON.stringify({ name: 'Ann', text: '**** it, darning is hard', at: 1 }) }], 'whole bad words are starred out');
  t.same(await call({ ...publish, event: 'other' }), [200, { allow: true }], 'other events pass unchanged');
  t.same(await call({ hook: 'connect', app_id: APP.id, socket_id: '1.2' }), [200, { allow: true }], 'other hooks are allowed');

  const unsigned = [401, { error: 'the call is not JSON signed with this app\'s key and secret' }];
  t.same(await call(subscribe('Ann'), 'wrong-secret'), unsigned, 'a wrong signature: 401');
  t.same(await call(subscribe('Ann'), APP.secret, 'other-key'), unsigned, 'another app\'s key: 401');
  t.same(await call('{'), unsigned, 'a body that is not JSON: 401');
  t.same(await call({ ...publish, data: '{' }), [400, { error: 'the call\'s channel_data or data is not JSON' }]);
});

t.test('examples/hooks-backend.ts alone answers a server\'s hooks: pusher-js clients see the refusal and the rewrite', async (t) => {
  const hooks = await startHooksBackend({ port: 0, appId: APP.id, key: APP.key, secret: APP.secret });
  t.teardown(() => hooks.close());
  const srv = await startServer({ apps: [{ ...APP, hooks: {
    url: `http://127.0.0.1:${hooks.port}${HOOKS_PATH}`,
    subscribe: { enabled: true, channels: [CHANNEL] },
    publish: { enabled: true, channels: [LOG_CHANNEL] },
  } as never }] });
  t.teardown(() => srv.stop());

  const mallory = srv.track(pusherJs(srv.port, { user: { user_id: 'm', user_info: { name: 'Mallory' } } }));
  await t.rejects(subscribed(mallory, CHANNEL), { message: 'subscription_error {"type":"AuthError","error":"Mallory is not welcome in presence-chat","status":403}' }, 'Mallory is refused with the backend\'s reason');
  const ann = srv.track(pusherJs(srv.port, { user: { user_id: 'a', user_info: { name: 'Ann' } } }));
  await subscribed(ann, CHANNEL);
  const got = collect<{ text: string }>(await subscribed(ann, LOG_CHANNEL), 'message');
  await srv.sdk().trigger(LOG_CHANNEL, 'message', { name: 'Ann', text: 'heck yes' });
  await got.until(1, 'the message');
  t.same(got.got, [{ name: 'Ann', text: '**** yes' }], 'the published message arrives rewritten');

  const base = `http://127.0.0.1:${hooks.port}`;
  const res = await fetch(`${base}${HOOKS_PATH}`, { method: 'POST', body: 'x'.repeat(300 * 1024) });
  t.same([res.status, await res.json()], [413, { error: 'call over 262144 bytes' }], 'a call over the bound: 413');
  const other = await fetch(`${base}/elsewhere`);
  t.same([other.status, await other.json()], [404, { error: 'no route GET /elsewhere' }]);
});
