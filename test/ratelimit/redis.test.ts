// test-modes: workers 4 (one bucket in Redis whatever the shards: requests spread over 4 of them share it)
// The redis and redis-cluster rate limiters against a REAL redis-server and a real
// 3-master cluster, started here on free ports: the Lua scripts' math, key naming,
// EVALSHA→EVAL, one bucket shared by two ringcast servers, an outage (503, fail closed,
// rate_limiter_errors_total), recovery when Redis is back, the startup check, and the
// cluster driver. redis-server missing makes this file FAIL (scripts/deps.sh installs it).

import t from 'tap';
import uWS from 'uWebSockets.js';
import { AppRegistry } from '../../src/apps/registry';
import { loadConfig, type ConfigInput } from '../../src/config';
import type { ApiDeps } from '../../src/http/deps';
import { registerRoutes } from '../../src/http/router';
import { createLogger } from '../../src/log';
import { start } from '../../src/main';
import { noMetrics, type MetricsSink } from '../../src/metrics/types';
import { createRateLimiter, checkRateLimiter } from '../../src/ratelimit';
import { limitKey, RateLimiterUnavailable, type RateLimiter } from '../../src/ratelimit/types';
import { rawRequest, signedGet } from '../helpers/http';
import { freePort } from '../helpers/net';
import { redisCommand, RedisCluster, RedisServer, requireRedisBinaries } from '../helpers/redis';
import { APP, RawClient, WORKERS, eventually, startServer } from '../helpers/server';

const SLOW = { id: 'slow-id', key: 'slow-key', secret: 'slow-secret', max_client_events_per_second: 2 } as const;

const redisCfg = (port: number, extra: ConfigInput = {}) => loadConfig({
  env: {},
  overrides: {
    apps: [{ ...APP }],
    rate_limiter: { driver: 'redis' },
    database: { redis: { host: '127.0.0.1', port, key_prefix: 'rc-test:' } },
    ...extra,
  },
});

/** Unit checks every backend must pass (the same suite for redis and redis-cluster). */
async function limiterConformance(t: tap.Test, limiter: RateLimiter, keyExists: (key: string) => Promise<boolean>) {
  await limiter.ready(5000);
  await t.resolves(Promise.resolve(limiter.health()), 'health(): the backend answers');
  const key = limitKey.api(`conf-${Date.now()}`);
  for (let i = 0; i < 3; i++) {
    const d = await limiter.consume(key, 3, 3);
    t.equal(d.allowed, true, `bucket: ${i + 1} of 3`);
    t.equal(d.remaining, 2 - i, `remaining ${2 - i}`);
    t.ok(d.resetSeconds > 0 && d.resetSeconds <= 1.001, `reset ≤ 1 s (${d.resetSeconds})`);
  }
  const denied = await limiter.consume(key, 3, 3);
  t.equal(denied.allowed, false, 'bucket: 4th refused');
  t.equal(denied.remaining, 0);
  t.ok(denied.retryAfterSeconds > 0 && denied.retryAfterSeconds <= 0.34, `retry after ≤ one token (${denied.retryAfterSeconds})`);
  t.ok(await keyExists(`rc-test:ratelimit:{${key}}`), 'key is <key_prefix>ratelimit:{<key>}');

  const cost = limitKey.backend(`conf-${Date.now()}`);
  t.equal((await limiter.consume(cost, 5, 5, 3)).remaining, 2, 'cost 3 of 5');
  const over = await limiter.consume(cost, 5, 5, 3);
  t.equal(over.allowed, false, 'cost 3 with 2 left: refused');
  t.equal(over.remaining, 2, 'nothing taken');

  const ip = limitKey.ip(`10.0.0.${Date.now() % 250}`);
  t.equal((await limiter.window(ip, 2, 60)).remaining, 1, 'window: 1 of 2');
  t.equal((await limiter.window(ip, 2, 60)).remaining, 0, 'window: 2 of 2');
  const w = await limiter.window(ip, 2, 60);
  t.equal(w.allowed, false, 'window: 3rd refused');
  t.ok(w.retryAfterSeconds > 55 && w.retryAfterSeconds <= 60, `retry after the window (${w.retryAfterSeconds})`);

  const refill = limitKey.api(`refill-${Date.now()}`);
  const emptying = Date.now();
  for (let i = 0; i < 10; i++) await limiter.consume(refill, 10, 10);
  await new Promise((r) => setTimeout(r, 350));
  const back = await limiter.consume(refill, 10, 10);
  // At most what 10/s refills from the first take on (a busy machine sleeps longer than 350 ms).
  const most = Math.min(9, Math.floor(((Date.now() - emptying) / 1000) * 10) - 1);
  t.ok(back.allowed && back.remaining >= 1 && back.remaining <= most,
    `refills at the rate (${back.remaining} left ${Date.now() - emptying} ms after the bucket was emptied at 10/s; at most ${most})`);
}

