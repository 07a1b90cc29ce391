// Stock pusher-js in Node forced onto each HTTP fallback transport (xhr_streaming, then
// xhr_polling): everything an app does over a WebSocket works over HTTP, with WebSocket
// clients on the same channels. Runs with workers 1 and 4 (RINGCAST_TEST_WORKERS): with 4,
// a session's requests land on any shard and are relayed to its home (fallback/service.ts).

import t from 'tap';
import type { Channel } from 'pusher-js';
import { collect, connected, subscribed } from '../helpers/pusher-js';
import { counterValue, fallbackClient, FALLBACK_TRANSPORTS, MASTER_KEY, transportOf } from '../helpers/fallback';
import { freePort } from '../helpers/net';
import { APP, RawClient, eventually, startServer } from '../helpers/server';
import { sign } from '../helpers/auth';

// Many real sessions and servers in one file: more than tap's default 120 s on a loaded 2-core machine.
t.setTimeout(360_000);

for (const transport of FALLBACK_TRANSPORTS) {
  t.test(`pusher-js over ${transport}`, async (t) => {
    const srv = await startServer({ http_fallback: { disconnect_delay: 1 }, metrics: { enabled: true, host: '127.0.0.1', port: 0 } });
    t.teardown(() => srv.stop());
    const receives = () => counterValue(srv.server.metricsPort!, 'fallback_requests_total', `transport="${transport === 'xhr_polling' ? 'xhr' : transport}"`);
    const sdk = srv.sdk();

    t.test('connects over the transport; public channel events', async (t) => {
      const c = srv.track(fallbackClient(srv.port, transport));
      const socketId = await connected(c, 15_000);
      t.equal(transportOf(c), transport, 'pusher-js connected with the forced transport');
      t.match(socketId, /^\d+\.\d+$/);
      const ch = await subscribed(c, 'public-a');
      const ev = collect(ch, 'ev');
      await sdk.trigger('public-a', 'ev', { n: 1 });
      await sdk.trigger('public-a', 'ev', { n: 2 });
      await ev.until(2, 'two events');
      t.same(ev.got, [{ n: 1 }, { n: 2 }], 'in order');
      c.disconnect();
    });

    t.test('private channel: client events both ways with a WebSocket client, excluded from the sender', async (t) => {
      const c = srv.track(fallbackClient(srv.port, transport));
      const socketId = await connected(c, 15_000);
      const ch = await subscribed(c, 'private-chat');
      const ws = srv.track(await RawClient.connect(srv.wsUrl()));
      ws.send({ event: 'pusher:subscribe', data: { channel: 'private-chat', auth: sign(APP, ws.socketId, 'private-chat') } });
      await ws.event('pusher_internal:subscription_succeeded', 'private-chat');
      const fromWs = collect(ch, 'client-hi');
      ch.trigger('client-hi', { from: 'http' });
      const seen = await ws.event('client-hi', 'private-chat', 10_000);
      t.same(seen.data, { from: 'http' }, 'the WebSocket client got the session\'s client event');
      ws.send({ event: 'client-hi', channel: 'private-chat', data: { from: 'ws' } });
      await fromWs.until(1, 'the client event from the WebSocket');
      t.same(fromWs.got, [{ from: 'ws' }], 'the session did not get its own client event back');
      // socket_id exclusion of an API event
      const api = collect(ch, 'api');
      await sdk.trigger('private-chat', 'api', { n: 1 }, { socket_id: socketId });
      await sdk.trigger('private-chat', 'api', { n: 2 });
      await api.until(1, 'the marker event');
      t.same(api.got, [{ n: 2 }], 'the excluded event did not reach the session');
      c.disconnect();
    });

    t.test('presence: members both ways; the session\'s end after the grace period is a member_removed', async (t) => {
      const ws = srv.track(await RawClient.connect(srv.wsUrl()));
      const cd = JSON.stringify({ user_id: 'ws-user' });
      ws.send({ event: 'pusher:subscribe', data: { channel: 'presence-room', auth: sign(APP, ws.socketId, 'presence-room', cd), channel_data: cd } });
      await ws.event('pusher_internal:subscription_succeeded', 'presence-room');
      const c = fallbackClient(srv.port, transport, { user: { user_id: 'http-user', user_info: { name: 'H' } } });
      await connected(c, 15_000);
      const ch = await subscribed(c, 'presence-room') as Channel & { members: { count: number; get(id: string): unknown } };
      t.equal(ch.members.count, 2, 'the session sees both members');
      t.ok(ch.members.get('ws-user'));
      const added = await ws.event('pusher_internal:member_added', 'presence-room', 10_000);
      t.same(JSON.parse(added.data), { user_id: 'http-user', user_info: { name: 'H' } });
      // pusher-js's disconnect only aborts the receiving request: the server ends the session
      // after http_fallback.disconnect_delay without one, as a dropped WebSocket
      c.disconnect();
      const removed = await ws.event('pusher_internal:member_removed', 'presence-room', 15_000);
      t.same(JSON.parse(removed.data), { user_id: 'http-user' });
    });

    t.test('encrypted channel: the SDK encrypts, the session decrypts', async (t) => {
      const c = srv.track(fallbackClient(srv.port, transport));
      await connected(c, 15_000);
      const ch = await subscribed(c, 'private-encrypted-secret');
      const ev = collect(ch, 'ev');
      const enc = srv.sdk();
      (enc as unknown as { config: { encryptionMasterKey: Buffer } }).config.encryptionMasterKey = Buffer.from(MASTER_KEY, 'base64');
      await enc.trigger('private-encrypted-secret', 'ev', { secret: 'sauce' });
      await ev.until(1, 'the encrypted event');
      t.same(ev.got, [{ secret: 'sauce' }]);
      c.disconnect();
    });

    t.test('sign-in and a message to the user', async (t) => {
      const c = srv.track(fallbackClient(srv.port, transport, { user: { user_id: 'u-42' } }));
      await connected(c, 15_000);
      const signedIn = new Promise<void>((resolve) => c.bind('pusher:signin_success', () => resolve()));
      c.signin();
      await signedIn;
      const got: unknown[] = [];
      c.user.bind('note', (d: unknown) => got.push(d));
      await eventually(async () => {
        await sdk.sendToUser('u-42', 'note', { hi: got.length });
        return got.length > 0;
      }, 10_000, 'the message to the user');
      t.same(got[0], { hi: 0 });
      c.disconnect();
    });

    t.test('a 300 KiB burst: the stream is reopened past 256 KiB, nothing lost or duplicated, same socket_id', async (t) => {
      const c = srv.track(fallbackClient(srv.port, transport));
      const socketId = await connected(c, 15_000);
      const states: string[] = [];
      c.connection.bind('state_change', (s: { current: string }) => states.push(s.current));
      const ch = await subscribed(c, 'burst');
      const ev = collect<{ i: number }>(ch, 'b');
      const before = await receives();
      const pad = 'x'.repeat(900);
      const total = 340; // ~1,000 characters each on the wire: ~330 KiB
      for (let i = 0; i < total; i += 10) {
        await sdk.triggerBatch(Array.from({ length: 10 }, (_, k) => ({ channel: 'burst', name: 'b', data: { i: i + k, pad } })));
      }
      await ev.until(total, `${total} events`, 30_000);
      t.same(ev.got.map((d) => d.i), Array.from({ length: total }, (_, i) => i), 'every event once, in order');
      t.equal(c.connection.socket_id, socketId, 'the same connection');
      t.same(states, [], 'pusher-js never left the connected state');
      // streaming: pusher-js reopened its stream past 256 KiB (at least once); polling: many polls
      t.ok(await receives() - before >= (transport === 'xhr_streaming' ? 1 : 2), 'receiving requests were made again on the same session');
      c.disconnect();
    });
  });
}

t.test('pusher-js over HTTP reconnects after the server restarts on the same port', async (t) => {
  const port = await freePort();
  let srv = await startServer({ port, http_fallback: { disconnect_delay: 1 } });
  const c = fallbackClient(port, 'xhr_streaming');
  t.teardown(() => c.disconnect());
  const first = await connected(c, 15_000);
  const closed = new Promise<void>((resolve) => c.connection.bind('state_change', (s: { current: string }) => s.current !== 'connected' && resolve()));
  await srv.stop();
  await closed;
  srv = await startServer({ port, http_fallback: { disconnect_delay: 1 } });
  t.teardown(() => srv.stop());
  await eventually(() => c.connection.state === 'connected' && c.connection.socket_id !== first, 40_000, 'pusher-js connected again');
  const ch = await subscribed(c, 'after');
  const ev = collect(ch, 'ev');
  await srv.sdk().trigger('after', 'ev', { ok: true });
  await ev.until(1, 'an event after the restart');
  t.pass('subscribed and received again');
});
