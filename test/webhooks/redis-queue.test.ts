// test-modes: once (the child servers set their own shard counts)
// queue.driver redis: at-least-once across a kill -9, and several nodes on one Redis. A
// real redis-server on a free port, ringcast as child processes (bin/ringcast.js, as the
// cli tests run it) with temp configs: a webhook the receiver has seen once (answered 503,
// so it waits for a retry) is sent again by the next ringcast on the same Redis after the
// first was killed with SIGKILL; a second node starting does not re-send a job the first
// is sending; a node killed while another runs has its jobs sent by the other once its
// lease lapses; a graceful stop hands its unfinished jobs to the other node at once.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import t, { type Test } from 'tap';
import { ENV_VARS, APP_ENV_VARS } from '../../src/config/env';
import { LEASE_MS, RENEW_MS } from '../../src/webhooks/queue-redis';
import { metric } from '../faults/api';
import { freePort } from '../helpers/net';
import { RedisServer, redisCommand } from '../helpers/redis';
import { APP, RawClient, eventually, startServer } from '../helpers/server';
import { startReceiver, sdkValid } from './receiver';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const BIN = path.join(ROOT, 'bin', 'ringcast.js');

function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of [...Object.keys(ENV_VARS), ...Object.keys(APP_ENV_VARS), 'NODE_OPTIONS']) delete env[k];
  for (const k of Object.keys(env)) if (k.startsWith('TAP') || k.startsWith('RINGCAST_')) delete env[k];
  return env;
}

function up(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    http.get({ host: '127.0.0.1', port, path: '/up', agent: false, timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    }).on('error', () => resolve(false));
  });
}

/** Jobs in the processing lists (one per consumer) of prefix `rc-test:`, by list. */
async function processing(port: number): Promise<Map<string, number>> {
  const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true });
  try {
    await r.connect();
    const out = new Map<string, number>();
    for (const k of await r.keys('rc-test:webhooks:processing*')) out.set(k, await r.llen(k));
    return out;
  } finally {
    r.disconnect();
  }
}

function total(m: Map<string, number>): number {
  return [...m.values()].reduce((a, b) => a + b, 0);
}

