// test-modes: once (the transport lives in the primary thread; the shard count does not matter)
// A node that is connected to its backend and deaf (not subscribed any more) renews its
// transport (src/adapter/echo.ts, docs/scaling.md "A connected but deaf node"), on a real
// redis-server and a real 3-master Redis Cluster:
//  - an ACL that denies every channel makes Redis drop the subscribers (the channels they
//    hold are no longer allowed), and their resubscribe after the reconnect is refused
//    (NOPERM), which ioredis only logs: once the channels are allowed again, each node is
//    connected, reports the backend up, and is not subscribed to anything;
//  - each node notices that its own heartbeat does not come back, renews its connections
//    (cluster_transport_renewals_total moves, on both nodes), and the markers of both
//    nodes reach the subscribers of both nodes again.
// Without the renewal the markers never cross again (the nodes stay cut off until
// restarted): checked by hand against a build whose EchoWatch never renews.

import t from 'tap';
import { startNode } from '../helpers/cluster';
import { metric } from '../faults/api';
import { settle } from '../helpers/settle';
import { eventually, RawClient, type TestServer } from '../helpers/server';
import { RedisCluster, RedisServer } from '../helpers/redis';
import type { ConfigInput } from '../../src/config';

t.setTimeout(120_000);

const renewals = (n: TestServer) => metric(n.server.metricsPort!, 'cluster_transport_renewals_total');

for (const name of ['redis', 'redis-cluster'] as const) {
  t.test(`${name}: a deaf node renews its connections and hears the other node again`, async (t) => {
    let servers: RedisServer[];
    let adapter: ConfigInput;
    if (name === 'redis') {
      const r = await RedisServer.start();
      t.teardown(() => r.stop());
      servers = [r];
      adapter = { adapter: { driver: 'redis' }, database: { redis: { host: '127.0.0.1', port: r.port } } };
    } else {
      const c = await RedisCluster.start();
      t.teardown(() => c.stop());
      servers = c.nodes;
      adapter = { adapter: { driver: 'redis-cluster' }, database: { redis_cluster: { nodes: c.ports.map((port) => ({ host: '127.0.0.1', port })) } } };
    }
    const acl = (rule: string) => Promise.all(servers.map(async (s) => t.match(await s.command(`ACL SETUSER default ${rule}`), /^\+OK/, `ACL ${rule}`)));
    const cfg: ConfigInput = { ...adapter, workers: 1, metrics: { enabled: true, port: 0, host: '127.0.0.1' } };
    const a = await startNode(t, cfg);
    const b = await startNode(t, cfg);
    await eventually(() => a.server.cluster!.nodes().length === 2 && b.server.cluster!.nodes().length === 2, 10_000, 'the nodes to see each other');
    const ca = a.track(await RawClient.connect(a.wsUrl()));
    const cb = b.track(await RawClient.connect(b.wsUrl()));
    const ch = `deaf-${name}`;
    await Promise.all([ca.subscribe(ch), cb.subscribe(ch)]);
    const crossed = async () => {
      for (const n of [a, b]) await settle(n, [ca, cb], ch, { timeoutMs: 3000 });
    };
    await crossed();
    t.pass('the markers of both nodes reach both subscribers');
    t.equal(await renewals(a), 0, 'no renewal while the node hears itself');

    // every channel denied: Redis drops the subscribers, their resubscribe is refused
    await acl('resetchannels');
    await eventually(async () => (await renewals(a)) >= 1 && (await renewals(b)) >= 1, 30_000, 'each node to notice that its own heartbeat does not come back');
    t.pass('both nodes renewed their connections while they heard nothing');
    // the channels allowed again: the connections are up, their subscriptions are not
    await acl('allchannels');
    const since = Date.now();
    await eventually(async () => {
      try {
        await crossed();
        return true;
      } catch { return false; }
    }, 45_000, 'the markers of both nodes to cross again');
    t.pass(`the markers of both nodes reach both subscribers again (${Date.now() - since} ms after the channels were allowed)`);
    t.ok(await renewals(a) >= 1 && await renewals(b) >= 1, 'cluster_transport_renewals_total counted on both nodes');
  });
}
