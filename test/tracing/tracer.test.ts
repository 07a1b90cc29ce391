// test-modes: once (one thread's tracer, no server)
// The tracer of a thread (src/tracing/tracer.ts) alone, against a local OTLP receiver: every
// sampler, a handler that throws or rejects (the span ends with an error status and the error
// goes on), spans made inside a recorded span, a 5xx answer.

import { randomBytes } from 'node:crypto';
import t from 'tap';
import { SAMPLERS } from '../../src/tracing/settings';
import { SpanKind, startTracing, stopTracing, tracing } from '../../src/tracing/tracer';
import { startOtlpReceiver } from '../helpers/otlp';

t.test('samplers, errors and children', async (t) => {
  const rx = await startOtlpReceiver();
  t.teardown(() => rx.close());
  const sampled = new Map<string, boolean>();
  for (const sampler of SAMPLERS) {
    const tr = startTracing({ url: rx.url, sampler, ratio: 1, serviceName: 'unit' }, 'test');
    t.equal(startTracing({ url: rx.url, sampler: 'always_off', ratio: 0, serviceName: 'x' }, 'test'), tr, 'one tracing per thread');
    t.equal(tracing(), tr);
    tr.serve('root', null, null, {}, (span) => sampled.set(sampler, span.isRecording()), () => 200);
    await stopTracing();
    t.equal(tracing(), null, 'stopped');
  }
  t.same(Object.fromEntries(sampled), {
    always_on: true, always_off: false, traceidratio: true, parentbased_always_on: true, parentbased_always_off: false, parentbased_traceidratio: true,
  });

  const tr = startTracing({ url: rx.url, sampler: 'parentbased_always_on', ratio: 1, serviceName: 'unit' }, 'test');
  const traceId = randomBytes(16).toString('hex');
  const tp = `00-${traceId}-${randomBytes(8).toString('hex')}-01`;
  t.throws(() => tr.serve('throws', tp, 'k=v', {}, () => { throw new Error('sync'); }, () => 200), /sync/, 'a synchronous throw goes on');
  await t.rejects(Promise.resolve(tr.serve('rejects', tp, null, {}, () => Promise.reject(new Error('async')), () => 200)), /async/);
  t.equal(tr.serve('answers 503', tp, null, {}, () => 503, (r) => r), 503);
  t.throws(() => tr.serve('around throws', tp, null, {}, () => tr.around('inner', SpanKind.CLIENT, {}, () => { throw new Error('inner'); }), () => 200), /inner/);
  await tr.serve('children', tp, null, {}, async () => {
    tr.step('a step', SpanKind.INTERNAL, null, {});
    t.match(tr.current(), new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`), 'current(): the active span');
    await tr.around('a child', SpanKind.INTERNAL, {}, async () => undefined, false);
  }, () => 200);
  tr.step('no parent', SpanKind.INTERNAL, null, {});
  t.equal(tr.current(), null, 'no active span: nothing to carry');
  await stopTracing();
  const spans = rx.spans.filter((s) => s.traceId === traceId);
  const names = spans.map((s) => s.name).sort();
  t.same(names, ['a child', 'a step', 'answers 503', 'around throws', 'children', 'inner', 'rejects', 'throws'].sort(), 'flushed at stop');
  t.notOk(rx.spans.some((s) => s.name === 'no parent'), 'a step without a recorded parent makes no span');
});
