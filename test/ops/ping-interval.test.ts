// test-modes: once (uWS pings each socket on its own whatever the shard count)
// websocket.auto_ping / websocket.ping_interval: uWS sends WebSocket ping frames after
// ping_interval seconds without a frame from the client, and closes a client that does not
// answer (ws/connection.ts idleTimeoutFor). uWS's timers tick every 4 s, so a ping comes
// after ping_interval − 4 to ping_interval s of silence (the default, 30 s, would be far later).

import t from 'tap';
import { idleTimeoutFor } from '../../src/ws/connection';
import { RawClient, startServer } from '../helpers/server';

t.test('idleTimeoutFor: the uWS idle timeout whose ping point is ping_interval', async (t) => {
  // uWS pings at idleTimeout − margin: margin 4 below 16, 8 below 32, else 16.
  for (const [interval, timeout] of [[4, 8], [10, 14], [11, 15], [12, 20], [16, 24], [23, 31], [24, 40], [30, 46], [900, 916]]) {
    t.equal(idleTimeoutFor({ auto_ping: true, ping_interval: interval }, 0), timeout, `ping_interval ${interval} → idleTimeout ${timeout}`);
  }
  t.equal(idleTimeoutFor({ auto_ping: false, ping_interval: 4 }, 150_000), 158, 'auto_ping off: the backstop behind activity_timeout + pong_timeout');
});

t.test('ping_interval 4: a silent client gets WebSocket pings; one that does not answer is closed', async (t) => {
  const srv = await startServer({ websocket: { auto_ping: true, ping_interval: 4 } });
  t.teardown(() => srv.stop());
  const answering = srv.track(await RawClient.connect(srv.wsUrl()));
  const mute = srv.track(await RawClient.connect(srv.wsUrl(), { autoPong: false }));
  const t0 = Date.now();
  const pinged = (c: RawClient) => new Promise<number>((resolve) => c.ws.once('ping', () => resolve(Date.now() - t0)));
  const [a, m] = await Promise.all([pinged(answering), pinged(mute)]);
  t.ok(a <= 12_000, `pinged after ${a} ms of silence`);
  t.ok(m <= 12_000, `the mute client too (${m} ms)`);
  const code = await new Promise<number>((resolve) => mute.ws.once('close', (c: number) => resolve(c)));
  t.equal(code, 1006, `no pong: closed by the server (after ${Date.now() - t0} ms)`);
  t.ok(Date.now() - t0 < 20_000);
  // The answering client is still served: a second ping, then a subscription.
  await pinged(answering);
  t.equal((await answering.subscribe('still-here')).event, 'pusher_internal:subscription_succeeded', 'pong answered: still connected');
});

t.test('auto_ping false: no WebSocket ping before the protocol\'s own pusher:ping', async (t) => {
  const srv = await startServer({ websocket: { auto_ping: false, ping_interval: 4, activity_timeout: 12 } });
  t.teardown(() => srv.stop());
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  let wsPings = 0;
  c.ws.on('ping', () => wsPings++);
  // The positive marker: the server's pusher:ping after activity_timeout (12 s) of silence,
  // by when uWS would have pinged at least twice with auto_ping on.
  await c.next((f) => f.event === 'pusher:ping', 30_000);
  t.equal(wsPings, 0, 'no WebSocket ping frame');
});

t.test('ping_interval out of range is refused', async (t) => {
  await t.rejects(startServer({ websocket: { ping_interval: 3 } }), { code: 'RC_ERR_CONFIG', key: 'websocket.ping_interval' });
  await t.rejects(startServer({ websocket: { ping_interval: 901 } }), { code: 'RC_ERR_CONFIG', key: 'websocket.ping_interval' });
});
