// History under a hostile client: a connection's unanswered history questions are bounded
// (history.max_questions_per_connection, one per channel), so subscribe / unsubscribe
// churn with `recover` from serial 0 cannot pile up replays of a large channel; while four
// sockets do it, an idle socket's pings are answered in time and API publishes elsewhere
// succeed. Workers 1 and 4.
import t from 'tap';
import WebSocket from 'ws';
import { RedisServer, redisCommand } from '../helpers/redis';
import { APP, RawClient, startServer, type Frame } from '../helpers/server';

const HISTORY = { 'big-*': { size: 100, ttl: 600 }, 'h-*': { size: 10, ttl: 600 } };

/** Sends the frames in one write: the server reads them in one go, before any answer of theirs can come. */
function burst(c: RawClient, frames: unknown[]): void {
  const sock = (c.ws as unknown as { _socket: { cork(): void; uncork(): void } })._socket;
  sock.cork();
  for (const f of frames) c.send(f);
  sock.uncork();
}

t.test('history under a hostile client', async (t) => {
  // (the API publishes as fast as it answers: past the app's 1,000/s when the server keeps up)
  // a replay budget of 256 KiB/s: about one chunk of replay (history/replay.ts) per connection and second
  const srv = await startServer({ history: { replay_bytes_per_second: 262_144 }, apps: [{ ...APP, max_event_payload_in_kb: 64, max_client_events_per_second: 100_000, channel_history: HISTORY as never }] });
  t.teardown(() => srv.stop());
  const sdk = srv.sdk();

  // history.driver redis: every answer comes from Redis, after the frames read in one go
  const redis = await RedisServer.start();
  t.teardown(() => redis.stop());
  const rsrv = await startServer({ database: { redis: { host: '127.0.0.1', port: redis.port } }, history: { driver: 'redis' }, apps: [{ ...APP, channel_history: HISTORY as never }] });
  t.teardown(() => rsrv.stop());

  await t.test('redis driver: subscribes to names nobody publishes on leave no key; the first message keeps the epoch read', async (t) => {
    const c = rsrv.track(await RawClient.connect(rsrv.wsUrl()));
    for (let i = 0; i < 300; i += 3) {
      const names = [0, 1, 2].map((k) => `h-${Math.random().toString(36).slice(2)}-${i + k}`);
      burst(c, names.map((channel) => ({ event: 'pusher:subscribe', data: { channel, recover: {} } })));
      for (const ch of names) await c.event('pusher_internal:recovery', ch);
      burst(c, names.map((channel) => ({ event: 'pusher:unsubscribe', data: { channel } })));
    }
    t.equal(await redisCommand(redis.port, 'DBSIZE'), ':0\r\n', '300 recover subscribes on empty channels: no key in Redis');
    await c.subscribe('h-first', { recover: {} });
    const pos = await c.event('pusher_internal:recovery', 'h-first');
    const epoch = (typeof pos.data === 'string' ? JSON.parse(pos.data) : pos.data).epoch as string;
    await rsrv.sdk().trigger('h-first', 'ev', { n: 1 });
    const m = await c.event('ev', 'h-first');
    t.equal((m as Frame & { __serial: number }).__serial, 1);
    t.notOk(c.frames.some((f) => f.event === 'pusher_internal:recovery' && f.channel === 'h-first'), 'no epoch_changed before it');
    const d = rsrv.track(await RawClient.connect(rsrv.wsUrl()));
    await d.subscribe('h-first', { recover: { epoch, serial: 0 } });
    t.match((await d.event('pusher_internal:recovery', 'h-first')).data, { epoch, serial: 1, recovered: true, missed: 1 }, 'the position read while empty recovers');
  });

  await t.test('at most max_questions_per_connection unanswered, one per channel; the rest LimitReached', async (t) => {
    const c = rsrv.track(await RawClient.connect(rsrv.wsUrl()));
    const channels = Array.from({ length: 10 }, (_, i) => `h-${i}`);
    // their numbered subjects held on this shard first (a first subscriber waits for Redis:
    // history/redis-subjects.ts), so the burst below is read and answered in one go
    for (const ch of channels) await c.subscribe(ch);
    for (const ch of channels) c.send({ event: 'pusher:unsubscribe', data: { channel: ch } });
    burst(c, [
      ...channels.map((channel) => ({ event: 'pusher:subscribe', data: { channel, recover: {} } })),
      { event: 'pusher:unsubscribe', data: { channel: 'h-0' } },
      { event: 'pusher:subscribe', data: { channel: 'h-0', recover: {} } },
    ]);
    const answers: Frame[] = [];
    for (let i = 0; i < 11; i++) answers.push(await c.next((f) => f.event === 'pusher_internal:subscription_succeeded' || f.event === 'pusher:subscription_error'));
    const ok = answers.filter((f) => f.event === 'pusher_internal:subscription_succeeded').map((f) => f.channel);
    const refused = answers.filter((f) => f.event === 'pusher:subscription_error');
    t.same(ok, ['h-0', 'h-1', 'h-2', 'h-3'], 'the first 4 are asked', { answers });
    t.equal(refused.length, 7);
    t.match(refused.find((f) => f.channel === 'h-4')!.data, { type: 'LimitReached', status: 4100, error: /4 history questions unanswered.*history.max_questions_per_connection/ });
    t.match(refused.find((f) => f.channel === 'h-0')!.data, { type: 'LimitReached', status: 4100, error: /history of h-0 is still being fetched/ });
    // answered: the connection may ask again
    for (const ch of ['h-1', 'h-2', 'h-3']) await c.event('pusher_internal:recovery', ch);
    t.equal((await c.subscribe('h-9', { recover: {} })).event, 'pusher_internal:subscription_succeeded', 'once answered, more may be asked');
  });

  await t.test('4 sockets churning recover from 0 on 100 × 20 KiB: pings and publishes elsewhere stay fast', async (t) => {
    const big = 'x'.repeat(20 * 1024);
    for (let i = 0; i < 100; i += 10) {
      await sdk.triggerBatch(Array.from({ length: 10 }, (_, k) => ({ channel: 'big-1', name: 'ev', data: { i: i + k, big } })));
    }
    const epoch = await (async () => {
      const c = srv.track(await RawClient.connect(srv.wsUrl()));
      await c.subscribe('big-1', { recover: {} });
      const r = await c.event('pusher_internal:recovery', 'big-1');
      await c.close();
      return (typeof r.data === 'string' ? JSON.parse(r.data) : r.data).epoch as string;
    })();
    // plain sockets that never parse what they get (the test's own event loop measures the pings)
    const attackers = await Promise.all(Array.from({ length: 4 }, () => new Promise<WebSocket>((resolve, reject) => {
      const ws = new WebSocket(srv.wsUrl());
      ws.once('message', () => resolve(ws));
      ws.once('error', reject);
    })));
    const idle = srv.track(await RawClient.connect(srv.wsUrl()));
    const churn = setInterval(() => {
      for (const ws of attackers) {
        if (ws.readyState !== WebSocket.OPEN) continue;
        for (let i = 0; i < 10; i++) {
          ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'big-1', recover: { epoch, serial: 0 } } }));
          ws.send(JSON.stringify({ event: 'pusher:unsubscribe', data: { channel: 'big-1' } }));
        }
      }
    }, 10);
    const pings: number[] = [];
    const publishes: number[] = [];
    const until = Date.now() + 1500;
    while (Date.now() < until) {
      let at = Date.now();
      idle.send({ event: 'pusher:ping', data: {} });
      await idle.event('pusher:pong', undefined, 10_000);
      pings.push(Date.now() - at);
      at = Date.now();
      await sdk.trigger('elsewhere', 'ev', { at });
      publishes.push(Date.now() - at);
    }
    clearInterval(churn);
    const closedBy = attackers.map((ws) => ws.readyState === WebSocket.OPEN ? null : 'closed');
    for (const ws of attackers) ws.terminate();
    const p99 = (xs: number[]) => xs.sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.99))];
    t.ok(p99(pings) <= 200, `idle socket's ping p99 ${p99(pings)} ms ≤ 200 ms (${pings.length} pings)`);
    t.ok(p99(publishes) <= 200, `API publish p99 ${p99(publishes)} ms ≤ 200 ms (${publishes.length})`);
    t.ok(idle.closeCode === null, 'the idle socket is still connected');
    // one connection recovering the 2 MB again and again: each replay is paced to
    // history.replay_bytes_per_second, and a question asked while its budget is overdrawn
    // (or while its replay's chunk is on its way) is refused
    let refused: Frame | undefined;
    for (let i = 0; i < 12 && refused === undefined; i++) {
      const f = await idle.subscribe('big-1', { recover: { epoch, serial: 0 } });
      if (f.event === 'pusher:subscription_error') refused = f;
      else await idle.event('pusher_internal:recovery', 'big-1', 10_000);
      idle.send({ event: 'pusher:unsubscribe', data: { channel: 'big-1' } });
    }
    // (refused for the budget, or for the replay's next chunk still on its way when it came back)
    t.match(refused?.data, { type: 'LimitReached', status: 4100, error: /more replayed history than history.replay_bytes_per_second allows; subscribe again in \d+ ms|the history of big-1 is still being fetched/ }, 'the replay budget refuses');
    t.comment(`attackers closed by the server: ${closedBy.filter((x) => x !== null).length} of 4`);
  });
});