t.test('redis-server is installed (make test installs it: scripts/deps.sh)', async (t) => {
  t.doesNotThrow(() => requireRedisBinaries());
});

t.test(`redis driver, workers: ${WORKERS}`, async (t) => {
  requireRedisBinaries();
  const redis = await RedisServer.start();
  t.teardown(() => redis.stop());

  t.test('limiter: bucket, cost, window, key names', async (t) => {
    const limiter = createRateLimiter(redisCfg(redis.port));
    t.teardown(() => limiter.close());
    await limiterConformance(t, limiter, async (k) => (await redisCommand(redis.port, `EXISTS ${k}`)).startsWith(':1'));
  });

  t.test('EVALSHA falls back to EVAL after SCRIPT FLUSH', async (t) => {
    const limiter = createRateLimiter(redisCfg(redis.port));
    t.teardown(() => limiter.close());
    await limiter.ready(5000);
    await limiter.consume('api:flush', 5, 5);
    t.match(await redisCommand(redis.port, 'SCRIPT FLUSH'), /^\+OK/);
    const d = await limiter.consume('api:flush', 5, 5);
    t.equal(d.allowed, true);
    t.equal(d.remaining, 3, 'same bucket, second token');
  });

  t.test('two ringcast servers on one Redis share the bucket', async (t) => {
    const cfg = { apps: [{ ...APP }, { ...SLOW }], rate_limiter: { driver: 'redis' as const }, database: { redis: { host: '127.0.0.1', port: redis.port } } };
    const a = await startServer(cfg);
    t.teardown(() => a.stop());
    const b = await startServer(cfg);
    t.teardown(() => b.stop());
    const r1 = await signedGet(a.port, SLOW, 'channels');
    const r2 = await signedGet(b.port, SLOW, 'channels');
    const r3 = await signedGet(a.port, SLOW, 'channels');
    t.equal(r1.status, 200);
    t.equal(r1.headers['x-ratelimit-remaining'], '1');
    t.equal(r2.status, 200, 'the other server: the second token');
    t.equal(r2.headers['x-ratelimit-remaining'], '0', 'it sees the first server\'s request');
    t.equal(r3.status, 429, 'bucket of 2 shared: the third request is refused');
    t.match(r3.headers['retry-after'], /^[1-9]\d*$/);
  });

  t.test('outage: 503 at once (fail closed), /up and WebSockets unaffected, recovery when Redis is back', async (t) => {
    const srv = await startServer({ apps: [{ ...APP }], rate_limiter: { driver: 'redis' }, database: { redis: { host: '127.0.0.1', port: redis.port } } });
    t.teardown(() => srv.stop());
    t.equal((await signedGet(srv.port, APP, 'channels')).status, 200);
    const ws = srv.track(await RawClient.connect(srv.wsUrl()));
    await redis.kill();
    try {
      const started = Date.now();
      const down = await signedGet(srv.port, APP, 'channels');
      t.equal(down.status, 503, `503 (${down.text})`);
      t.same(down.json, { error: 'rate limiter unavailable' });
      t.ok(Date.now() - started < 3000, `answered quickly, no hang (${Date.now() - started} ms)`);
      t.equal((await signedGet(srv.port, APP, 'channels')).status, 503, 'still 503 while Redis is down');
      t.equal((await rawRequest(srv.port, 'GET', '/up')).status, 200, '/up is not limited');
      ws.send({ event: 'pusher:ping', data: {} });
      await ws.event('pusher:pong');
      t.pass('WebSocket traffic goes on');
    } finally {
      await redis.resume();
    }
    await eventually(async () => (await signedGet(srv.port, APP, 'channels')).status === 200, 20_000, 'recovery after Redis is back');
    t.pass('recovered by itself');
  });

  t.test('GET /up/{appId}: 503 while Redis is down or hung, 200 again once it answers', async (t) => {
    const OFF = { id: 'off-id', key: 'off-key', secret: 'off-secret', enabled: false };
    const srv = await startServer({ apps: [{ ...APP }, OFF], rate_limiter: { driver: 'redis' }, database: { redis: { host: '127.0.0.1', port: redis.port } } });
    t.teardown(() => srv.stop());
    // One connection per request: with several shards they land on several of them.
    const statuses = async () => Promise.all(Array.from({ length: 2 * WORKERS }, async () => (await rawRequest(srv.port, 'GET', `/up/${APP.id}`)).status));
    const all = (status: number) => async () => (await statuses()).every((s) => s === status);
    t.same(await statuses(), Array(2 * WORKERS).fill(200), 'up: 200 on every shard');

    await redis.kill();
    try {
      await eventually(all(503), 10_000, '/up/{appId} to answer 503 on every shard (Redis killed)');
      const down = await rawRequest(srv.port, 'GET', `/up/${APP.id}`);
      t.same(down.json, { error: `App ${APP.id} is not available: its rate limiter (redis) cannot be reached` }, 'says why');
      t.notMatch(down.text, String(redis.port), 'without the address of the backend (the endpoint is not authenticated)');
      t.same({ status: (await rawRequest(srv.port, 'GET', '/up')).status }, { status: 200 }, '/up (the process) is still 200');
      t.equal((await rawRequest(srv.port, 'GET', `/up/${OFF.id}`)).status, 404, 'a disabled app is still 404');
      t.equal((await rawRequest(srv.port, 'GET', '/up/no-such-app')).status, 404, 'an unknown app is still 404');
    } finally {
      await redis.resume();
    }
    await eventually(all(200), 20_000, '/up/{appId} to answer 200 again (Redis back)');
    t.pass('200 again once Redis is back');

    redis.freeze();
    try {
      const started = Date.now();
      await eventually(all(503), 10_000, '/up/{appId} to answer 503 on every shard (Redis hung)');
      t.ok(Date.now() - started < 5000, `hung Redis: 503 after the PING timeout, no hang (${Date.now() - started} ms)`);
    } finally {
      redis.thaw();
    }
    await eventually(all(200), 20_000, '/up/{appId} to answer 200 again (Redis thawed)');
    t.pass('200 again once Redis answers');
  });

  t.test('outage counts rate_limiter_errors_total (router in this thread, recording sink)', async (t) => {
    const counted: { name: string; labels?: Record<string, string> }[] = [];
    const metrics: MetricsSink = { ...noMetrics, inc: (name, labels) => { counted.push({ name, labels }); } };
    const config = redisCfg(redis.port, { log: { level: 'silent' } });
    const limiter = createRateLimiter(config);
    t.teardown(() => limiter.close());
    await limiter.ready(5000);
    const app = uWS.App();
    const deps = {
      config, apps: new AppRegistry(config.apps), publisher: { publish() {} }, log: createLogger(config.log), metrics, limiter,
      stopping: () => false,
      directory: {
        info: async () => ({ subscription_count: 0, user_count: null }),
        list: async () => [],
        members: async () => [],
        terminateUser() {},
      },
    } as unknown as ApiDeps;
    registerRoutes(app, deps);
    const port = await new Promise<number>((resolve, reject) => app.listen('127.0.0.1', 0, (ls) => {
      if (!ls) return reject(new Error('listen failed'));
      t.teardown(() => uWS.us_listen_socket_close(ls));
      resolve(uWS.us_socket_local_port(ls));
    }));
    t.equal((await signedGet(port, APP, 'channels')).status, 200);
    t.equal(counted.filter((c) => c.name === 'rate_limiter_errors_total').length, 0);
    await redis.kill();
    try {
      t.equal((await signedGet(port, APP, 'channels')).status, 503);
      t.equal((await signedGet(port, APP, 'channels')).status, 503);
      t.equal(counted.filter((c) => c.name === 'rate_limiter_errors_total').length, 2, 'one rate_limiter_errors_total per refused request');
    } finally {
      await redis.resume();
    }
    await eventually(async () => (await signedGet(port, APP, 'channels')).status === 200, 20_000, 'recovery');
    for (let i = 0; i < 3; i++) await signedGet(port, { ...APP }, 'channels');
    t.pass('recovered');
  });

  t.test('startup: a configured Redis that does not answer is a startup error', async (t) => {
    const port = await freePort();
    const started = Date.now();
    await t.rejects(start(redisCfg(port)), { code: 'RC_ERR_RATE_LIMITER_DOWN', message: new RegExp(`127\\.0\\.0\\.1:${port}`) });
    t.ok(Date.now() - started < 10_000, 'decided within the connect timeout');
    await t.rejects(checkRateLimiter(redisCfg(port), 500), RateLimiterUnavailable);
  });
});

