// test-modes: once (its nodes have fixed shard counts)
// cache.driver redis / redis-cluster with real ringcast nodes (2 shards each) and a real
// redis-server, Sentinel-managed master or 3-master redis cluster: the last event of a cache channel is shared by
// the nodes through Redis, so a node that starts after the publish (or restarts) replays
// it, expiry holds across nodes, a Redis outage degrades to each node's memory (and
// /up/{appId} says 503) without a crash or a hung subscribe, and a cache Redis that cannot
// be reached at startup is a clear error.

import t from 'tap';
import type { ConfigInput } from '../../src/config';
import { APP, eventually, RawClient, startServer, type Frame, type TestServer } from '../helpers/server';
import { startNode, startNodePair } from '../helpers/cluster';
import { rawRequest, signedGet, signedPost } from '../helpers/http';
import { freePort } from '../helpers/net';
import { RedisServer } from '../helpers/redis';
import { startBackend, type Backend } from './backends';

// three real backends (one a 3-master cluster, one Sentinel with a replica) and up to three
// nodes each: ~31 s alone, past tap's 120 s once under make test's parallel jobs
t.setTimeout(300_000);

const NODE_WORKERS = 2;

const data = (f: Frame): unknown => typeof f.data === 'string' ? JSON.parse(f.data) : f.data;

/** What a new subscriber of `channel` on `s` gets after subscription_succeeded: the replay or the miss. */
async function replay(s: TestServer, channel: string): Promise<Frame> {
  const c = s.track(await RawClient.connect(s.wsUrl()));
  const ok = await c.subscribe(channel);
  if (ok.event !== 'pusher_internal:subscription_succeeded') throw new Error(`subscribe to ${channel}: ${JSON.stringify(ok)}`);
  return c.next((f) => f.channel === channel && f.event !== 'pusher_internal:subscription_succeeded', 8000);
}

for (const name of ['redis', 'redis-cluster'] as const) {
  t.test(`cache.driver ${name}`, async (t) => {
    const backend: Backend = await startBackend(name);
    t.teardown(() => backend.stop());
    const cfg: ConfigInput = { ...backend.config(), cache: { driver: name }, workers: NODE_WORKERS };
    const [a, b] = await startNodePair(t, cfg);

    t.test('a publish on node A is the replay on node B, and on a node started after it', async (t) => {
      // several channels: with redis-cluster their keys land on different masters
      const channels = [0, 1, 2, 3].map((i) => `cache-late-${name}-${i}`);
      for (const [i, channel] of channels.entries()) await a.sdk().trigger(channel, 'price', { v: i });
      for (const [i, channel] of channels.entries()) {
        const onB = await replay(b, channel);
        t.same([onB.event, data(onB)], ['price', { v: i }], `node B replays ${channel}`);
      }
      const c = await startNode(t, cfg);
      for (const [i, channel] of channels.entries()) {
        const onC = await replay(c, channel);
        t.same([onC.event, data(onC)], ['price', { v: i }], `the node started later replays ${channel} (from Redis)`);
      }
      const info = await signedGet(c.port, APP, `channels/${channels[0]}`, { info: 'cache' });
      t.equal(info.status, 200);
      t.same(info.json.cache.data, JSON.stringify({ v: 0 }), 'info=cache on the later node shows the shared entry');
      t.ok(info.json.cache.ttl > 3500 && info.json.cache.ttl <= 3600, `with the TTL left (${info.json.cache.ttl} s)`);
    });

    t.test('the entry expires on every node (#cache-2)', async (t) => {
      const channel = `ttl-${name}#cache-2`;
      // the `pusher` SDK refuses '#' in names: a signed POST
      t.equal((await signedPost(a.port, APP, 'events', { name: 'short', channel, data: '{"v":1}' })).status, 200);
      const onB = await replay(b, channel);
      t.equal(onB.event, 'short', 'replayed while it lives');
      for (const [who, s] of [['node A', a], ['node B', b]] as const) {
        await eventually(async () => {
          const r = await signedGet(s.port, APP, `channels/${encodeURIComponent(channel)}`, { info: 'cache' });
          return r.status === 200 && r.json.cache === undefined;
        }, 8000, `${who} to forget it`);
        const after = await replay(s, channel);
        t.equal(after.event, 'pusher:cache_miss', `${who}: a new subscriber gets cache_miss once it expired`);
      }
      // Redis's copy expired with it (PX): a node started now has nothing to replay
      const c = await startNode(t, cfg);
      t.equal((await replay(c, channel)).event, 'pusher:cache_miss', 'a node started after the expiry: cache_miss');
    });

    // The outage once, on one Redis: the cluster client's failure paths are the same code, and
    // a whole Redis Cluster killed and resumed costs ~15 s of make test's budget.
    if (name === 'redis') t.test('Redis down: subscribes still answer, /up/{appId} is 503; back when Redis is', async (t) => {
      const kept = `cache-kept-${name}`;
      await a.sdk().trigger(kept, 'k', { v: 1 });
      t.equal((await replay(a, kept)).event, 'k', 'in node A\'s memory');
      await backend.kill();
      await eventually(async () => (await rawRequest(a.port, 'GET', `/up/${APP.id}`)).status === 503, 10_000, '/up/{appId} to answer 503');
      const up = await rawRequest(a.port, 'GET', `/up/${APP.id}`);
      t.match(up.json?.error ?? up.text, /cache driver|cluster backend/, `says which backend: ${up.text}`);
      t.equal((await replay(a, kept)).event, 'k', 'an entry in memory is still replayed');
      const started = Date.now();
      t.equal((await replay(b, `cache-never-${name}`)).event, 'pusher:cache_miss', 'a channel never published: cache_miss');
      t.ok(Date.now() - started < 5000, `without waiting on Redis (${Date.now() - started} ms)`);
      await backend.resume();
      for (const s of [a, b]) {
        await eventually(async () => (await rawRequest(s.port, 'GET', `/up/${APP.id}`)).status === 200, 30_000, '/up/{appId} to answer 200 again');
      }
      const fresh = `cache-after-${name}`;
      await eventually(async () => {
        await a.sdk().trigger(fresh, 'f', { v: 2 });
        const c = await startServer(cfg);
        try {
          return (await replay(c, fresh)).event === 'f';
        } finally {
          await c.stop();
        }
      }, 30_000, 'a publish after the outage to reach Redis and a new node');
      t.pass('shared again after the outage');
    });
  });
}

