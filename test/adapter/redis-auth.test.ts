// test-modes: once (its nodes have fixed shard counts)
// The Redis connection options of `database.redis` and `database.redis_cluster` against
// real password-protected servers: requirepass with `db`, an ACL user (username +
// password, the default user off), a 3-master cluster whose nodes only know an ACL user,
// and a Sentinel with its own requirepass in front of a password-protected master. For
// each, two ringcast nodes use it for everything it serves at once: the cluster adapter
// (a publish on node A reaches node B's subscriber), the rate limiter, the shared cache
// and (database.redis only) the webhook queue; `db` puts every key in the chosen
// database. A wrong password is a startup error saying the credentials were refused and
// naming the keys to check.

import { Cluster, Redis } from 'ioredis';
import t, { type Test } from 'tap';
import type { ConfigInput } from '../../src/config';
import { redisCommand, RedisCluster, RedisSentinelSet, RedisServer } from '../helpers/redis';
import { APP, RawClient, startServer } from '../helpers/server';
import { startNodePair } from '../helpers/cluster';
import { startReceiver, type Receiver } from '../webhooks/receiver';

t.setTimeout(240_000);

const NODE_WORKERS = 2;
const PREFIX = 'rc-auth:';
/** rate_limiter.api: a 60 s window per address, so its key is still there when the test looks. */
const API_WINDOW = { max_requests: 1000, window_seconds: 60 };

/** Every key of the prefix, through a client with the same credentials (a cluster: from every master). */
async function keys(client: Redis | Cluster): Promise<string[]> {
  if (client instanceof Cluster) {
    const all = await Promise.all(client.nodes('master').map((n) => n.keys(`${PREFIX}*`)));
    return all.flat().sort();
  }
  return (await client.keys(`${PREFIX}*`)).sort();
}

/**
 * Two nodes on `cfg` (adapter, rate limiter, cache and, with `receiver`, the webhook
 * queue all on the one Redis): a publish on node A reaches node B's subscriber, is node
 * B's cache replay, went through the limiter, and (queue) its channel_occupied webhook
 * was delivered. Returns the keys the inspecting client sees.
 */
async function everythingWorks(t: Test, cfg: ConfigInput, inspect: Redis | Cluster, receiver?: Receiver): Promise<string[]> {
  const [a, b] = await startNodePair(t, cfg);
  const onB = b.track(await RawClient.connect(b.wsUrl()));
  await onB.subscribe('cache-auth');
  await a.sdk().trigger('cache-auth', 'price', { v: 1 });
  const got = await onB.event('price', 'cache-auth', 5000);
  t.same(JSON.parse(got.data as string), { v: 1 }, 'adapter: node A\'s publish reached node B\'s subscriber');
  const late = b.track(await RawClient.connect(b.wsUrl()));
  await late.subscribe('cache-auth');
  const replay = await late.event('price', 'cache-auth', 5000);
  t.same(JSON.parse(replay.data as string), { v: 1 }, 'cache: a new subscriber on node B gets the last event');
  if (receiver) {
    await receiver.until((q) => q.some((r) => r.body.events.some((e) => e.name === 'channel_occupied' && e.channel === 'cache-auth')), 10_000, 'the channel_occupied webhook');
    t.pass('queue: the webhook went through the Redis queue');
  }
  const found = await keys(inspect);
  t.ok(found.some((k) => k.startsWith(`${PREFIX}ratelimit:{ip:`)), `rate limiter: the API window of the address is in Redis (${found.join(', ')})`);
  t.ok(found.includes(`${PREFIX}cache:{${APP.id}:cache-auth}`), 'cache: the entry is in Redis');
  return found;
}

function appCfg(receiver?: Receiver): ConfigInput {
  return {
    workers: NODE_WORKERS,
    apps: [{ ...APP, ...(receiver ? { webhooks: [{ url: receiver.url, event_types: ['channel_occupied'] }] } : {}) }],
    ...(receiver ? { queue: { driver: 'redis' as const } } : {}),
  };
}

t.test('requirepass and db: everything authenticates, every key lands in the chosen db', async (t) => {
  const redis = await RedisServer.start([], { password: 's3cret' });
  const receiver = await startReceiver();
  t.teardown(async () => { await receiver.close(); await redis.stop(); });
  const cfg: ConfigInput = {
    ...appCfg(receiver), adapter: { driver: 'redis' }, rate_limiter: { driver: 'redis', api: API_WINDOW }, cache: { driver: 'redis' },
    database: { redis: { host: '127.0.0.1', port: redis.port, password: 's3cret', db: 3, key_prefix: PREFIX } },
  };
  const db3 = new Redis({ port: redis.port, host: '127.0.0.1', password: 's3cret', db: 3 });
  const db0 = new Redis({ port: redis.port, host: '127.0.0.1', password: 's3cret', db: 0 });
  t.teardown(() => { db3.disconnect(); db0.disconnect(); });
  const found = await everythingWorks(t, cfg, db3, receiver);
  t.ok(found.some((k) => k.startsWith(`${PREFIX}webhooks:`)), 'queue: its keys are in db 3');
  t.same(await keys(db0), [], 'db 0 holds none of them');
});

