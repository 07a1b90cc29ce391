// OpenTelemetry traces end to end: a local OTLP/HTTP receiver (test/helpers/otlp.ts), the
// `pusher` SDK publishing with a W3C traceparent (an http.Agent that adds it to each
// request, as an instrumented application's HTTP client does), raw ws and pusher-js
// subscribers spread over the shards. The spans must arrive with the caller's trace id,
// the publish span as the child of the caller's span, and one delivery span per shard that
// delivered, child of the publish span, whose delivered counts add up to the subscribers.

import http from 'node:http';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import Pusher from 'pusher';
import { APP, WORKERS, spreadClients, startServer, type TestServer } from '../helpers/server';
import { connected, pusherJs, subscribed } from '../helpers/pusher-js';
import { startOtlpReceiver, type ReceivedSpan } from '../helpers/otlp';

/** An agent that sets `traceparent` on each request it sends (when set). */
class TracingAgent extends http.Agent {
  traceparent: string | null = null;
  addRequest(req: http.ClientRequest, opts: http.RequestOptions): void {
    if (this.traceparent !== null) req.setHeader('traceparent', this.traceparent);
    // @ts-expect-error addRequest is Node's internal hook (what HTTP instrumentations use), not in @types/node
    super.addRequest(req, opts);
  }
}

