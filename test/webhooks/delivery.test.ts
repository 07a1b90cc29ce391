// test-modes: once (signing, retries and batching are the primary's webhook service; decisions across shards: webhooks/events)
// Delivery against a real receiver: batching by size and by time, the retry schedule
// (short configured delays: 1, 2, 4 × initial), no retry on 4xx, retries on network
// errors and timeouts, the final failure logged with endpoint and event names and counted.
// Concurrency 1 (one request at a time; a job waiting for its retry holds no slot). Checks
// that something did not happen wait for positive marks first: webhooks_sent_total /
// webhooks_failed_total count a job only once it is over for good.

import { Writable } from 'node:stream';
import pino from 'pino';
import t from 'tap';
import { loadConfig } from '../../src/config';
import { start, type RunningServer } from '../../src/main';
import { metric } from '../faults/api';
import { APP, RawClient, WORKERS, eventually } from '../helpers/server';
import { startReceiver, type Receiver } from './receiver';

const BASE = 100; // retry.initial_delay_ms

interface Srv { server: RunningServer; url: string; logs: Record<string, unknown>[] }

async function serve(r: Receiver, webhooks: Record<string, unknown>, eventTypes = ['channel_occupied'], extra: Record<string, unknown> = {}): Promise<Srv> {
  const logs: Record<string, unknown>[] = [];
  const stream = new Writable({ write(chunk: Buffer, _e, cb) { for (const l of chunk.toString().split('\n')) if (l) logs.push(JSON.parse(l)); cb(); } });
  const config = loadConfig({
    env: {},
    overrides: {
      host: '127.0.0.1', port: 0, workers: WORKERS, log: { level: 'error' },
      metrics: { enabled: true, port: 0, host: '127.0.0.1' },
      webhooks: { concurrency: 1, ...webhooks },
      apps: [{ ...APP, webhooks: [{ url: r.url, event_types: eventTypes }] }],
      ...extra,
    },
  });
  const server = await start(config, pino({ level: 'warn' }, stream));
  return { server, url: `ws://127.0.0.1:${server.port}/app/${APP.key}`, logs };
}

const channelsOf = (r: Receiver, i: number) => r.requests[i].body.events.map((e) => e.channel);
const attemptsFor = (r: Receiver, channel: string) => r.requests.filter((q) => q.body.events.some((e) => e.channel === channel));

t.test('batching: flushed at `size` events, or `duration` ms after the first', async (t) => {
  const r = await startReceiver();
  const s = await serve(r, { batching: { enabled: true, size: 3, duration: 1500 } });
  const c = await RawClient.connect(s.url);
  t.teardown(async () => { await c.close(); await s.server.stop(); await r.close(); });

  for (const ch of ['size-1', 'size-2', 'size-3']) await c.subscribe(ch);
  await r.until((q) => q.length >= 1);
  t.equal(r.requests[0].body.events.length, 3, 'three events: one request');
  t.same(channelsOf(r, 0).sort(), ['size-1', 'size-2', 'size-3']);

  const t0 = Date.now();
  await c.subscribe('time-1');
  await r.until((q) => q.length >= 2);
  t.same(channelsOf(r, 1), ['time-1'], 'one event, sent when the duration ended');
  t.ok(r.requests[1].at - t0 >= 1500 - 5, `sent ≥ duration after the event (${r.requests[1].at - t0} ms)`);
});

t.test('batching off: one request per event', async (t) => {
  const r = await startReceiver();
  const s = await serve(r, {});
  const c = await RawClient.connect(s.url);
  t.teardown(async () => { await c.close(); await s.server.stop(); await r.close(); });
  for (const ch of ['one-1', 'one-2', 'one-3']) await c.subscribe(ch);
  await r.until((q) => q.length >= 3);
  t.same(r.requests.map((q) => q.body.events.length), [1, 1, 1]);
});

