// test-modes: once (the Redis publisher's in-flight cap is the primary's)
// The Redis publisher's in-flight cap (MAX_PUBLISHES_IN_FLIGHT commands /
// MAX_PUBLISH_BUFFER_BYTES) on a Redis Cluster (adapter.driver redis-cluster: sharded
// pub/sub, SPUBLISH through the node clients of an ioredis Cluster), as
// redis-hung.test.ts shows it on one redis-server (the checks: hung.ts): every master
// frozen (SIGSTOP: connections open, nothing answered), a publish past the cap fails fast,
// also after the 1 s command timeout has rejected the waiting ones; after SIGCONT the
// queue drains, every publish that was accepted is delivered and publishing resumes. Then
// through a running server: API publishes are answered 503 past half the publisher's cap
// (nothing delivered), every one answered 200 was sent, publishing to the cluster resumes.
// Runs with RINGCAST_TEST_WORKERS=1 and =4 (the transport lives in the primary).

import t from 'tap';
import { createRedisClusterTransport } from '../../src/adapter/redis';
import { loadConfig } from '../../src/config';
import { RedisCluster } from '../helpers/redis';
import { APP } from '../helpers/server';
import { publisherCapHolds, serverThroughHang, type Hang } from './hung';

/** Every master frozen and thawed together. */
const hang = (c: RedisCluster): Hang => ({
  freeze: () => { for (const n of c.nodes) n.freeze(); },
  thaw: () => { for (const n of c.nodes) n.thaw(); },
});
const nodesOf = (c: RedisCluster) => c.ports.map((port) => ({ host: '127.0.0.1', port }));

t.test('transport: a frozen Redis Cluster caps the publishes in flight; they drain after SIGCONT', async (t) => {
  const cluster = await RedisCluster.start();
  t.teardown(() => cluster.stop());
  const cfg = loadConfig({ env: {}, overrides: { apps: [{ ...APP }], database: { redis_cluster: { nodes: nodesOf(cluster) } } } }).database.redis_cluster;
  const pub = createRedisClusterTransport(cfg);
  const sub = createRedisClusterTransport(cfg);
  t.teardown(() => Promise.all([pub.close(), sub.close()]));
  await Promise.all([pub.connect(5000), sub.connect(5000)]);
  // one hash tag: one slot, one master (as adapter/index.ts names the subjects)
  await publisherCapHolds(t, pub, sub, '{ringcast}.hung-test', hang(cluster));
});

t.test('server: API publishes during a hung Redis Cluster answer 503 past half the publisher cap (nothing delivered), every one answered 200 sent, resumed after SIGCONT', async (t) => {
  const cluster = await RedisCluster.start();
  t.teardown(() => cluster.stop());
  await serverThroughHang(t, { adapter: { driver: 'redis-cluster' }, database: { redis_cluster: { nodes: nodesOf(cluster) } } }, hang(cluster));
});