/** Starts bin/ringcast.js with this config (JSON is YAML) and waits for /up. */
async function ringcast(t: Test, dir: string, name: string, config: unknown, port: number): Promise<ChildProcess> {
  const file = path.join(dir, `${name}.yaml`);
  writeFileSync(file, JSON.stringify(config));
  const child = spawn(process.execPath, [BIN, 'start', '--config', file], { cwd: dir, env: cleanEnv(), stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr!.on('data', (b: Buffer) => { err += b.toString(); });
  t.teardown(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL'); });
  await eventually(() => up(port), 15_000, `ringcast ${name} on port ${port} (stderr: ${err})`);
  return child;
}

/** A redis-server, a webhook receiver and a temp dir for the configs, gone at teardown. */
async function fixtures(t: Test) {
  const redis = await RedisServer.start();
  const receiver = await startReceiver();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-wh-'));
  t.teardown(async () => {
    await receiver.close();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  return { redis, receiver, dir };
}

t.test('a webhook accepted into the redis queue survives kill -9 and is sent after restart', async (t) => {
  const { redis, receiver, dir } = await fixtures(t);
  const port = await freePort();
  const config = (initialDelay: number) => ({
    host: '127.0.0.1', port, workers: 1, log: { level: 'warn' },
    queue: { driver: 'redis' },
    database: { redis: { host: '127.0.0.1', port: redis.port, key_prefix: 'rc-test:' } },
    webhooks: { retry: { initial_delay_ms: initialDelay, max_delay_ms: 600_000, max_retries: 3 } },
    apps: [{ ...APP, webhooks: [{ url: receiver.url, event_types: ['channel_occupied'] }] }],
  });

  receiver.respond = () => 503; // the first run never gets it through
  const first = await ringcast(t, dir, 'first', config(600_000), port);
  const c = await RawClient.connect(`ws://127.0.0.1:${port}/app/${APP.key}`);
  await c.subscribe('durable');
  await receiver.until((q) => q.length === 1, 15_000, 'the first attempt');
  t.equal(receiver.requests[0].body.events[0].channel, 'durable');
  t.equal(total(await processing(redis.port)), 1, 'in flight: in the processing list');

  const gone = new Promise((r) => first.once('exit', r));
  first.kill('SIGKILL');
  await gone;
  await c.closed(5000).catch(() => undefined);

  receiver.respond = () => 200;
  await ringcast(t, dir, 'second', config(100), port);
  // the killed process's lease lapses within LEASE_MS; the new one looks every RENEW_MS
  await receiver.until((q) => q.length === 2, LEASE_MS + RENEW_MS + 10_000, 'the webhook sent again by the restarted ringcast');
  t.equal(receiver.requests[1].rawBody, receiver.requests[0].rawBody, 'the same request (same time_ms): the queued job, not a new event');
  t.ok(sdkValid(receiver.requests[1]), 'signed');
  await eventually(async () => total(await processing(redis.port)) === 0, 5000, 'processing lists empty');
  t.equal((await redisCommand(redis.port, 'LLEN rc-test:webhooks:pending')).trim(), ':0', 'nothing left pending');
});

t.test('the single processing list of an earlier version is taken back at start', async (t) => {
  const { redis, receiver, dir } = await fixtures(t);
  // what an earlier version left in flight when it was killed: a job in `webhooks:processing`
  const body = JSON.stringify({ time_ms: 1234, events: [{ name: 'channel_occupied', channel: 'left-over' }] });
  const job = { app: APP.id, url: receiver.url, body, events: ['channel_occupied'] };
  const r = new Redis({ host: '127.0.0.1', port: redis.port });
  t.teardown(() => r.disconnect());
  await r.rpush('rc-test:webhooks:processing', JSON.stringify(job));
  const port = await freePort();
  await ringcast(t, dir, 'upgraded', {
    host: '127.0.0.1', port, workers: 1, log: { level: 'warn' }, queue: { driver: 'redis' },
    database: { redis: { host: '127.0.0.1', port: redis.port, key_prefix: 'rc-test:' } },
    apps: [{ ...APP, webhooks: [{ url: receiver.url, event_types: ['channel_occupied'] }] }],
  }, port);
  await receiver.until((q) => q.length === 1, 10_000, 'the left-over job');
  t.equal(receiver.requests[0].rawBody, body, 'sent as it was queued');
  t.equal(await r.exists('rc-test:webhooks:processing'), 0, 'the old list is gone');
  t.same(await r.smembers('rc-test:webhooks:consumers').then((m) => m.length), 1, 'one consumer listed: the running one');
});

/** Two nodes (not clustered) sharing one Redis queue; the first has a job in flight. */
async function twoNodes(t: Test) {
  const { redis, receiver, dir } = await fixtures(t);
  const config = (port: number, metricsPort: number) => ({
    host: '127.0.0.1', port, workers: 1, log: { level: 'warn' },
    queue: { driver: 'redis' },
    metrics: { enabled: true, host: '127.0.0.1', port: metricsPort },
    database: { redis: { host: '127.0.0.1', port: redis.port, key_prefix: 'rc-test:' } },
    webhooks: { retry: { initial_delay_ms: 600_000, max_delay_ms: 600_000, max_retries: 3 } },
    apps: [{ ...APP, webhooks: [{ url: receiver.url, event_types: ['channel_occupied'] }] }],
  });
  const channelOf = (r: { body: { events: Record<string, unknown>[] } }) => r.body.events[0].channel;
  const sent = (channel: string) => receiver.requests.filter((r) => channelOf(r) === channel);
  // the first request about `held` fails (it then waits 10 minutes for its retry); the rest pass
  receiver.respond = (r) => (channelOf(r) === 'held' && sent('held').length === 1 ? 503 : 200);

  const [pa, ma, pb, mb] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const a = await ringcast(t, dir, 'a', config(pa, ma), pa);
  const ca = await RawClient.connect(`ws://127.0.0.1:${pa}/app/${APP.key}`);
  t.teardown(() => ca.close());
  await ca.subscribe('held');
  await receiver.until(() => sent('held').length === 1, 15_000, 'the first attempt');
  const listsA = await processing(redis.port);
  t.equal(total(listsA), 1, 'node a holds the job in its own processing list');

  const b = await ringcast(t, dir, 'b', config(pb, mb), pb);
  const cb = await RawClient.connect(`ws://127.0.0.1:${pb}/app/${APP.key}`);
  t.teardown(() => cb.close());
  // a marker through the shared queue: node b's start is over and its job went after it
  await cb.subscribe('marker');
  await receiver.until(() => sent('marker').length === 1, 15_000, 'the marker webhook');
  t.equal(sent('held').length, 1, 'node b\'s start did not re-send the job node a is sending');
  // node a's list: the held job is still there (the marker's own entry may be there too
  // when node a sent the marker: its sender removes it after the answer)
  const [listA] = [...listsA.keys()];
  const r = new Redis({ port: redis.port, host: '127.0.0.1' });
  t.teardown(() => r.disconnect());
  const entries = await r.lrange(listA, 0, -1);
  t.equal(entries.filter((e) => e.includes('held')).length, 1, 'the held job still in node a\'s list');
  t.ok(entries.every((e) => e.includes('held') || e.includes('marker')), 'nothing else there');
  return { redis, receiver, a, b, mb, sent };
}

t.test('two nodes on one Redis: a start re-sends nothing; a killed node\'s job is sent by the other', async (t) => {
  const { redis, a, mb, sent } = await twoNodes(t);
  const gone = new Promise((r) => a.once('exit', r));
  a.kill('SIGKILL');
  await gone;
  await eventually(() => Promise.resolve(sent('held').length === 2), LEASE_MS + RENEW_MS + 10_000, 'the job sent again by node b');
  t.equal(sent('held')[1].rawBody, sent('held')[0].rawBody, 'the same request: the queued job');
  // the held job, and the marker's entry too when node a was still sending the marker as it died
  const requeued = await metric(mb, 'webhooks_requeued_total');
  t.ok(requeued === 1 || requeued === 2, `counted as taken back (${requeued})`);
  await eventually(async () => total(await processing(redis.port)) === 0, 5000, 'processing lists empty');
});

t.test('two nodes on one Redis: a graceful stop hands its unfinished job to the other at once', async (t) => {
  const { redis, a, mb, sent } = await twoNodes(t);
  const gone = new Promise((r) => a.once('exit', r));
  a.kill('SIGTERM');
  await gone;
  await eventually(() => Promise.resolve(sent('held').length === 2), 10_000, 'the job sent by node b');
  t.equal(sent('held')[1].rawBody, sent('held')[0].rawBody, 'the same request');
  t.equal(await metric(mb, 'webhooks_requeued_total'), 0, 'handed back, not taken back after a lapsed lease');
  const r = new Redis({ port: redis.port, host: '127.0.0.1' });
  t.teardown(() => r.disconnect());
  t.equal((await r.keys('rc-test:webhooks:lease:*')).length, 1, 'only node b still holds a lease');
  await eventually(async () => total(await processing(redis.port)) === 0, 5000, 'processing lists empty');
});

t.test('in process: delivered through redis; a Redis that does not answer fails the start', async (t) => {
  const redis = await RedisServer.start();
  const receiver = await startReceiver();
  t.teardown(async () => { await receiver.close(); await redis.stop(); });
  const srv = await startServer({
    queue: { driver: 'redis' },
    database: { redis: { host: '127.0.0.1', port: redis.port } },
    apps: [{ ...APP, webhooks: [{ url: receiver.url, event_types: ['channel_occupied', 'channel_vacated'] }] }],
  });
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  await c.subscribe('via-redis');
  c.send({ event: 'pusher:unsubscribe', data: { channel: 'via-redis' } });
  await receiver.until((q) => q.length === 2);
  t.same(receiver.events().map((e) => e.name).sort(), ['channel_occupied', 'channel_vacated']);
  await srv.stop();

  const dead = await freePort();
  await t.rejects(startServer({
    queue: { driver: 'redis' },
    database: { redis: { host: '127.0.0.1', port: dead } },
    apps: [{ ...APP, webhooks: [{ url: receiver.url, event_types: ['channel_occupied'] }] }],
  }), { code: 'RC_ERR_WEBHOOK_QUEUE_DOWN', message: new RegExp(`127\\.0\\.0\\.1:${dead}`) });
});
