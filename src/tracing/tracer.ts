// OpenTelemetry traces of one thread. Every thread that makes spans (each shard, the
// primary) starts its own TracerProvider with a batch processor and an OTLP/HTTP (JSON)
// exporter, and flushes it when the thread stops (stopTracing): no span crosses a thread
// except as a trace context, which a publish frame carries to the shards that deliver it
// (bus/messages.ts) only while tracing is on.
//
// Off (the default) nothing here is loaded into the hot paths' way: `tracing()` is null and
// every caller tests that once. On, spans are children of the active context
// (AsyncLocalStorage, so a span stays the parent across awaits); a request's W3C
// `traceparent` header continues its caller's trace.
//
// Span names and attributes (docs/observability.md lists them):
//   POST /apps/{app_id}/events, POST /apps/{app_id}/batch_events   (server)
//   ringcast.deliver        a shard handing a publish to its subscribers: ringcast.delivered
//   ringcast.hook           a backend hook call                          (client)
//   ringcast.webhook        a webhook request                            (client)
//   ringcast.history.number a history channel's messages numbered in Redis
//   ringcast.adapter.publish a publish sent to the other nodes

import { context, INVALID_SPAN_CONTEXT, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, TraceFlags, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider, type Sampler,
} from '@opentelemetry/sdk-trace';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import type { TracingSettings } from './settings';

export { SpanKind, SpanStatusCode, type Attributes, type Span };

/** The attribute names ringcast sets (besides the semantic conventions'). */
export const Attr = {
  AppId: 'ringcast.app_id',
  Channel: 'messaging.destination.name',
  Channels: 'ringcast.channels',
  Messages: 'ringcast.messages',
  Delivered: 'ringcast.delivered',
  Thread: 'ringcast.thread',
  Kind: 'ringcast.kind',
  Url: 'url.full',
  Status: 'http.response.status_code',
  Method: 'http.request.method',
  Route: 'http.route',
} as const;

export interface Tracing {
  readonly tracer: Tracer;
  /** A server span continuing `traceparent` (when valid), `fn` run with it active; ended when `fn`'s result settles. */
  serve<T>(name: string, traceparent: string | null, tracestate: string | null, attrs: Attributes, fn: (span: Span) => T | Promise<T>, status: (r: T) => number): T | Promise<T>;
  /**
   * A span around `fn` (a call out, a stage), child of the active context; ended when it
   * settles. `root` false: only as a child of a recorded span (a stage of a publish), else
   * `fn` runs with a span that records nothing.
   */
  around<T>(name: string, kind: SpanKind, attrs: Attributes, fn: (span: Span) => Promise<T>, root?: boolean): Promise<T>;
  /** The active sampled span's context as a `traceparent`, or null (nothing to carry). */
  current(): string | null;
  /** A publish handed to `delivered` local subscribers, child of `traceparent` (another thread's) or of the active span; nothing when neither is sampled. */
  delivered(app: string, channel: string, delivered: number, traceparent: string | null | undefined): void;
  /** A short step (ended at once), child of `traceparent` (another thread's) or of the active span; nothing when neither is sampled. */
  step(name: string, kind: SpanKind, traceparent: string | null | undefined, attrs: Attributes): void;
  /** Exports what is left; resolves when done (or timed out). */
  shutdown(): Promise<void>;
}

let active: Tracing | null = null;
/** The span of a stage whose publish is not recorded. */
const NOT_RECORDED: Span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/** This thread's tracing, or null: off. */
export function tracing(): Tracing | null {
  return active;
}

function samplerOf(s: TracingSettings): Sampler {
  switch (s.sampler) {
    case 'always_on': return new AlwaysOnSampler();
    case 'always_off': return new AlwaysOffSampler();
    case 'traceidratio': return new TraceIdRatioBasedSampler(s.ratio);
    case 'parentbased_always_on': return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off': return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio': return new ParentBasedSampler({ root: s.ratio >= 1 ? new AlwaysOnSampler() : new TraceIdRatioBasedSampler(s.ratio) });
  }
}

const propagator = new W3CTraceContextPropagator();
const getter = {
  keys: (c: Record<string, string>) => Object.keys(c),
  get: (c: Record<string, string>, k: string) => c[k],
};
const setter = { set: (c: Record<string, string>, k: string, v: string) => { c[k] = v; } };