t.test('retry schedule: 429/500/502/503/504 and network errors retried after 1, 2, 4 × initial; then given up', async (t) => {
  const r = await startReceiver();
  const s = await serve(r, { retry: { initial_delay_ms: BASE, max_delay_ms: 60_000, max_retries: 3 } });
  const c = await RawClient.connect(s.url);
  t.teardown(async () => { await c.close(); await s.server.stop(); await r.close(); });
  const script = new Map<string, (number | 'reset')[]>([
    ['retry-ok', [503, 500, 429, 200]],
    ['retry-502-504', [502, 504, 200]],
    ['retry-net', ['reset', 200]],
    ['retry-fail', [503, 503, 503, 503, 503]],
  ]);
  r.respond = (q) => {
    const ch = q.body.events[0].channel as string;
    const plan = script.get(ch);
    const n = attemptsFor(r, ch).length - 1;
    return plan?.[Math.min(n, plan.length - 1)] ?? 200;
  };
  for (const ch of script.keys()) await c.subscribe(ch);
  // Positive end marks: a job counts as sent after its 2xx, as failed after its last
  // attempt; neither is ever attempted again, so the counts below are final then.
  const port = s.server.metricsPort!;
  await eventually(async () => (await metric(port, 'webhooks_sent_total', { app_id: APP.id })) === 3 &&
    (await metric(port, 'webhooks_failed_total', { app_id: APP.id })) === 1, 30_000, 'three delivered, one given up');
  const at = (ch: string) => attemptsFor(r, ch).map((q) => q.at);
  const gaps = (ch: string) => at(ch).slice(1).map((v, i) => v - at(ch)[i]);
  t.equal(attemptsFor(r, 'retry-ok').length, 4, '503, 500, 429: three retries, then delivered');
  gaps('retry-ok').forEach((g, i) => t.ok(g >= BASE * 2 ** i - 5, `retry ${i + 1} waited ${g} ms ≥ ${BASE * 2 ** i}`));
  t.equal(attemptsFor(r, 'retry-502-504').length, 3, '502, 504 retried');
  t.equal(attemptsFor(r, 'retry-net').length, 2, 'a reset connection is retried');
  t.equal(attemptsFor(r, 'retry-fail').length, 4, 'first attempt + 3 retries, then given up');
  gaps('retry-fail').forEach((g, i) => t.ok(g >= BASE * 2 ** i - 5, `retry ${i + 1} waited ${g} ms`));

  const line = s.logs.find((l) => Array.isArray(l.events) && l.msg === 'webhook not delivered: retries exhausted');
  t.ok(line, 'the final failure is logged');
  t.equal(line?.endpoint, r.url, 'with the endpoint');
  t.same(line?.events, ['channel_occupied'], 'and the event names');
  t.equal(line?.status, 503);
  t.equal(await metric(port, 'webhooks_failed_total', { app_id: APP.id, reason: 'status' }), 1, 'webhooks_failed_total');
  t.equal(await metric(port, 'webhook_retries_total', { app_id: APP.id }), 3 + 2 + 1 + 3, 'webhook_retries_total');
});

t.test('400, 401, 404 and other 4xx are not retried', async (t) => {
  const r = await startReceiver();
  const s = await serve(r, { retry: { initial_delay_ms: BASE, max_delay_ms: 60_000, max_retries: 3 } });
  const c = await RawClient.connect(s.url);
  t.teardown(async () => { await c.close(); await s.server.stop(); await r.close(); });
  const codes = [400, 401, 404, 410, 422];
  r.respond = (q) => {
    const m = /^no-retry-(\d+)$/.exec(q.body.events[0].channel as string);
    return m ? Number(m[1]) : 200;
  };
  for (const code of codes) await c.subscribe(`no-retry-${code}`);
  // a job counts as failed after its last attempt: the counts are final then
  await eventually(async () => (await metric(s.server.metricsPort!, 'webhooks_failed_total', { app_id: APP.id })) === codes.length, 10_000, 'each given up');
  for (const code of codes) t.equal(attemptsFor(r, `no-retry-${code}`).length, 1, `${code}: one attempt`);
  const lines = s.logs.filter((l) => l.msg === 'webhook not delivered: answer not retried');
  t.same(lines.map((l) => l.status).sort(), codes, 'each logged once, with its status');
  t.equal(await metric(s.server.metricsPort!, 'webhook_retries_total', { app_id: APP.id }), 0);
});