function sdkWith(srv: TestServer, agent: http.Agent): Pusher {
  return new Pusher({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1', port: String(srv.port), useTLS: false, agent });
}

/** A caller's span: trace id, span id and the traceparent that names it (sampled). */
function callerSpan(): { traceId: string; spanId: string; traceparent: string } {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

const SERVER = 2; // SpanKind.SERVER in OTLP
const CONSUMER = 5;
const delivered = (spans: ReceivedSpan[]) => spans.filter((s) => s.name === 'ringcast.deliver').reduce((n, s) => n + (s.attributes['ringcast.delivered'] as number), 0);

t.test('tracing on from the tracing keys, sample_ratio 0: only requests with a sampled traceparent are traced', async (t) => {
  const rx = await startOtlpReceiver();
  t.teardown(() => rx.close());
  const srv = await startServer({ tracing: { enabled: true, endpoint: rx.url, sample_ratio: 0, service_name: 'ringcast-under-test' } });
  t.teardown(() => srv.stop());
  const agent = new TracingAgent({ keepAlive: false });
  const sdk = sdkWith(srv, agent);

  const raws = await spreadClients(srv, Math.max(3, 2 * WORKERS));
  for (const c of raws) await c.subscribe('traced');
  const pj = srv.track(pusherJs(srv.port));
  await connected(pj);
  const pjChannel = await subscribed(pj, 'traced');
  const subscribers = raws.length + 1;

  t.test('a publish with a traceparent: its span continues the trace, every shard\'s delivery is its child', async (t) => {
    // first, one without a traceparent: sample_ratio 0 records nothing of it
    agent.traceparent = null;
    await sdk.trigger('traced', 'untraced', { n: 0 });
    const caller = callerSpan();
    agent.traceparent = caller.traceparent;
    const got = new Promise<unknown>((resolve) => pjChannel.bind('ev', resolve));
    await sdk.trigger('traced', 'ev', { n: 1 });
    await Promise.all([got, ...raws.map((c) => c.event('ev', 'traced', 5000))]);

    const spans = await rx.waitFor(caller.traceId, (s) => delivered(s) >= subscribers, `delivery spans counting ${subscribers} subscribers`);
    const server = spans.filter((s) => s.name === 'POST /apps/{app_id}/events');
    t.equal(server.length, 1, 'one publish span');
    t.equal(server[0].parentSpanId, caller.spanId, 'child of the caller\'s span');
    t.equal(server[0].kind, SERVER);
    t.equal(server[0].attributes['ringcast.app_id'], APP.id);
    t.equal(server[0].attributes['http.route'], '/apps/:appId/events');
    t.equal(server[0].attributes['http.response.status_code'], 200);
    t.equal(server[0].resource['service.name'], 'ringcast-under-test', 'tracing.service_name');
    const deliveries = spans.filter((s) => s.name === 'ringcast.deliver');
    t.equal(delivered(spans), subscribers, 'delivered counts add up to the subscribers');
    for (const d of deliveries) {
      t.equal(d.parentSpanId, server[0].spanId, 'a delivery is the publish span\'s child');
      t.equal(d.kind, CONSUMER);
      t.equal(d.attributes['messaging.destination.name'], 'traced');
      t.equal(d.attributes['ringcast.app_id'], APP.id);
    }
    const threads = new Set(deliveries.map((d) => d.attributes['ringcast.thread']));
    if (WORKERS > 1) t.ok(threads.size >= 2, `deliveries on ${threads.size} shards (the trace context crossed the bus)`);
    t.same(new Set(rx.spans.map((s) => s.traceId)), new Set([caller.traceId]), 'nothing recorded of the untraced publish (sample_ratio 0)');
    t.equal(rx.bad, 0, 'every export was OTLP JSON');
  });

  t.test('a batch: one span, deliveries per channel', async (t) => {
    for (const c of raws) await c.subscribe('traced-2');
    const caller = callerSpan();
    agent.traceparent = caller.traceparent;
    await sdk.triggerBatch([{ channel: 'traced', name: 'b', data: '1' }, { channel: 'traced-2', name: 'b', data: '2' }]);
    await Promise.all(raws.map((c) => c.event('b', 'traced-2', 5000)));
    const spans = await rx.waitFor(caller.traceId, (s) => delivered(s) >= 2 * raws.length + 1, 'the batch\'s deliveries');
    const server = spans.find((s) => s.name === 'POST /apps/{app_id}/batch_events');
    t.ok(server, 'the batch span');
    t.equal(server?.parentSpanId, caller.spanId);
    const per = (ch: string) => delivered(spans.filter((s) => s.attributes['messaging.destination.name'] === ch));
    t.equal(per('traced'), raws.length + 1);
    t.equal(per('traced-2'), raws.length);
  });

  t.test('a refused publish: the span says 4xx', async (t) => {
    const caller = callerSpan();
    agent.traceparent = caller.traceparent;
    await t.rejects(sdk.trigger('traced', 'client-nope', {}), /400/);
    const [s] = await rx.waitFor(caller.traceId, (x) => x.length >= 1, 'the refused publish\'s span');
    t.equal(s.attributes['http.response.status_code'], 400);
  });
});

t.test('the OTEL_* variables alone turn it on; stop() exports what is still queued', async (t) => {
  const rx = await startOtlpReceiver();
  t.teardown(() => rx.close());
  const env = { OTEL_EXPORTER_OTLP_ENDPOINT: rx.base, OTEL_SERVICE_NAME: 'from-env', OTEL_TRACES_SAMPLER: 'always_on' };
  Object.assign(process.env, env);
  t.teardown(() => { for (const k of Object.keys(env)) delete process.env[k]; });
  const srv = await startServer({});
  let stopped = false;
  t.teardown(() => (stopped ? undefined : srv.stop()));
  const raws = await spreadClients(srv, Math.max(2, WORKERS));
  for (const c of raws) await c.subscribe('env');
  const caller = callerSpan();
  const agent = new TracingAgent({ keepAlive: false });
  // a traceparent that is not W3C's form: ignored, the publish starts a trace of its own
  agent.traceparent = '00-not-a-trace-01';
  await sdkWith(srv, agent).trigger('env', 'first', {});
  agent.traceparent = caller.traceparent;
  await sdkWith(srv, agent).trigger('env', 'ev', {});
  await Promise.all(raws.map((c) => c.event('ev', 'env', 5000)));
  // stop at once: the batch processors (1 s delay) still hold the spans
  await srv.stop();
  stopped = true;
  const spans = rx.spans.filter((s) => s.traceId === caller.traceId);
  t.equal(delivered(spans), raws.length, 'every delivery span was exported before the threads ended');
  t.ok(spans.some((s) => s.name === 'POST /apps/{app_id}/events' && s.resource['service.name'] === 'from-env'), 'OTEL_SERVICE_NAME');
  const roots = rx.spans.filter((s) => s.name === 'POST /apps/{app_id}/events' && s.traceId !== caller.traceId);
  t.equal(roots.length, 1, 'the publish with a malformed traceparent was traced');
  t.equal(roots[0]?.parentSpanId, '', 'as a new trace (always_on)');
});
