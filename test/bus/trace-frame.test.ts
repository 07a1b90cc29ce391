// test-modes: once (the frame codec alone, no threads)
// The publish frame's trace section (bus/messages.ts): present only when a trace context is
// given (tracing on), read back with the rest of the frame unchanged; absent, the frame is
// byte for byte the untraced one.

import t from 'tap';
import { decodePublish, encodePublish, TAGS_ALL } from '../../src/bus/messages';

const msg = Buffer.from('{"event":"e","channel":"c","data":"d"}');
const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

t.test('a traceparent travels with the frame', async (t) => {
  for (const tags of [null, '{"a":"1"}', TAGS_ALL] as const) {
    const f = decodePublish(encodePublish('app', 'chan', '123.456', msg, tags, tp));
    t.equal(f.trace, tp);
    t.equal(f.except, '123.456');
    t.equal(f.tags, tags);
    t.same(Buffer.from(f.message), msg);
  }
});

t.test('without one, the frame is the untraced frame', async (t) => {
  t.same(encodePublish('app', 'chan', '', msg, null, null), encodePublish('app', 'chan', '', msg));
  t.equal(decodePublish(encodePublish('app', 'chan', '', msg)).trace, undefined);
});

t.test('bounds', async (t) => {
  t.throws(() => encodePublish('app', 'chan', 'x'.repeat(128), msg), /publish header field too long/, 'a socket_id is at most 64 bytes: 128 would set the trace flag');
  t.throws(() => encodePublish('app', 'chan', '', msg, null, 'x'.repeat(256)), /publish trace context too long/);
});
