// A long replay travels in chunks, paced by the reader (history/replay.ts): a client that
// recovers 200 × 50 KiB (10 MB, past websocket.max_bytes and uWS's own cap of twice that)
// while it does not read for a while gets every message once, in order, then live ones,
// and is not closed; the answer of each chunk is bounded. Without the pacing the replay is
// written in one go and what does not fit the socket's buffers is skipped. Memory and
// redis drivers; workers 1 and 4.
import t from 'tap';
import type { ConfigInput } from '../../src/config';
import { RedisServer } from '../helpers/redis';
import { APP, RawClient, WORKERS, eventually, startServer, type Frame } from '../helpers/server';

t.setTimeout(120_000);

const HISTORY = { 'big-*': { size: 300, ttl: 600 } };
const COUNT = 200;
const BIG = 'x'.repeat(50 * 1024);

type Serial = Frame & { __serial?: number };

for (const driver of ['memory', 'redis'] as const) {
  t.test(`history.driver ${driver}: a 10 MB recovery by a client that does not read for a while (${WORKERS} workers)`, async (t) => {
    let extra: ConfigInput = {};
    if (driver === 'redis') {
      const redis = await RedisServer.start();
      t.teardown(() => redis.stop());
      extra = { history: { driver: 'redis' }, database: { redis: { host: '127.0.0.1', port: redis.port } } };
    }
    const srv = await startServer({ ...extra, apps: [{ ...APP, max_event_payload_in_kb: 64, channel_history: HISTORY as never }] });
    t.teardown(() => srv.stop());
    const sdk = srv.sdk();
    for (let i = 1; i <= COUNT; i += 10) {
      await sdk.triggerBatch(Array.from({ length: 10 }, (_, k) => ({ channel: 'big-1', name: 'ev', data: JSON.stringify({ i: i + k, big: BIG }) })));
    }
    const probe = srv.track(await RawClient.connect(srv.wsUrl()));
    await probe.subscribe('big-1', { recover: {} });
    const pos = await probe.event('pusher_internal:recovery', 'big-1');
    const epoch = (pos.data as { epoch: string }).epoch;
    t.equal((pos.data as { serial: number }).serial, COUNT);
    await probe.close();

    const c = srv.track(await RawClient.connect(srv.wsUrl()));
    const got: number[] = [];
    c.ws.on('message', (raw) => {
      const f = JSON.parse(String(raw)) as Serial;
      if (f.event === 'ev' && f.channel === 'big-1') got.push(f.__serial ?? -1);
    });
    const sock = (c.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;
    c.send({ event: 'pusher:subscribe', data: { channel: 'big-1', recover: { epoch, serial: 0 } } });
    sock.pause(); // the stimulus: a reader that stops for a while (not a check)
    await new Promise((r) => setTimeout(r, 1500));
    sock.resume();
    await eventually(() => got.length >= COUNT, 30_000, `the ${COUNT} replayed messages (got ${got.length})`);
    await sdk.trigger('big-1', 'ev', JSON.stringify({ i: COUNT + 1 }));
    await eventually(() => got.includes(COUNT + 1), 10_000, 'the live message after the replay');
    t.same(got, Array.from({ length: COUNT + 1 }, (_, i) => i + 1), 'every message once, in order, then the live one');
    t.equal(c.closeCode, null, 'not closed as a slow consumer');
    const rec = c.frames.find((f) => f.event === 'pusher_internal:recovery' && f.channel === 'big-1');
    t.match(rec?.data, { epoch, serial: COUNT, recovered: true, missed: COUNT }, 'one recovery frame: the whole range');
  });
}
