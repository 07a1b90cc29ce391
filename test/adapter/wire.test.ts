// adapter/wire.ts without a backend: a publish frame round-trips with and without the
// delta byte; the sender is read without decoding (isPublishFrom, publishSender) and
// only for publish frames; a frame of an unknown kind or delta byte is refused.
import t from 'tap';
import { decodeNode, encodeNodeMsg, encodeNodePublish, isPublishFrom, Kind, publishSender, WIRE_VERSION } from '../../src/adapter/wire';

const f = { app: 'app-id', channel: 'chan', except: '12.34', message: Buffer.from('{"event":"e","channel":"chan","data":"{}"}') };

t.test('publish frames round-trip; the sender is read without decoding', async (t) => {
  for (const delta of [undefined, true, false]) {
    const buf = encodeNodePublish('node-1', f, delta);
    const d = decodeNode(buf);
    t.equal(d.kind, Kind.Publish);
    if (d.kind !== Kind.Publish) continue;
    t.same([d.node, d.frame.app, d.frame.channel, d.frame.except, Buffer.from(d.frame.message).toString(), d.delta],
      ['node-1', 'app-id', 'chan', '12.34', f.message.toString(), delta], `delta ${String(delta)}`);
    t.ok(isPublishFrom(buf, 'node-1'));
    t.notOk(isPublishFrom(buf, 'node-2'), 'another id of the same length');
    t.notOk(isPublishFrom(buf, 'node-10'), 'a longer id with the same start');
    t.notOk(isPublishFrom(buf, 'node-'), 'a shorter one');
    t.equal(publishSender(buf), 'node-1');
  }
});

t.test('control frames: no sender read; unknown kinds and delta bytes are refused', async (t) => {
  const ctl = encodeNodeMsg({ t: 'hb', node: 'node-1', v: WIRE_VERSION });
  t.notOk(isPublishFrom(ctl, 'node-1'));
  t.equal(publishSender(ctl), null);
  t.match(decodeNode(ctl), { kind: Kind.Control, msg: { t: 'hb', node: 'node-1', v: WIRE_VERSION } });
  t.notOk(isPublishFrom(new Uint8Array([Kind.Publish, 6, 110]), 'node-1'), 'a truncated frame');
  t.throws(() => decodeNode(new Uint8Array([9, 0])), /unknown frame kind 9/);
  const bad = encodeNodePublish('n', f);
  bad[3] = 7; // the delta byte
  t.throws(() => decodeNode(bad), /unknown delta flag 7/);
});
