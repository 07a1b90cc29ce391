// The backends the cluster suite runs against, each a real server started by the test:
// redis-server, a 3-master redis cluster, nats-server. Each gives the adapter config of
// a node and can be killed and restarted (an outage).

import type { ConfigInput } from '../../src/config';
import { NatsServer } from '../helpers/nats';
import { RedisCluster, RedisSentinelSet, RedisServer } from '../helpers/redis';

export interface Backend {
  readonly name: 'redis' | 'redis-sentinel' | 'redis-cluster' | 'nats';
  /** Config overrides of a node using it. */
  config(): ConfigInput;
  /** SIGKILL the backend (all of it). */
  kill(): Promise<void>;
  /** Start it again on the same ports. */
  resume(): Promise<void>;
  stop(): Promise<void>;
}

export async function startBackend(name: Backend['name']): Promise<Backend> {
  switch (name) {
    case 'redis': {
      const r = await RedisServer.start();
      return {
        name,
        config: () => ({ adapter: { driver: 'redis' }, database: { redis: { host: '127.0.0.1', port: r.port } } }),
        kill: () => r.kill(),
        resume: () => r.resume(),
        stop: () => r.stop(),
      };
    }
    case 'redis-sentinel': {
      const s = await RedisSentinelSet.start();
      return {
        name,
        config: () => ({
          adapter: { driver: 'redis' },
          database: { redis: { sentinels: [{ host: '127.0.0.1', port: s.sentinelPort }], name: RedisSentinelSet.NAME } },
        }),
        // master and replica down (no failover possible), then back as they were
        kill: async () => { await Promise.all([s.master.kill(), s.replica.kill()]); },
        resume: async () => { await s.master.resume(); await s.replica.resume(); },
        stop: () => s.stop(),
      };
    }
    case 'redis-cluster': {
      const c = await RedisCluster.start();
      return {
        name,
        config: () => ({ adapter: { driver: 'redis-cluster' }, database: { redis_cluster: { nodes: c.ports.map((port) => ({ host: '127.0.0.1', port })) } } }),
        kill: async () => { await Promise.all(c.nodes.map((n) => n.kill())); },
        resume: async () => { await Promise.all(c.nodes.map((n) => n.resume())); },
        stop: () => c.stop(),
      };
    }
    case 'nats': {
      const n = await NatsServer.start();
      return {
        name,
        config: () => ({ adapter: { driver: 'nats', nats: { servers: [n.url] } } }),
        kill: () => n.kill(),
        resume: () => n.resume(),
        stop: () => n.stop(),
      };
    }
  }
}

const ALL: Backend['name'][] = ['redis', 'redis-sentinel', 'redis-cluster', 'nats'];
const named = process.env.RINGCAST_TEST_BACKENDS;
const chosen = named === undefined || named === 'all' ? null : named.split(',') as Backend['name'][];

/**
 * The transport suite (cluster.test.ts): every backend, or the ones named in
 * RINGCAST_TEST_BACKENDS (comma-separated; `all`).
 */
export const BACKENDS: Backend['name'][] = chosen ?? ALL;

/**
 * The suites of the cluster logic written once above the transport (presence, watchlists,
 * webhooks, node failure, delta coordination, pusher-js across nodes): redis, redis-cluster
 * (sharded pub/sub: one master per subject, so a different ordering and failure surface)
 * and NATS by default. Sentinel is a plain redis transport once connected; cluster.test.ts
 * and sentinel-failover.test.ts cover it. The redis-cluster runs of these nine files take
 * 124 s of file time (81 s wall with tap --jobs=2, 2-core machine).
 * RINGCAST_TEST_BACKENDS=all (or a list) runs them on every backend named.
 */
export const LOGIC_BACKENDS: Backend['name'][] = chosen ?? (named === 'all' ? ALL : ['redis', 'redis-cluster', 'nats']);
