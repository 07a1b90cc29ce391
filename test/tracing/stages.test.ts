// OpenTelemetry traces of the stages around a publish, against real parts: a redis-server
// (the cluster adapter and the history driver), a publish hook backend and a webhook
// receiver (test/helpers/hook-backend.ts), a local OTLP receiver. One batch publish with a
// traceparent goes to a history channel and a plain one: its hook call, the numbering of
// its history message and its hand-off to the other nodes are spans of the caller's trace,
// and the hook backend gets the hook span's traceparent. A webhook request is a span whose
// traceparent the receiver gets.

import http from 'node:http';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import Pusher from 'pusher';
import { APP, spreadClients, startServer } from '../helpers/server';
import { startHookBackend } from '../helpers/hook-backend';
import { RedisServer } from '../helpers/redis';
import { startOtlpReceiver } from '../helpers/otlp';

t.test('hook, history, adapter and webhook spans', async (t) => {
  const [rx, redis, hooks, webhooks] = await Promise.all([startOtlpReceiver(), RedisServer.start(), startHookBackend(), startHookBackend({ path: '/webhooks' })]);
  t.teardown(() => Promise.all([rx.close(), redis.stop(), hooks.close(), webhooks.close()]));
  const srv = await startServer({
    tracing: { enabled: true, endpoint: rx.url },
    adapter: { driver: 'redis' },
    database: { redis: { host: '127.0.0.1', port: redis.port } },
    history: { driver: 'redis' },
    apps: [{
      ...APP,
      channel_history: { 'room-*': { size: 10, ttl: 60 } } as never,
      hooks: { url: hooks.url, timeout_ms: 2000, on_failure: 'deny', publish: { enabled: true } } as never,
      webhooks: [{ url: webhooks.url, event_types: ['channel_occupied'] }],
    }],
  });
  t.teardown(() => srv.stop());

  const [c] = await spreadClients(srv, 1);
  await c.subscribe('room-1');
  await c.subscribe('plain');

  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  const agent = new http.Agent({ keepAlive: false });
  const add = (req: http.ClientRequest) => req.setHeader('traceparent', `00-${traceId}-${spanId}-01`);
  const base = agent as unknown as { addRequest(req: http.ClientRequest, o: unknown): void };
  const orig = base.addRequest.bind(agent);
  base.addRequest = (req, o) => { add(req); orig(req, o); };
  const sdk = new Pusher({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1', port: String(srv.port), useTLS: false, agent });
  await sdk.triggerBatch([{ channel: 'room-1', name: 'ev', data: '1' }, { channel: 'plain', name: 'ev', data: '2' }]);
  await c.event('ev', 'room-1', 5000);
  await c.event('ev', 'plain', 5000);

  const names = ['POST /apps/{app_id}/batch_events', 'ringcast.hook', 'ringcast.history.number', 'ringcast.adapter.publish'];
  const spans = await rx.waitFor(traceId, (s) => names.every((n) => s.some((x) => x.name === n)), names.join(', '));
  const publish = spans.find((s) => s.name === names[0])!;
  t.equal(publish.parentSpanId, spanId, 'the publish continues the caller\'s span');
  const hook = spans.find((s) => s.name === 'ringcast.hook')!;
  t.equal(hook.parentSpanId, publish.spanId, 'the hook call is the publish\'s child');
  t.equal(hook.attributes['ringcast.kind'], 'publish');
  t.equal(hook.attributes['ringcast.hook.allowed'], true);
  t.equal(hook.attributes['url.full'], hooks.url);
  const call = hooks.calls.find((x) => x.body.hook === 'publish');
  t.equal(call?.headers.traceparent, `00-${traceId}-${hook.spanId}-01`, 'the hook backend got the hook span\'s traceparent');
  t.equal(spans.find((s) => s.name === 'ringcast.history.number')!.parentSpanId, publish.spanId, 'numbering in Redis: the publish\'s child');
  const adapter = spans.find((s) => s.name === 'ringcast.adapter.publish')!;
  t.equal(adapter.parentSpanId, publish.spanId, 'the hand-off to the other nodes: the publish\'s child (on the primary)');
  t.equal(adapter.attributes['messaging.destination.name'], 'plain', 'history channels travel through Redis history, not the adapter');
  t.equal(adapter.attributes['ringcast.adapter.sent'], true);
  t.equal(adapter.resource['ringcast.thread'], 'primary');

  // channel_occupied of room-1 (or plain): a webhook request, its span's context in the request
  await webhooks.until((calls) => calls.length > 0, 10_000, 'a webhook');
  const tp = String(webhooks.calls[0].headers.traceparent ?? '');
  t.match(tp, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/, 'the webhook request carries a traceparent');
  const [, wTrace, wSpan] = tp.split('-');
  const [w] = await rx.waitFor(wTrace, (s) => s.some((x) => x.spanId === wSpan), 'the webhook span');
  t.equal(w.name, 'ringcast.webhook');
  t.equal(w.attributes['http.response.status_code'], 200);
  t.same(w.attributes['ringcast.webhook.events'], ['channel_occupied']);
});