t.test(`redis-cluster driver (3 masters), workers: ${WORKERS}`, async (t) => {
  requireRedisBinaries();
  const cluster = await RedisCluster.start();
  t.teardown(() => cluster.stop());
  const nodes = cluster.ports.map((port) => ({ host: '127.0.0.1', port }));
  const clusterCfg = (extra: ConfigInput = {}) => loadConfig({
    env: {},
    overrides: {
      apps: [{ ...APP }, { ...SLOW }],
      rate_limiter: { driver: 'redis-cluster' },
      database: { redis_cluster: { nodes, key_prefix: 'rc-test:' } },
      ...extra,
    },
  });

  t.test('limiter: bucket, cost, window, key names; keys spread over the masters', async (t) => {
    const limiter = createRateLimiter(clusterCfg());
    t.teardown(() => limiter.close());
    const exists = async (k: string) => {
      for (const p of cluster.ports) if ((await redisCommand(p, `EXISTS ${k}`)).startsWith(':1')) return true;
      return false;
    };
    await limiterConformance(t, limiter, exists);
    for (let i = 0; i < 30; i++) await limiter.consume(limitKey.api(`spread-${i}`), 5, 5);
    const perNode = await Promise.all(cluster.ports.map(async (p) => Number((await redisCommand(p, 'DBSIZE')).slice(1))));
    t.ok(perNode.every((n) => n > 0), `every master holds limiter keys (${perNode.join(', ')})`);
  });

  t.test('a ringcast server with the cluster driver limits per app', async (t) => {
    const cfg = clusterCfg();
    const a = await startServer({ apps: cfg.apps, rate_limiter: { driver: 'redis-cluster' }, database: { redis_cluster: { nodes } } });
    t.teardown(() => a.stop());
    const b = await startServer({ apps: cfg.apps, rate_limiter: { driver: 'redis-cluster' }, database: { redis_cluster: { nodes } } });
    t.teardown(() => b.stop());
    const statuses = [
      (await signedGet(a.port, SLOW, 'channels')).status,
      (await signedGet(b.port, SLOW, 'channels')).status,
      (await signedGet(a.port, SLOW, 'channels')).status,
    ];
    t.same(statuses, [200, 200, 429], 'bucket of 2 shared by both servers through the cluster');
    t.equal((await signedGet(b.port, APP, 'channels')).status, 200, 'another app is not limited by it');
  });

  t.test('startup: unreachable cluster nodes are a startup error', async (t) => {
    const port = await freePort();
    await t.rejects(checkRateLimiter(loadConfig({
      env: {}, overrides: { apps: [{ ...APP }], rate_limiter: { driver: 'redis-cluster' }, database: { redis_cluster: { nodes: [{ host: '127.0.0.1', port }] } } },
    }), 1500), { code: 'RC_ERR_RATE_LIMITER_DOWN' });
  });
});
