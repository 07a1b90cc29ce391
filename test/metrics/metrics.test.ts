// GET /metrics on the metrics listener (spec "GET /metrics"): every thread's registry
// aggregated by the primary, the configured prefix, process metrics, label decisions
// (route patterns for `path`, buckets for `event`), 404 elsewhere, no listener when off.
// Runs with RINGCAST_TEST_WORKERS=1 and =4 (connections spread over the shards).

import { EventEmitter } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import type { Worker } from 'node:worker_threads';
import pino from 'pino';
import { Registry } from 'prom-client';
import t from 'tap';
import WebSocket from 'ws';
import { PromMetrics } from '../../src/metrics/registry';
import { receivedLabel, sentLabel, sentLabelText } from '../../src/metrics/meters';
import { scrape as scrapeThreads, type MetricsReply, type MetricsRequest } from '../../src/metrics/server';
import type { PrimaryCommand, ShardEvent } from '../../src/shard/init';
import { APP, RawClient, WORKERS, eventually, startServer, type TestServer } from '../helpers/server';

interface Sample { name: string; labels: Record<string, string>; value: number }

// metrics/server.ts writes out the two messages of a scrape (it may not import shard/):
// this fails to compile when they drift from shard/init.ts's unions.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const scrapeMessagesMatchShard: [Same<MetricsRequest, Extract<PrimaryCommand, { type: 'metrics' }>>, Same<MetricsReply, Extract<ShardEvent, { type: 'metrics' }>>] = [true, true];
void scrapeMessagesMatchShard;

function get(port: number, path: string, method = 'GET'): Promise<{ status: number; text: string; type: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, text: Buffer.concat(chunks).toString('utf8'), type: String(res.headers['content-type']) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(5000, () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.end();
  });
}