t.test('an ACL user (username + password; the default user is off)', async (t) => {
  const user = { name: 'ringcast', password: 'acl-pw' };
  const redis = await RedisServer.start([], { user });
  const receiver = await startReceiver();
  t.teardown(async () => { await receiver.close(); await redis.stop(); });
  const cfg: ConfigInput = {
    ...appCfg(receiver), adapter: { driver: 'redis' }, rate_limiter: { driver: 'redis', api: API_WINDOW }, cache: { driver: 'redis' },
    database: { redis: { host: '127.0.0.1', port: redis.port, username: user.name, password: user.password, key_prefix: PREFIX } },
  };
  t.match(await redis.command('PING').then(() => 'ok', (e: Error) => e.message), 'ok', 'the helper authenticates as the user');
  t.match(await redisCommand(redis.port, 'PING'), /NOAUTH/, 'without credentials the server refuses');
  const inspect = new Redis({ port: redis.port, host: '127.0.0.1', username: user.name, password: user.password });
  t.teardown(() => inspect.disconnect());
  await everythingWorks(t, cfg, inspect, receiver);
});

t.test('redis_cluster.username and password: a cluster whose nodes know only an ACL user', async (t) => {
  const user = { name: 'ringcast', password: 'cluster-pw' };
  const cluster = await RedisCluster.start({ user });
  t.teardown(() => cluster.stop());
  const nodes = cluster.ports.map((port) => ({ host: '127.0.0.1', port }));
  const cfg: ConfigInput = {
    ...appCfg(), adapter: { driver: 'redis-cluster' }, rate_limiter: { driver: 'redis-cluster', api: API_WINDOW }, cache: { driver: 'redis-cluster' },
    database: { redis_cluster: { nodes, username: user.name, password: user.password, key_prefix: PREFIX } },
  };
  const inspect = new Cluster(nodes, { redisOptions: { username: user.name, password: user.password } });
  t.teardown(() => inspect.disconnect());
  await new Promise<void>((resolve) => inspect.once('ready', () => resolve()));
  await everythingWorks(t, cfg, inspect);
});

t.test('sentinel_password: a Sentinel with its own requirepass in front of a password-protected master', async (t) => {
  const set = await RedisSentinelSet.start({ sentinelPassword: 'sentinel-pw', password: 'master-pw' });
  const receiver = await startReceiver();
  t.teardown(async () => { await receiver.close(); await set.stop(); });
  const cfg: ConfigInput = {
    ...appCfg(receiver), adapter: { driver: 'redis' }, rate_limiter: { driver: 'redis', api: API_WINDOW }, cache: { driver: 'redis' },
    database: { redis: {
      sentinels: [{ host: '127.0.0.1', port: set.sentinelPort }], name: RedisSentinelSet.NAME,
      sentinel_password: 'sentinel-pw', password: 'master-pw', key_prefix: PREFIX,
    } },
  };
  const inspect = new Redis({ port: set.master.port, host: '127.0.0.1', password: 'master-pw' });
  t.teardown(() => inspect.disconnect());
  await everythingWorks(t, cfg, inspect, receiver);
});

t.test('a wrong password is a startup error: the credentials were refused, and which keys to check', async (t) => {
  const redis = await RedisServer.start([], { password: 'right' });
  const cluster = await RedisCluster.start({ password: 'right' });
  const receiver = await startReceiver();
  t.teardown(async () => { await receiver.close(); await redis.stop(); await cluster.stop(); });
  const wrong = { database: {
    redis: { host: '127.0.0.1', port: redis.port, password: 'wrong' },
    redis_cluster: { nodes: cluster.ports.map((port) => ({ host: '127.0.0.1', port })), password: 'wrong' },
  } };
  const refused = (keys: string) => new RegExp(`Redis refused the credentials: check ${keys.replace(/[./]/g, '\\$&')} \\(WRONGPASS`);
  const standalone = refused('database.redis.username / password');
  const clustered = refused('database.redis_cluster.username / password');
  const cases: [string, ConfigInput, string, RegExp][] = [
    ['adapter redis', { adapter: { driver: 'redis' } }, 'RC_ERR_ADAPTER_DOWN', standalone],
    ['adapter redis-cluster', { adapter: { driver: 'redis-cluster' } }, 'RC_ERR_ADAPTER_DOWN', clustered],
    ['rate_limiter redis', { rate_limiter: { driver: 'redis' } }, 'RC_ERR_RATE_LIMITER_DOWN', standalone],
    ['rate_limiter redis-cluster', { rate_limiter: { driver: 'redis-cluster' } }, 'RC_ERR_RATE_LIMITER_DOWN', clustered],
    ['cache redis', { cache: { driver: 'redis' } }, 'RC_ERR_CACHE_DOWN', standalone],
    ['cache redis-cluster', { cache: { driver: 'redis-cluster' } }, 'RC_ERR_CACHE_DOWN', clustered],
    ['queue redis', { ...appCfg(receiver), queue: { driver: 'redis' } }, 'RC_ERR_WEBHOOK_QUEUE_DOWN', standalone],
  ];
  // at once: each waits out its startup timeout
  await Promise.all(cases.map(([name, cfg, code, message]) =>
    t.rejects(startServer({ ...wrong, ...cfg }), { code, message }, name)));
});
