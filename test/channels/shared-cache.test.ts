// SharedCache (cache.driver redis) against a real redis-server, without the engine around
// it: write-through, read-back on a local miss, the order rules while a read is in flight,
// the wait for an adapter's copy of a fresh entry, and Redis down (answers from memory).

import t from 'tap';
import { CacheStore } from '../../src/channels/cache';
import { checkSharedCache, COMMAND_TIMEOUT_MS, IN_FLIGHT_MS, SharedCache } from '../../src/channels/shared-cache';
import { AppRegistry } from '../../src/apps/registry';
import { createOwnerService } from '../../src/channels/owner-service';
import { loadConfig } from '../../src/config';
import { unsupportedIssues } from '../../src/config/support';
import { PromMetrics } from '../../src/metrics/registry';
import { redisCommand, RedisServer } from '../helpers/redis';
import { eventually } from '../helpers/server';

const frame = (v: number) => JSON.stringify({ event: 'e', channel: 'cache-x', data: JSON.stringify({ v }) });

t.test('SharedCache against a real Redis', async (t) => {
  const redis = await RedisServer.start();
  t.teardown(() => redis.stop());
  const config = (adapter: 'local' | 'redis' = 'local') => loadConfig({
    env: {},
    overrides: {
      cache: { driver: 'redis' }, adapter: { driver: adapter },
      database: { redis: { host: '127.0.0.1', port: redis.port, key_prefix: 'sc:' } },
      apps: [{ id: 'a', key: 'k', secret: 's' }],
    },
  });
  const open = async (adapter: 'local' | 'redis' = 'local', metrics?: PromMetrics, inFlightMs?: number) => {
    const store = new CacheStore();
    const c = new SharedCache(config(adapter), store, { adapter: adapter !== 'local', metrics, inFlightMs });
    t.teardown(() => c.close());
    await c.ready(3000);
    return { c, store };
  };

  /** The origin's SET is fire and forget: wait until Redis has the key. */
  const written = (channel: string) => eventually(async () =>
    (await redisCommand(redis.port, `EXISTS sc:cache:{a:${channel}}`)).startsWith(':1'), 3000, `${channel} in Redis`);

  t.test('a publish is written through; another owner reads it back once and keeps it', async (t) => {
    const a = await open();
    const b = await open();
    a.c.set('a', 'cache-one', frame(1), 60, '{"k":"v"}', true);
    await written('cache-one');
    const got = await b.c.get('a', 'cache-one');
    t.equal(got?.message, frame(1), 'the other owner got the entry from Redis');
    t.equal(got?.tags, '{"k":"v"}', 'with its tags');
    t.ok(got!.ttlMs > 55_000 && got!.ttlMs <= 60_000, `with the TTL Redis has left (${got?.ttlMs} ms)`);
    const again = b.c.get('a', 'cache-one');
    t.notOk(again instanceof Promise, 'the next question is answered from memory at once');
    t.equal(a.c.key('a', 'cache-one'), 'sc:cache:{a:cache-one}', 'key: the prefix, then the channel as its hash tag');
  });

  t.test('a bridged publish is not written (its origin node writes it)', async (t) => {
    const a = await open();
    const b = await open();
    a.c.set('a', 'cache-bridged', frame(1), 60, undefined, false);
    t.equal((a.c.get('a', 'cache-bridged') as { message: string }).message, frame(1), 'kept in memory');
    t.equal(await b.c.get('a', 'cache-bridged'), null, 'not in Redis');
  });

  t.test('a publish learnt of while the read is in flight wins over the answer', async (t) => {
    const a = await open();
    const b = await open();
    a.c.set('a', 'cache-race', frame(1), 60, undefined, true);
    await a.c.get('a', 'cache-race');
    const asked = b.c.get('a', 'cache-race');
    const second = b.c.get('a', 'cache-race');
    t.ok(asked instanceof Promise, 'a local miss asks Redis');
    t.equal(second, asked, 'a second question shares the read in flight');
    b.c.set('a', 'cache-race', frame(2), 60, undefined, false); // the owner's queue goes on meanwhile
    t.equal((await asked)?.message, frame(2), 'the newer event is the answer, not the older one in Redis');
    t.equal((b.c.get('a', 'cache-race') as { message: string }).message, frame(2), 'and it stays the entry');
  });

  t.test('with an adapter, a fresh entry waits for the adapter\'s copy', async (t) => {
    const origin = await open();
    // a long wait, so that only the adapter's copy can end it (whatever the machine's load)
    const other = await open('redis', undefined, 30_000);
    origin.c.set('a', 'cache-fresh', frame(7), 60, undefined, true);
    await written('cache-fresh');
    const asked = other.c.get('a', 'cache-fresh') as Promise<unknown>;
    let answered = false;
    void asked.then(() => { answered = true; });
    await eventually(() => other.c.waiting === 1, 5000, 'Redis to answer and the owner to wait for the copy');
    t.notOk(answered, 'no answer before the adapter\'s copy');
    other.c.set('a', 'cache-fresh', frame(7), 60, undefined, false); // the bridged copy arrives
    t.equal((await asked as { message: string }).message, frame(7), 'answered from memory once the copy is there');
    t.equal(other.c.waiting, 0, 'nobody waits any more');
  });

  t.test('with an adapter, a fresh entry whose copy never comes is answered after the wait', async (t) => {
    const origin = await open();
    const other = await open('redis');
    const started = Date.now();
    origin.c.set('a', 'cache-lost', frame(8), 60, undefined, true);
    await written('cache-lost');
    const got = await other.c.get('a', 'cache-lost');
    t.equal(got?.message, frame(8), 'the Redis entry is the answer');
    // the wait ends IN_FLIGHT_MS after the SET (less the entry's age when read)
    t.ok(Date.now() - started >= IN_FLIGHT_MS - 100, `not before the entry is ${IN_FLIGHT_MS} ms old (${Date.now() - started} ms)`);
    t.equal(other.c.waiting, 0, 'and the waiter is gone');
  });

  t.test('the owner service: its own shards\' publishes are written, the primary\'s (bridged) are not', async (t) => {
    const { c: shared, store } = await open();
    const replies: { req: number; body: unknown }[] = [];
    const noLog = { error: () => undefined, warn: () => undefined, info: () => undefined, debug: () => undefined } as never;
    const cfg = config();
    const svc = createOwnerService({
      shards: 2, apps: new AppRegistry(cfg.apps), defaultMaxMembers: 100,
      publisher: { publishOne: () => undefined, member: () => undefined },
      reply: (_to, req, body) => replies.push({ req, body }),
      cacheStore: store, sharedCache: shared, log: noLog, out: (e) => e,
    });
    const cacheSet = (channel: string, v: number) => ({ type: 'cache_set', app: 'a', channel, message: frame(v), ttl: 60 }) as const;
    // the bridged one first: had it been written, its SET would be ahead of the other's on
    // the one connection, so Redis having the second one is the marker for both
    svc.handle(cacheSet('cache-from-primary', 2), 2); // from thread `shards`: the primary's bridge
    svc.handle(cacheSet('cache-own', 1), 1); // from shard 1
    await written('cache-own');
    const reader = await open();
    t.equal((await reader.c.get('a', 'cache-own'))?.message, frame(1), 'a shard\'s publish is in Redis');
    t.equal(await reader.c.get('a', 'cache-from-primary'), null, 'a bridged one is not');
    t.same(replies, [], 'cache_set has no reply');
    // a local miss: the answer comes later, once Redis answered
    const { c: other, store: otherStore } = await open();
    const svc2 = createOwnerService({
      shards: 2, apps: new AppRegistry(cfg.apps), defaultMaxMembers: 100,
      publisher: { publishOne: () => undefined, member: () => undefined },
      reply: (_to, req, body) => replies.push({ req, body }),
      cacheStore: otherStore, sharedCache: other, log: noLog, out: (e) => e,
    });
    svc2.handle({ type: 'cache_get', req: 7, from: 0, app: 'a', channel: 'cache-own' }, 0);
    t.same(replies, [], 'not answered at once');
    await eventually(() => replies.length === 1, 3000, 'the answer');
    t.equal((replies[0].body as { message: string }).message, frame(1), 'answered with Redis\'s entry');
    svc.stop();
    svc2.stop();
  });

  t.test('checkSharedCache: a Redis that is not there is a clear error', async (t) => {
    const cfg = loadConfig({ env: {}, overrides: { cache: { driver: 'redis' }, database: { redis: { host: '127.0.0.1', port: 1 } }, apps: [{ id: 'a', key: 'k', secret: 's' }] } });
    await t.rejects(checkSharedCache(cfg, 500), { code: 'RC_ERR_CACHE_DOWN', message: /cache\.driver redis: cannot reach Redis at 127\.0\.0\.1:1 within 500 ms/ });
  });

  t.test('a hung Redis (SIGSTOP): a local miss is answered after the command timeout', async (t) => {
    const a = await open();
    redis.freeze();
    t.teardown(() => redis.thaw());
    const started = Date.now();
    t.equal(await a.c.get('a', 'cache-hung'), null, 'a miss');
    const took = Date.now() - started;
    t.ok(took >= COMMAND_TIMEOUT_MS - 100 && took < COMMAND_TIMEOUT_MS + 2000, `after about ${COMMAND_TIMEOUT_MS} ms (${took} ms)`);
    redis.thaw();
  });

  t.test('Redis down: answers from memory, errors counted, nothing waits long', async (t) => {
    const metrics = new PromMetrics('ringcast_');
    const a = await open('local', metrics);
    a.c.set('a', 'cache-kept', frame(1), 60, undefined, true);
    await redis.kill();
    t.teardown(() => redis.resume());
    await new Promise<void>((resolve) => {
      const check = () => (a.c.isUp() ? setTimeout(check, 20) : resolve());
      check();
    });
    t.notOk(a.c.isUp(), 'down');
    t.equal((a.c.get('a', 'cache-kept') as { message: string }).message, frame(1), 'an entry in memory is still answered');
    const started = Date.now();
    t.equal(await a.c.get('a', 'cache-none'), null, 'a local miss is a miss');
    t.ok(Date.now() - started < 1500, 'at once, not after a timeout');
    a.c.set('a', 'cache-w', frame(2), 60, undefined, true);
    await new Promise((r) => setImmediate(r));
    const series = (await metrics.json()).find((m) => m.name === 'ringcast_cache_errors_total');
    const count = (op: string) => series?.values.find((v) => v.labels.op === op)?.value ?? 0;
    t.ok(count('read') >= 1, `the failed read is counted (${count('read')})`);
    t.ok(count('write') >= 1, `the failed write is counted (${count('write')})`);
    await redis.resume();
  });
});

t.test('CACHE_DRIVER picks the driver and nothing refuses it', async (t) => {
  for (const [driver, env] of [['redis', {}], ['redis-cluster', { REDIS_CLUSTER_NODES: '127.0.0.1:7000' }]] as const) {
    const cfg = loadConfig({ env: { CACHE_DRIVER: driver, ...env }, overrides: { apps: [{ id: 'a', key: 'k', secret: 's' }] } });
    t.equal(cfg.cache.driver, driver);
    t.same(unsupportedIssues(cfg).filter((i) => i.key === 'cache.driver'), [], `${driver}: no refusal`);
  }
});