t.test('a single node with cache.driver redis', async (t) => {
  const redis = await RedisServer.start();
  t.teardown(() => redis.stop());
  const cfg: ConfigInput = { cache: { driver: 'redis' }, database: { redis: { host: '127.0.0.1', port: redis.port } } };

  t.test('keeps its cache across a restart', async (t) => {
    const first = await startServer(cfg);
    await first.sdk().trigger('cache-restart', 'before', { v: 1 });
    t.equal((await replay(first, 'cache-restart')).event, 'before');
    await first.stop();
    const second = await startNode(t, cfg);
    const got = await replay(second, 'cache-restart');
    t.same([got.event, data(got)], ['before', { v: 1 }], 'the restarted node replays the event published before');
  });

  t.test('its Redis down: /up/{appId} names the cache driver, subscribes answer from memory', async (t) => {
    const s = await startNode(t, cfg);
    await s.sdk().trigger('cache-single-kept', 'k', { v: 1 });
    t.equal((await replay(s, 'cache-single-kept')).event, 'k');
    t.equal((await rawRequest(s.port, 'GET', `/up/${APP.id}`)).status, 200, '/up/{appId} 200 while Redis is up');
    await redis.kill();
    t.teardown(() => redis.resume());
    await eventually(async () => (await rawRequest(s.port, 'GET', `/up/${APP.id}`)).status === 503, 10_000, '/up/{appId} to answer 503');
    const up = await rawRequest(s.port, 'GET', `/up/${APP.id}`);
    t.match(up.text, /the cache driver's backend \(redis\) cannot be reached/, 'it names the cache driver');
    t.equal((await replay(s, 'cache-single-kept')).event, 'k', 'an entry in memory is still replayed');
    t.equal((await replay(s, 'cache-single-other')).event, 'pusher:cache_miss', 'a local miss is a cache_miss');
    await redis.resume();
    await eventually(async () => (await rawRequest(s.port, 'GET', `/up/${APP.id}`)).status === 200, 20_000, '/up/{appId} to answer 200 again');
  });
});

t.test('cache.driver redis through Sentinel: a node started after the publish replays it', async (t) => {
  const backend = await startBackend('redis-sentinel');
  t.teardown(() => backend.stop());
  const cfg: ConfigInput = { ...backend.config(), cache: { driver: 'redis' }, workers: NODE_WORKERS };
  const a = await startNode(t, cfg);
  await a.sdk().trigger('cache-sentinel', 's', { v: 3 });
  const b = await startNode(t, cfg);
  const got = await replay(b, 'cache-sentinel');
  t.same([got.event, data(got)], ['s', { v: 3 }], 'replayed from the Sentinel-managed master');
});

t.test('a cache Redis that cannot be reached is a startup error naming it', async (t) => {
  const port = await freePort();
  await t.rejects(startServer({ cache: { driver: 'redis' }, database: { redis: { host: '127.0.0.1', port } } }),
    { code: 'RC_ERR_CACHE_DOWN', message: new RegExp(`cache\\.driver redis: cannot reach Redis at 127\\.0\\.0\\.1:${port}`) });
  await t.rejects(startServer({ cache: { driver: 'redis-cluster' } }),
    { code: 'RC_ERR_CONFIG', message: /database\.redis_cluster\.nodes must list at least one host:port when cache\.driver is redis-cluster/ });
});
