// Backend hooks behind Laravel Echo 2 (its pusher broadcaster on a stock pusher-js): a
// subscribe the hook denies reaches Echo's `.error()` callback as the protocol's
// subscription_error, a whisper (client event) arrives as the hook replaced it, and an API
// publish the publish hook rewrote reaches `.listen()` rewritten.

import type EchoType from 'laravel-echo';
import t from 'tap';
import { allHooks, startHookBackend } from '../helpers/hook-backend';
import { connected, pusherJs } from '../helpers/pusher-js';
import { APP, startServer } from '../helpers/server';

// laravel-echo is an ES module ("type": "module"; its CommonJS build does not load under
// Node 20's require): imported as such, past tsc's CommonJS rewrite of import().
const importEsm = new Function('s', 'return import(s)') as (s: string) => Promise<{ default: typeof EchoType }>;

t.test('Laravel Echo: denied private channel, rewritten whisper, rewritten API event', async (t) => {
  const { default: Echo } = await importEsm('laravel-echo');
  const backend = await startHookBackend();
  const srv = await startServer({ apps: [{ ...APP, hooks: allHooks(backend.url, { connect: { enabled: false } }) }] });
  t.teardown(async () => {
    await srv.stop();
    await backend.close();
  });
  backend.answer = (c) => {
    if (c.body.hook === 'subscribe' && c.body.channel === 'private-vault') return { allow: false, reason: 'the vault is closed' };
    if (c.body.hook === 'client_event') return { allow: true, data: { typing: 'someone' } };
    if (c.body.hook === 'publish') return { allow: true, data: JSON.stringify({ text: 'rewritten by the backend' }) };
    return { allow: true };
  };
  const p1 = srv.track(pusherJs(srv.port));
  const p2 = srv.track(pusherJs(srv.port));
  await connected(p1);
  await connected(p2);
  const echo1 = new Echo({ broadcaster: 'pusher', key: APP.key, client: p1 });
  const echo2 = new Echo({ broadcaster: 'pusher', key: APP.key, client: p2 });

  const denied = await new Promise<unknown>((resolve) => echo1.private('vault').error(resolve));
  t.same(denied, { type: 'AuthError', error: 'the vault is closed', status: 403 }, 'Echo\'s error callback gets the denial');

  const room1 = echo1.private('room');
  const room2 = echo2.private('room');
  const whisper = new Promise<unknown>((resolve) => room2.listenForWhisper('typing', resolve));
  const api = new Promise<unknown>((resolve) => room2.listen('.news', resolve));
  await Promise.all([room1, room2].map((ch) => new Promise((r) => ch.subscribed(() => r(undefined)))));
  room1.whisper('typing', { typing: 'alice' });
  t.same(await whisper, { typing: 'someone' }, 'the whisper as the client_event hook replaced it');
  await srv.sdk().trigger('private-room', 'news', { text: 'original' });
  t.same(await api, { text: 'rewritten by the backend' }, 'the API event as the publish hook replaced it');
  t.ok(backend.calls.every((c) => c.valid), 'every call verified by the pusher SDK\'s webhook()');
});
