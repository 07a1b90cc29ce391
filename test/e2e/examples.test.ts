// examples/publish.ts and the backend of examples/chat-server.ts (its answers to bad
// input), against a test server. The chat page itself: test/e2e/chat-browser.test.ts.

import t from 'tap';
import { CHANNEL, MAX_TEXT, startChatServer } from '../../examples/chat-server';
import { publish } from '../../examples/publish';
import { connected, pusherJs } from '../helpers/pusher-js';
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
  t.same(cfg, { key: APP.key, wsHost: '127.0.0.1', wsPort: srv.port, channel: CHANNEL });
  t.equal((await fetch(`${base}/pusher.min.js`)).status, 200, 'pusher-js is served with the page');

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
