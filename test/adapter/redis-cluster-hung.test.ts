// The Redis publisher's in-flight cap (MAX_PUBLISHES_IN_FLIGHT commands /
// MAX_PUBLISH_BUFFER_BYTES) on a Redis Cluster (adapter.driver redis-cluster: sharded
// pub/sub, SPUBLISH through the node clients of an ioredis Cluster), as
// redis-hung.test.ts shows it on one redis-server: every master frozen (SIGSTOP:
// connections open, nothing answered), a publish past the cap fails fast, also after the
// 1 s command timeout has rejected the waiting ones; after SIGCONT the queue drains, every
// publish that was accepted is delivered and publishing resumes. Then through a running
// server: API publishes keep answering 200, refused cluster publishes are counted.
// Runs with RINGCAST_TEST_WORKERS=1 and =4 (the transport lives in the primary).

import t from 'tap';
import { createRedisClusterTransport, MAX_PUBLISHES_IN_FLIGHT, MAX_PUBLISH_BUFFER_BYTES } from '../../src/adapter/redis';
import { loadConfig } from '../../src/config';
import { metric } from '../faults/api';
import { signedPost } from '../helpers/http';
import { RedisCluster } from '../helpers/redis';
import { APP, RawClient, eventually, sleep, startServer } from '../helpers/server';

const SUBJECT = '{ringcast}.hung-test'; // one hash tag: one slot, one master (as adapter/index.ts)

t.test('transport: a frozen Redis Cluster caps the publishes in flight; they drain after SIGCONT', async (t) => {
  const cluster = await RedisCluster.start();
  t.teardown(() => cluster.stop());
  const cfg = loadConfig({ env: {}, overrides: { apps: [{ ...APP }], database: { redis_cluster: { nodes: cluster.ports.map((port) => ({ host: '127.0.0.1', port })) } } } }).database.redis_cluster;
  const pub = createRedisClusterTransport(cfg);
  const sub = createRedisClusterTransport(cfg);
  t.teardown(() => Promise.all([pub.close(), sub.close()]));
  await Promise.all([pub.connect(5000), sub.connect(5000)]);
  const got: string[] = [];
  await sub.subscribe(SUBJECT, (d) => got.push(Buffer.from(d).toString()));
  await eventually(() => {
    pub.publish(SUBJECT, Buffer.from('before'));
    return got.includes('before');
  }, 5000, 'the first message');

  for (const n of cluster.nodes) n.freeze();
  const payload = 'x'.repeat(1000);
  let accepted = 0;
  for (let i = 0; i < 20_000; i++) if (pub.publish(SUBJECT, Buffer.from(`${i}:${payload}`))) accepted++;
  t.ok(accepted <= MAX_PUBLISHES_IN_FLIGHT, `${accepted} of 20000 accepted while the cluster hangs (cap ${MAX_PUBLISHES_IN_FLIGHT})`);
  t.ok(accepted >= 100, 'the cap is not hit before it is reached');
  const held = pub.inFlight();
  t.ok(held.commands <= MAX_PUBLISHES_IN_FLIGHT, `${held.commands} commands in flight`);
  t.ok(held.bytes <= MAX_PUBLISH_BUFFER_BYTES + 1100, `${held.bytes} bytes waiting in the sockets`);

  const end = Date.now() + 2500;
  let later = 0;
  while (Date.now() < end) {
    if (pub.publish(SUBJECT, Buffer.from('during'))) later++;
    await sleep(50);
  }
  t.equal(later, 0, 'still refused 2.5 s later (past the command timeout): the queue stays bounded');
  t.ok(pub.inFlight().commands <= MAX_PUBLISHES_IN_FLIGHT, 'and the commands in flight too');

  for (const n of cluster.nodes) n.thaw();
  await eventually(() => pub.publish(SUBJECT, Buffer.from('after')), 15_000, 'a publish accepted after SIGCONT');
  await eventually(() => got.includes('after'), 15_000, 'the message after SIGCONT');
  t.equal(got.filter((m) => m.endsWith(payload)).length, accepted, 'every publish accepted during the hang was delivered');
  await eventually(() => pub.inFlight().commands === 0, 5000, 'the queue to drain');
});

t.test('server: API publishes during a hung Redis Cluster answer 200, cluster publishes refused and counted', async (t) => {
  const cluster = await RedisCluster.start();
  t.teardown(() => cluster.stop());
  const srv = await startServer({
    adapter: { driver: 'redis-cluster' }, database: { redis_cluster: { nodes: cluster.ports.map((port) => ({ host: '127.0.0.1', port })) } },
    metrics: { enabled: true, port: 0, host: '127.0.0.1' },
  });
  t.teardown(() => srv.stop());
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  await c.subscribe('hung');
  const published = () => metric(srv.server.metricsPort!, 'adapter_publish_total');
  const refused = () => metric(srv.server.metricsPort!, 'adapter_errors_total');
  const base = await published();

  for (const n of cluster.nodes) n.freeze();
  const N = 1500;
  for (let b = 0; b < N / 10; b++) {
    const batch = Array.from({ length: 10 }, (_, i) => ({ name: 'e', channel: 'hung', data: `${b * 10 + i}` }));
    const r = await signedPost(srv.port, APP, 'batch_events', { batch });
    if (r.status !== 200) t.fail(`batch ${b}: ${r.status} ${r.text}`);
  }
  await eventually(() => c.frames.filter((f) => f.event === 'e').length === N, 10_000, 'local delivery of every event');
  const sent = (await published()) - base;
  t.ok(sent <= MAX_PUBLISHES_IN_FLIGHT, `${sent} cluster publishes sent while the cluster hangs (cap ${MAX_PUBLISHES_IN_FLIGHT})`);
  t.ok(await refused() >= N - sent, `the other ${N - sent} refused at once and counted (adapter_errors_total)`);

  for (const n of cluster.nodes) n.thaw();
  const before = await published();
  await eventually(async () => {
    await signedPost(srv.port, APP, 'events', { name: 'e2', channel: 'hung', data: 'after' });
    return (await published()) > before;
  }, 15_000, 'cluster publishes to resume after SIGCONT');
  t.pass('publishing resumed');
});
