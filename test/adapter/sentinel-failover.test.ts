// test-modes: once (its nodes have fixed shard counts)
// Two ringcast nodes on the redis adapter through Sentinel (database.redis.sentinels,
// name): traffic flows, the master is killed (SIGKILL), the sentinel promotes the
// replica, and the nodes find the new master by themselves (ioredis asks the sentinel
// again on every reconnect): cross-node publishes resume in both directions, /up/{appId}
// is 200 again on both nodes, and both nodes still see each other (nothing crashed).

import t from 'tap';
import { APP, eventually, RawClient, type Frame } from '../helpers/server';
import { startNodePair } from '../helpers/cluster';
import { rawRequest } from '../helpers/http';
import { redisCommand, RedisSentinelSet } from '../helpers/redis';
import { settle } from '../helpers/settle';

const NODE_WORKERS = 2;
/** Bound of the whole failover (sentinel down-after 1 s + election + ioredis reconnects), generous under load. */
const FAILOVER_MS = 45_000;

const named = (c: RawClient, event: string) => c.frames.filter((f: Frame) => f.event === event);

/** The master address the sentinel reports now. */
async function masterPort(s: RedisSentinelSet): Promise<number> {
  const reply = await redisCommand(s.sentinelPort, `SENTINEL get-master-addr-by-name ${RedisSentinelSet.NAME}`);
  // *2\r\n$9\r\n127.0.0.1\r\n$5\r\n12345\r\n
  const lines = reply.split('\r\n');
  return Number(lines[4]);
}

t.test('sentinel failover: the nodes follow the promoted replica', async (t) => {
  const set = await RedisSentinelSet.start();
  t.teardown(() => set.stop());
  const cfg = {
    adapter: { driver: 'redis' as const },
    database: { redis: { sentinels: [{ host: '127.0.0.1', port: set.sentinelPort }], name: RedisSentinelSet.NAME } },
    workers: NODE_WORKERS,
  };
  const [a, b] = await startNodePair(t, cfg);

  const ca = a.track(await RawClient.connect(a.wsUrl()));
  const cb = b.track(await RawClient.connect(b.wsUrl()));
  const channel = 'failover';
  await ca.subscribe(channel);
  await cb.subscribe(channel);

  // traffic before: both directions
  await a.sdk().trigger(channel, 'before', { from: 'a' });
  await b.sdk().trigger(channel, 'before', { from: 'b' });
  await settle(a, [ca, cb], channel);
  await settle(b, [ca, cb], channel);
  t.equal(named(ca, 'before').length, 2, 'node A\'s client got both nodes\' publishes before the failover');
  t.equal(named(cb, 'before').length, 2, 'node B\'s client got both nodes\' publishes before the failover');

  t.equal(await masterPort(set), set.master.port, 'the sentinel names the first master');
  await set.master.kill();
  await eventually(async () => (await masterPort(set).catch(() => 0)) === set.replica.port, FAILOVER_MS, 'the sentinel to promote the replica');
  t.pass('the sentinel promoted the replica');
  t.match(await redisCommand(set.replica.port, 'ROLE'), /master/, 'the replica is a master now');

  await eventually(() => a.server.cluster!.isUp() && b.server.cluster!.isUp(), FAILOVER_MS, 'both nodes to reconnect to the new master');
  for (const [who, srv] of [['A', a], ['B', b]] as const) {
    await eventually(async () => (await rawRequest(srv.port, 'GET', `/up/${APP.id}`)).status === 200, FAILOVER_MS, `/up on node ${who}`);
    t.pass(`/up/{appId} on node ${who} is 200 again`);
  }
  // cross-node delivery resumed, both ways: publish until the other node's client has one
  // (publishes made while a connection was still moving may be lost: counted, not replayed)
  let n = 0;
  await eventually(async () => {
    await a.sdk().trigger(channel, 'after-a', { n: ++n });
    return named(cb, 'after-a').length > 0;
  }, FAILOVER_MS, 'a publish on node A to reach node B after the failover');
  await eventually(async () => {
    await b.sdk().trigger(channel, 'after-b', { n: ++n });
    return named(ca, 'after-b').length > 0;
  }, FAILOVER_MS, 'a publish on node B to reach node A after the failover');
  t.pass('cross-node publishes resumed both ways');

  // steady again: one publish each way arrives exactly once
  await a.sdk().trigger(channel, 'steady', { from: 'a' });
  await b.sdk().trigger(channel, 'steady', { from: 'b' });
  await settle(a, [ca, cb], channel);
  await settle(b, [ca, cb], channel);
  t.equal(named(ca, 'steady').length, 2, 'node A\'s client got both steady publishes once');
  t.equal(named(cb, 'steady').length, 2, 'node B\'s client got both steady publishes once');
  t.ok(a.server.cluster!.nodes().length === 2 && b.server.cluster!.nodes().length === 2, 'both nodes are alive and see each other');
});
