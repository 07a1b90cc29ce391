// test-modes: once (the Redis publisher's in-flight cap is the primary's)
// A hung Redis (SIGSTOP: connections open, nothing answered) does not make the adapter's
// publisher queue without bound: past MAX_PUBLISHES_IN_FLIGHT unanswered commands a
// publish fails fast (false; the cluster counts adapter_errors_total and logs, rate
// limited), also after the 1 s command timeout has rejected the waiting ones; after
// SIGCONT the queue drains, every publish that was accepted is delivered and publishing
// resumes. Then the same through a running server: API publishes are answered 503 once the
// publisher's backlog is past half its cap (nothing delivered), every publish answered 200
// was sent to the cluster (none refused), and publishing to the cluster resumes after SIGCONT (the checks: hung.ts; on a Redis Cluster: redis-cluster-hung.test.ts).
// Runs with RINGCAST_TEST_WORKERS=1 and =4 (the transport lives in the primary).

import t from 'tap';
import { createRedisTransport } from '../../src/adapter/redis';
import { loadConfig } from '../../src/config';
import { RedisServer } from '../helpers/redis';
import { APP } from '../helpers/server';
import { publisherCapHolds, serverThroughHang } from './hung';

t.test('transport: a frozen Redis caps the publishes in flight; they drain after SIGCONT', async (t) => {
  const redis = await RedisServer.start();
  t.teardown(() => redis.stop());
  const cfg = loadConfig({ env: {}, overrides: { apps: [{ ...APP }], database: { redis: { host: '127.0.0.1', port: redis.port } } } }).database.redis;
  const pub = createRedisTransport(cfg);
  const sub = createRedisTransport(cfg);
  t.teardown(() => Promise.all([pub.close(), sub.close()]));
  await Promise.all([pub.connect(5000), sub.connect(5000)]);
  await publisherCapHolds(t, pub, sub, 'hung-test', redis);
});

t.test('server: API publishes during a hung Redis answer 503 past half the publisher cap (nothing delivered), every one answered 200 sent, resumed after SIGCONT', async (t) => {
  const redis = await RedisServer.start();
  t.teardown(() => redis.stop());
  await serverThroughHang(t, { adapter: { driver: 'redis' }, database: { redis: { host: '127.0.0.1', port: redis.port } } }, redis);
});