/** The context of a remote parent given as a `traceparent` (and `tracestate`), or the root one when it is not valid. */
function remote(traceparent: string | null, tracestate: string | null): Context {
  if (traceparent === null) return ROOT_CONTEXT;
  const carrier: Record<string, string> = { traceparent };
  if (tracestate !== null) carrier.tracestate = tracestate;
  return propagator.extract(ROOT_CONTEXT, carrier, getter);
}

function settle<T>(span: Span, r: T | Promise<T>, status: ((r: T) => number) | null): T | Promise<T> {
  const done = (v: T): T => {
    if (status !== null) {
      const code = status(v);
      span.setAttribute(Attr.Status, code);
      if (code >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
    return v;
  };
  if (!(r instanceof Promise)) return done(r);
  return r.then(done, (err: unknown) => {
    span.recordException(err instanceof Error ? err : String(err));
    span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
    throw err;
  });
}

/** Starts this thread's tracing (once; later calls return the first). `thread`: "primary", "shard-0", … */
export function startTracing(s: TracingSettings, thread: string): Tracing {
  if (active !== null) return active;
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const provider = new TracerProvider({
    sampler: samplerOf(s),
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: s.serviceName, [Attr.Thread]: thread }),
    spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: s.url }), scheduledDelayMillis: 1000 })],
  });
  const tracer = provider.getTracer('ringcast');
  /** What the sampler decides without asking it: a new trace (no traceparent) or every trace is never recorded. */
  const neverRoot = s.sampler === 'always_off' || s.sampler === 'parentbased_always_off' || (s.sampler.endsWith('traceidratio') && s.ratio === 0);
  const never = s.sampler === 'always_off' || (s.sampler === 'traceidratio' && s.ratio === 0);

  const t: Tracing = {
    tracer,
    serve(name, traceparent, tracestate, attrs, fn, status) {
      // a request that would not be recorded costs no span at all
      if (never || (neverRoot && traceparent === null)) return fn(NOT_RECORDED);
      const parent = remote(traceparent, tracestate);
      const span = tracer.startSpan(name, { kind: SpanKind.SERVER, attributes: attrs }, parent);
      // not sampled: nothing below it is recorded either, so no context to carry
      if (!span.isRecording()) return fn(span);
      const ctx = trace.setSpan(parent, span);
      let r: ReturnType<typeof fn>;
      try {
        r = context.with(ctx, fn, undefined, span);
      } catch (err) {
        span.recordException(err instanceof Error ? err : String(err));
        span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
        throw err;
      }
      return settle(span, r, status);
    },
    around(name, kind, attrs, fn, root = true) {
      if (!root && trace.getActiveSpan()?.isRecording() !== true) return fn(NOT_RECORDED);
      const span = tracer.startSpan(name, { kind, attributes: attrs });
      let r: Promise<unknown>;
      try {
        r = context.with(trace.setSpan(context.active(), span), fn, undefined, span);
      } catch (err) {
        span.recordException(err instanceof Error ? err : String(err));
        span.end();
        throw err;
      }
      return settle(span, r, null) as Promise<never>;
    },
    current() {
      const span = trace.getActiveSpan();
      if (span === undefined || (span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return null;
      const carrier: Record<string, string> = {};
      propagator.inject(context.active(), carrier, setter);
      return carrier.traceparent ?? null;
    },
    delivered(app, channel, delivered, traceparent) {
      t.step('ringcast.deliver', SpanKind.CONSUMER, traceparent, { [Attr.AppId]: app, [Attr.Channel]: channel, [Attr.Delivered]: delivered, [Attr.Thread]: thread });
    },
    step(name, kind, traceparent, attrs) {
      let parent: Context;
      if (traceparent) parent = remote(traceparent, null);
      else {
        const span = trace.getActiveSpan();
        if (span === undefined || (span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
        parent = context.active();
      }
      tracer.startSpan(name, { kind, attributes: attrs }, parent).end();
    },
    async shutdown() {
      if (active === t) active = null;
      await provider.shutdown().catch(() => undefined);
      context.disable(); // the context manager goes with it (a later start registers its own)
    },
  };
  active = t;
  return t;
}

/** Flushes and stops this thread's tracing (nothing when it is off). */
export async function stopTracing(): Promise<void> {
  await active?.shutdown();
}