t.test('a receiver that does not answer in timeout_ms is retried', async (t) => {
  const r = await startReceiver();
  const s = await serve(r, { timeout_ms: 300, retry: { initial_delay_ms: BASE, max_delay_ms: 60_000, max_retries: 3 } });
  const c = await RawClient.connect(s.url);
  t.teardown(async () => { await c.close(); await s.server.stop(); await r.close(); });
  r.respond = (_q, i) => (i === 0 ? 'hang' : 200);
  await c.subscribe('slow');
  await r.until((q) => q.length >= 2, 10_000);
  // (the timeout runs from when the sender started the request, a little before it arrived here)
  t.ok(r.requests[1].at - r.requests[0].at >= BASE, 'the retry came after the timeout and the first wait');
  t.same(channelsOf(r, 1), ['slow'], 'the same event again');
  t.equal(await metric(s.server.metricsPort!, 'webhooks_sent_total', { app_id: APP.id }), 1);
});

t.test('sync queue: bounded, the overflow dropped and counted; what the grace period cannot send is dropped at stop', async (t) => {
  const r = await startReceiver();
  const s = await serve(r, { max_queue: 1, timeout_ms: 60_000 }, ['channel_occupied'], { shutdown_grace_period: 1000 });
  const c = await RawClient.connect(s.url);
  t.teardown(() => r.close());
  r.respond = () => 'hang';
  for (const ch of ['q-1', 'q-2', 'q-3']) await c.subscribe(ch);
  const port = s.server.metricsPort!;
  await eventually(async () => (await metric(port, 'webhooks_dropped_total', { app_id: APP.id, reason: 'queue_full' })) === 1, 10_000, 'one job dropped');
  t.equal(await metric(port, 'webhook_queue_size'), 2, 'one in flight, one waiting: the third was dropped');
  t.ok(s.logs.some((l) => l.msg === 'webhook dropped' && l.reason === 'queue_full'), 'the drop is logged');
  await c.close();
  await s.server.stop();
  const last = s.logs.find((l) => l.msg === 'webhooks still queued at the end of the shutdown grace period were dropped');
  t.same(last && { dropped: last.dropped, inflight: last.inflight }, { dropped: 1, inflight: 1 }, 'the stop gave up after the grace period, and said so');
});

t.test('sync queue: shared fairly between apps; one app\'s churn cannot drop another\'s webhooks', async (t) => {
  const r = await startReceiver();
  const OTHER = { id: 'other-app', key: 'other-key', secret: 'other-secret' };
  const config = loadConfig({
    env: {},
    overrides: {
      host: '127.0.0.1', port: 0, workers: WORKERS, log: { level: 'error' },
      metrics: { enabled: true, port: 0, host: '127.0.0.1' },
      webhooks: { concurrency: 1, max_queue: 4, timeout_ms: 60_000 },
      apps: [{ ...APP, webhooks: [{ url: r.url, event_types: ['channel_occupied'] }] },
        { ...OTHER, webhooks: [{ url: r.url, event_types: ['channel_occupied'] }] }],
    },
  });
  const logs: { msg: string; app?: string; suppressed?: number }[] = [];
  const stream = new Writable({ write(chunk: Buffer, _e, cb) { for (const l of chunk.toString().split('\n')) if (l) logs.push(JSON.parse(l)); cb(); } });
  const server = await start(config, pino({ level: 'warn' }, stream));
  t.teardown(async () => { await server.stop(); await r.close(); });
  const port = server.metricsPort!;
  const dropped = (app: string) => metric(port, 'webhooks_dropped_total', { app_id: app, reason: 'queue_full' });
  r.respond = () => 'hang';
  const noisy = await RawClient.connect(`ws://127.0.0.1:${server.port}/app/${APP.key}`);
  const quiet = await RawClient.connect(`ws://127.0.0.1:${server.port}/app/${OTHER.key}`);
  t.teardown(async () => { await noisy.close(); await quiet.close(); });
  // the noisy app fills the queue (one in flight, four waiting) and keeps churning
  for (let i = 0; i < 8; i++) await noisy.subscribe(`churn-${i}`);
  await eventually(async () => (await dropped(APP.id)) >= 1, 10_000, 'the noisy app\'s overflow dropped');
  await quiet.subscribe('quiet-1');
  await quiet.subscribe('quiet-2');
  for (let i = 8; i < 12; i++) await noisy.subscribe(`churn-${i}`);
  await eventually(async () => (await dropped(APP.id)) >= 8, 10_000, 'the noisy app\'s later jobs dropped');
  t.equal(await dropped(OTHER.id), 0, 'none of the quiet app\'s');
  const drops = logs.filter((l) => l.msg === 'webhook dropped' && l.app === APP.id);
  t.ok(drops.length >= 1 && drops.length < 8, `the noisy app's drops logged at most once a second (${drops.length} lines for ${await dropped(APP.id)} drops)`);
  t.equal(await metric(port, 'webhook_queue_size'), 5, 'still bounded: one in flight, four waiting');
  // the queue drains: the quiet app's two are sent among the first (the apps take turns)
  r.respond = () => 200;
  r.release(200);
  await r.until((q) => q.some((x) => x.body.events.some((e) => e.channel === 'quiet-2')), 20_000, 'the quiet app\'s webhooks');
  const order = r.requests.map((q) => q.body.events[0].channel);
  t.ok(order.indexOf('quiet-2') <= 4, `the quiet app's second webhook among the first sent: ${order.join(',')}`);
});