function parse(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$/.exec(line);
    if (!m) throw new Error(`unparseable metrics line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

/** Sum of the series `name` whose labels include `labels` (undefined when there is none). */
function val(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  let found = false;
  let sum = 0;
  for (const s of samples) {
    if (s.name !== name) continue;
    if (!Object.entries(labels).every(([k, v]) => s.labels[k] === v)) continue;
    found = true;
    sum += s.value;
  }
  return found ? sum : undefined;
}

async function metrics(srv: TestServer): Promise<{ text: string; samples: Sample[] }> {
  const r = await get(srv.server.metricsPort!, '/metrics');
  if (r.status !== 200) throw new Error(`/metrics answered ${r.status}: ${r.text}`);
  return { text: r.text, samples: parse(r.text) };
}

function rawGet(port: number, path: string): Promise<number> {
  return get(port, path).then((r) => r.status);
}

const A = { app_id: APP.id };

t.test('aggregated metrics across shards', async (t) => {
  const srv = await startServer({ metrics: { enabled: true, port: 0, host: '127.0.0.1' }, delta_compression: { enabled: true } });
  t.teardown(() => srv.stop());
  t.type(srv.server.metricsPort, 'number');
  t.not(srv.server.metricsPort, srv.port);

  const N = 12;
  const clients: RawClient[] = [];
  for (let i = 0; i < N; i++) clients.push(srv.track(await RawClient.connect(srv.wsUrl())));
  const shardsUsed = new Set(clients.map((c) => c.socketId.split('.')[0])).size;
  if (WORKERS > 1) t.ok(shardsUsed > 1, `connections spread over ${shardsUsed} shards`);

  for (const c of clients) t.equal((await c.subscribe('my-channel')).event, 'pusher_internal:subscription_succeeded');
  for (const c of clients.slice(0, 2)) t.equal((await c.subscribeAuthed('private-ch')).event, 'pusher_internal:subscription_succeeded');
  t.equal((await clients[2].subscribeAuthed('presence-room', { user_id: 'u1' })).event, 'pusher_internal:subscription_succeeded');
  t.equal((await clients[3].subscribeAuthed('presence-room', { user_id: 'u2' })).event, 'pusher_internal:subscription_succeeded');
  await clients[2].event('pusher_internal:member_added', 'presence-room');
  // refused subscription (no auth)
  t.equal((await clients[4].subscribe('private-other')).event, 'pusher:subscription_error');
  // refused connection (unknown key)
  const bad = new RawClient(new WebSocket(srv.wsUrl('nope')));
  t.equal(await bad.closed(), 4001);

  // client event: private-ch has two subscribers, the sender does not get it back
  clients[0].send({ event: 'client-typing', channel: 'private-ch', data: { x: 1 } });
  await clients[1].event('client-typing', 'private-ch');

  // one API publish reaches all N subscribers of my-channel, on every shard
  await srv.sdk().trigger('my-channel', 'greet', { hello: 'world' });
  for (const c of clients) await c.event('greet', 'my-channel');
  const info = await srv.sdk().get({ path: '/channels/my-channel', params: { info: 'subscription_count' } });
  t.equal(info.status, 200);
  t.equal(await rawGet(srv.port, '/nope/at/all'), 404);
  t.equal(await rawGet(srv.port, `/apps/${APP.id}/channels`), 401);

  // owner-side gauges follow the (async) sub messages
  await eventually(async () => val((await metrics(srv)).samples, 'ringcast_channels_active', A) === 3, 5000, 'channels_active 3');
  const { text, samples } = await metrics(srv);
  const v = (name: string, labels: Record<string, string> = {}) => val(samples, 'ringcast_' + name, labels);

  t.equal(v('connections_active', A), N, 'connections_active sums the shards');
  t.equal(v('connections_total', A), N);
  t.equal(v('connection_errors_total', { app_id: '', reason: 'app_not_found' }), 1);
  t.equal(v('channels_active', A), 3);
  t.equal(v('channel_subscriptions_total', { ...A, channel_type: 'public' }), N);
  t.equal(v('channel_subscriptions_total', { ...A, channel_type: 'private' }), 2);
  t.equal(v('channel_subscriptions_total', { ...A, channel_type: 'presence' }), 2);
  t.equal(v('channel_subscription_errors_total', { ...A, reason: 'AuthError' }), 1);
  t.equal(v('presence_members', { ...A, channel: 'presence-room' }), 2);
  t.equal(v('presence_joins_total'), 2);

  t.equal(v('messages_sent_total', { ...A, event: 'api-event' }), N, 'one delivery per subscriber');
  t.equal(v('messages_sent_total', { ...A, event: 'client-event' }), 1, 'client event: not echoed to the sender');
  t.equal(v('messages_sent_total', { ...A, event: 'pusher_internal:member_added' }), 1);
  t.equal(v('messages_sent_total', { ...A, event: 'pusher:connection_established' }), N);
  t.equal(v('messages_sent_total', { ...A, event: 'pusher_internal:subscription_succeeded' }), N + 4);
  t.equal(v('messages_sent_total', { ...A, event: 'pusher:subscription_error' }), 1);
  t.equal(v('messages_received_total', { ...A, event: 'pusher:subscribe' }), N + 5);
  t.equal(v('messages_received_total', { ...A, event: 'client-event' }), 1);
  t.ok(v('message_bytes_received_total')! > 0);
  t.ok(v('message_bytes_sent_total')! > 0);

  t.equal(v('http_requests_total', { method: 'POST', path: '/apps/:appId/events', status: '200' }), 1);
  t.equal(v('http_requests_total', { method: 'GET', path: '/apps/:appId/channels/:channel', status: '200' }), 1);
  t.equal(v('http_requests_total', { method: 'GET', path: '/apps/:appId/channels', status: '401' }), 1);
  t.equal(v('http_requests_total', { method: 'GET', path: '/*', status: '404' }), 1);
  t.notOk(samples.some((s) => s.labels.path !== undefined && s.labels.path.includes(APP.id)), 'path labels are route patterns');
  t.equal(v('http_request_duration_seconds_count', { path: '/apps/:appId/events' }), 1);
  t.match(text, /# TYPE ringcast_http_request_duration_seconds histogram/);
  t.equal(v('http_errors_total'), 0);
  t.equal(v('bus_spill_bytes'), 0);
  t.type(v('websocket_buffer_usage'), 'number');
  t.equal(v('shard_restarts_total'), 0);

  t.ok(v('process_cpu_seconds_total')! > 0, 'process metrics of the primary');
  t.ok(v('process_resident_memory_bytes')! > 0);
  const names = new Set(samples.map((s) => s.name));
  t.same([...names].filter((n) => !n.startsWith('ringcast_')), [], 'every metric has the prefix');
  t.equal(text.match(/^# TYPE ringcast_connections_active /gm)?.length, 1, 'one family per metric after aggregation');

  // closing connections: the gauges go down on every shard; presence leaves counted
  for (const c of clients.splice(0, 4)) await c.close();
  await eventually(async () => {
    const s = (await metrics(srv)).samples;
    return val(s, 'ringcast_connections_active', A) === N - 4 && val(s, 'ringcast_channels_active', A) === 1;
  }, 5000, 'gauges after close');
  const after = (await metrics(srv)).samples;
  t.equal(val(after, 'ringcast_presence_leaves_total'), 2);
  t.equal(val(after, 'ringcast_presence_members', { ...A, channel: 'presence-room' }), undefined, 'series of a vacated presence channel removed');
  t.equal(val(after, 'ringcast_connections_total', A), N, 'counters keep their value');

  // other paths and methods of the metrics listener
  t.equal((await get(srv.server.metricsPort!, '/')).status, 404);
  t.equal((await get(srv.server.metricsPort!, '/metricsx')).status, 404);
  t.equal((await get(srv.server.metricsPort!, '/metrics', 'POST')).status, 405);
  const withQuery = await get(srv.server.metricsPort!, '/metrics?x=1');
  t.equal(withQuery.status, 200);
  t.match(withQuery.type, /^text\/plain; version=0\.0\.4/);
});

t.test('configurable prefix', async (t) => {
  const srv = await startServer({ metrics: { enabled: true, port: 0, host: '127.0.0.1', prefix: 'rc_test_' } });
  t.teardown(() => srv.stop());
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  t.ok(c.socketId);
  const { samples } = await metrics(srv);
  t.equal(val(samples, 'rc_test_connections_active', A), 1);
  t.ok(val(samples, 'rc_test_process_resident_memory_bytes')! > 0);
  t.same(samples.filter((s) => !s.name.startsWith('rc_test_')).map((s) => s.name), []);
});

t.test('metrics disabled: no listener', async (t) => {
  const port = await new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
  const srv = await startServer({ metrics: { enabled: false, port, host: '127.0.0.1' } });
  t.teardown(() => srv.stop());
  t.equal(srv.server.metricsPort, null);
  const err = await get(port, '/metrics').then(() => null, (e: NodeJS.ErrnoException) => e);
  t.equal(err?.code, 'ECONNREFUSED');
});

t.test('a shard that does not answer is skipped', async (t) => {
  const lines: string[] = [];
  const log = pino({ level: 'warn' }, { write: (s: string) => { lines.push(s); } });
  const shardSink = new PromMetrics('x_');
  shardSink.inc('connections_total', { app_id: 'a' }, 2);
  const answering = new EventEmitter() as EventEmitter & { postMessage(m: { type: string; req: number }): void };
  answering.postMessage = (m) => {
    void shardSink.json().then((metrics) => answering.emit('message', { type: 'metrics', req: m.req, metrics }));
  };
  const silent = new EventEmitter() as EventEmitter & { postMessage(): void };
  silent.postMessage = () => {};
  const primary = new PromMetrics('x_');
  primary.inc('connections_total', { app_id: 'a' }, 1);
  const started = Date.now();
  const text = await scrapeThreads({
    host: '127.0.0.1', port: 0, prefix: 'x_', log, primary,
    shards: () => [answering, silent] as unknown as Worker[], shardTimeoutMs: 200,
  }, new Registry());
  t.ok(Date.now() - started < 2000);
  t.equal(val(parse(text), 'x_connections_total', { app_id: 'a' }), 3, 'primary + the shard that answered');
  t.equal(silent.listenerCount('message'), 0, 'listener removed after the timeout');
  t.equal(answering.listenerCount('message'), 0);
  t.match(lines.join(''), /"shard":1.*did not answer/);
});

t.test('event labels stay bounded', async (t) => {
  t.equal(receivedLabel('pusher:subscribe'), 'pusher:subscribe');
  t.equal(receivedLabel('client-anything'), 'client-event');
  t.equal(receivedLabel('pusher:made-up'), 'other');
  t.equal(receivedLabel('whatever'), 'other');
  const b = (s: string) => Buffer.from(s);
  t.equal(sentLabel(b('{"event":"client-x","channel":"c","data":1}')), 'client-event');
  t.equal(sentLabel(b('{"event":"pusher_internal:member_added","channel":"c","data":"{}"}')), 'pusher_internal:member_added');
  t.equal(sentLabel(b('{"event":"proto_internal:member_removed","channel":"c","data":"{}"}')), 'pusher_internal:member_removed');
  t.equal(sentLabel(b('{"event":"pusher_internal:member_addedX","channel":"c"}')), 'api-event');
  t.equal(sentLabel(b('{"event":"price","channel":"c","data":"1"}')), 'api-event');
  t.equal(sentLabel(b('garbage')), 'api-event');
  // the string form (delta/deliver.ts's frames) labels alike
  for (const m of ['{"event":"client-x","channel":"c","data":1}', '{"event":"proto_internal:member_removed","channel":"c"}',
    '{"event":"pusher:delta","channel":"c","data":"{}"}', '{"event":"pusher_internal:member_addedX"}', '{"event":"price","data":"1","__delta_seq":3}', 'garbage', '']) {
    t.equal(sentLabelText(m), sentLabel(b(m)), `sentLabelText(${m})`);
  }
  t.equal(sentLabelText('{"event":"pusher:delta","channel":"c","data":"{}"}'), 'pusher:delta');
});
