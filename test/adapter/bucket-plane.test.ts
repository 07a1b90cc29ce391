// test-modes: once (the bucket plane lives in the primary; no server)
// The primary's bucket subscriptions (src/adapter/buckets.ts) on a real redis-server
// transport, its sweep driven by hand: subscribers of one bucket share one subscription;
// a bucket whose interest comes back between the ready flag's clearing and the last look
// is kept (the order the shards mirror); a bucket without interest past the linger is
// unsubscribed (a publish on it no longer arrives, a later one on a held bucket does);
// a subscription the backend refuses rejects and is asked again by the next subscriber.

import t from 'tap';
import pino from 'pino';
import { startBucketPlane } from '../../src/adapter/buckets';
import { createRedisTransport } from '../../src/adapter/redis';
import { loadConfig } from '../../src/config';
import { noMetrics } from '../../src/metrics/types';
import { RedisServer } from '../helpers/redis';
import { eventually } from '../helpers/server';

t.test('bucket plane over redis-server', async (t) => {
  const redis = await RedisServer.start();
  t.teardown(() => redis.stop());
  const cfg = loadConfig({ env: {}, overrides: { apps: [{ id: 'a', key: 'k', secret: 's' }], database: { redis: { host: '127.0.0.1', port: redis.port } } } }).database.redis;
  const sub = createRedisTransport(cfg);
  const pub = createRedisTransport(cfg);
  t.teardown(() => Promise.all([sub.close(), pub.close()]));
  await Promise.all([sub.connect(5000), pub.connect(5000)]);

  const got: string[] = [];
  const interest = new Map<number, boolean[]>(); // bucket → the answers of its next looks (last one repeats)
  const ready = new SharedArrayBuffer(4 * 8);
  const plane = startBucketPlane({
    transport: sub, buckets: 8, lingerMs: 1000, subject: (b) => `bp.b.${b}`, ready,
    interest: (b) => {
      const a = interest.get(b) ?? [false];
      return a.length > 1 ? a.shift()! : a[0];
    },
    handler: (data) => got.push(Buffer.from(data).toString()),
    log: pino({ level: 'silent' }), metrics: noMetrics,
  });
  plane.stop(); // its timer: the sweeps below are driven by hand, at the times they name
  const flags = new Int32Array(ready);

  await Promise.all([plane.ensure(1), plane.ensure(1), plane.ensure(2)]);
  t.same(plane.subscribed().sort(), [1, 2], 'two buckets held; the second subscriber of bucket 1 shared its subscription');
  t.equal(Atomics.load(flags, 1), 1, 'bucket 1 is ready for the shards');

  // bucket 1: no interest at the first look, back at the last one (a shard's new subscriber)
  interest.set(1, [false, false, true]);
  interest.set(2, [true]);
  plane.sweep(0);
  plane.sweep(5000);
  t.same(plane.subscribed().sort(), [1, 2], 'bucket 1 kept: its interest came back before the last look');
  t.equal(Atomics.load(flags, 1), 1, 'and ready again');

  // bucket 1 without interest past the linger: unsubscribed
  interest.set(1, [false]);
  plane.sweep(10_000);
  plane.sweep(20_000);
  t.same(plane.subscribed(), [2], 'bucket 1 dropped after the linger');
  t.equal(Atomics.load(flags, 1), 0, 'and no longer ready');
  await eventually(async () => {
    pub.publish('bp.b.1', Buffer.from('lost'));
    pub.publish('bp.b.2', Buffer.from('marker'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    return got.includes('marker');
  }, 5000, 'the marker on bucket 2');
  t.notOk(got.includes('lost'), 'a publish on the dropped bucket did not arrive');

  // the backend refuses: the subscribe rejects, the next subscriber asks again
  await sub.close();
  await t.rejects(plane.ensure(3), 'a subscription the backend does not take rejects');
  t.notOk(plane.subscribed().includes(3), 'bucket 3 is not ready');
});