t.test('a graceful stop sends the queued requests (and their retries) before it resolves', async (t) => {
  const r = await startReceiver();
  const s = await serve(r, { timeout_ms: 300, retry: { initial_delay_ms: BASE, max_delay_ms: 60_000, max_retries: 3 } });
  const c = await RawClient.connect(s.url);
  t.teardown(() => r.close());
  r.respond = (_q, i) => (i === 0 ? 'hang' : 200);
  for (const ch of ['stop-1', 'stop-2', 'stop-3']) await c.subscribe(ch);
  await eventually(async () => (await metric(s.server.metricsPort!, 'webhook_queue_size')) === 3, 10_000, 'three jobs queued');
  await c.close();
  await s.server.stop();
  const ok = r.requests.slice(1).map((q) => q.body.events[0].channel).sort();
  t.same(ok, ['stop-1', 'stop-2', 'stop-3'], 'the timed-out one retried and the two waiting sent, all before stop() resolved');
});

t.test('a job waiting for its retry holds no slot: a failing endpoint does not hold up another', async (t) => {
  const bad = await startReceiver('/bad');
  const good = await startReceiver('/good');
  bad.respond = () => 503;
  const config = loadConfig({
    env: {},
    overrides: {
      host: '127.0.0.1', port: 0, workers: WORKERS, log: { level: 'error' },
      shutdown_grace_period: 500, // the stop need not wait for the 60 s retry
      webhooks: { concurrency: 1, retry: { initial_delay_ms: 60_000, max_delay_ms: 60_000, max_retries: 3 } },
      apps: [{ ...APP, webhooks: [{ url: bad.url, event_types: ['channel_occupied'] }, { url: good.url, event_types: ['channel_vacated'] }] }],
    },
  });
  const server = await start(config, pino({ level: 'silent' }));
  t.teardown(async () => { await server.stop(); await bad.close(); await good.close(); });
  const c = await RawClient.connect(`ws://127.0.0.1:${server.port}/app/${APP.key}`);
  await c.subscribe('hol');
  await bad.until((q) => q.length === 1, 10_000, 'the failing attempt');
  c.send({ event: 'pusher:unsubscribe', data: { channel: 'hol' } });
  await good.until((q) => q.length === 1, 10_000, 'the other endpoint, while the first waits 60 s to retry');
  t.same(good.events(), [{ name: 'channel_vacated', channel: 'hol' }]);
  t.equal(bad.requests.length, 1, 'the failing one is still waiting for its retry');
  await c.close();
});
