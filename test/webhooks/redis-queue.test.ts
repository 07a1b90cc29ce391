// queue.driver redis: at-least-once across a kill -9. A real redis-server on a free port,
// ringcast as a child process (bin/ringcast.js, as the cli tests run it) with a temp config:
// a webhook the receiver has seen once (answered 503, so it waits for a retry) is sent
// again by the next ringcast on the same Redis after the first was killed with SIGKILL.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { ENV_VARS, APP_ENV_VARS } from '../../src/config/env';
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

t.test('a webhook accepted into the redis queue survives kill -9 and is sent after restart', async (t) => {
  const redis = await RedisServer.start();
  const receiver = await startReceiver();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-wh-'));
  t.teardown(async () => {
    await receiver.close();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  });
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
  t.equal((await redisCommand(redis.port, 'LLEN rc-test:webhooks:processing')).trim(), ':1', 'in flight: in the processing list');

  const gone = new Promise((r) => first.once('exit', r));
  first.kill('SIGKILL');
  await gone;
  await c.closed(5000).catch(() => undefined);

  receiver.respond = () => 200;
  await ringcast(t, dir, 'second', config(100), port);
  await receiver.until((q) => q.length === 2, 15_000, 'the webhook sent again by the restarted ringcast');
  t.equal(receiver.requests[1].rawBody, receiver.requests[0].rawBody, 'the same request (same time_ms): the queued job, not a new event');
  t.ok(sdkValid(receiver.requests[1]), 'signed');
  await eventually(async () => (await redisCommand(redis.port, 'LLEN rc-test:webhooks:processing')).trim() === ':0', 5000, 'processing list empty');
  t.equal((await redisCommand(redis.port, 'LLEN rc-test:webhooks:pending')).trim(), ':0', 'nothing left pending');
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
