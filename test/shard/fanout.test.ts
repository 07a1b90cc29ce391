import t from 'tap';
import type { TemplatedApp } from 'uWebSockets.js';
import { Bus } from '../../src/bus/bus';
import type { PublishFrame } from '../../src/bus/messages';
import { createTopology } from '../../src/bus/topology';
import { createDoorbell } from '../../src/bus/doorbell';
import { createRingBuffer } from '../../src/bus/ring';
import { Fanout } from '../../src/shard/fanout';
import { eventually } from '../helpers/server';

// Fanout.broadcast encodes a frame into one reused buffer; the bus must copy what it
// keeps past the call, and a broadcast made during another's delivery must not write
// over the bytes being delivered.

/** A one-shard bus (thread 0; thread 1 would be the primary) that records what it delivers. */
function oneShard(onPublish: (f: PublishFrame, fanout: Fanout) => void) {
  const bus = new Bus(0, createTopology(2, 64 * 1024, 1024 * 1024, createRingBuffer, createDoorbell));
  const fanout = new Fanout(bus, {} as TemplatedApp, new Map());
  bus.start({
    onPublish: (f) => onPublish(f, fanout),
    onControl: () => undefined,
    onError: (err) => { throw err; },
  });
  return { bus, fanout };
}

t.test('frames held back by the bus keep their own bytes', async (t) => {
  const seen: string[] = [];
  const { bus, fanout } = oneShard((f) => seen.push(Buffer.from(f.message).toString()));
  t.teardown(() => bus.stop());
  bus.pauseDraining(50); // every local publish is now held until the pause ends
  const frames = ['{"event":"a","data":"first"}', '{"event":"b","data":"é second, longer"}', '{"event":"c","data":"3"}'];
  for (const m of frames) fanout.broadcast('app', 'ch', '', m);
  t.same(seen, [], 'nothing delivered while paused');
  // the pause ends after 50 ms; polled, as a busy machine may run the timers late
  await eventually(() => seen.length >= frames.length, 5000, 'the held frames to be delivered');
  t.same(seen, frames, 'each held frame delivered as it was published');
});

t.test('a broadcast during a delivery does not overwrite the frame being delivered', async (t) => {
  const seen: string[] = [];
  let nested = false;
  const { bus, fanout } = oneShard((f, fanout) => {
    const before = Buffer.from(f.message).toString();
    if (!nested) {
      nested = true;
      fanout.broadcast('app', 'other', '', '{"event":"nested","data":"' + 'x'.repeat(40) + '"}');
    }
    seen.push(before + ' | ' + Buffer.from(f.message).toString());
  });
  t.teardown(() => bus.stop());
  fanout.broadcast('app', 'ch', '', '{"event":"outer","data":"y"}');
  t.equal(seen.length, 2);
  t.equal(seen[1], '{"event":"outer","data":"y"} | {"event":"outer","data":"y"}', 'outer frame unchanged after the nested broadcast');
});

t.test('frames of every size are encoded whole', async (t) => {
  const seen: string[] = [];
  const { bus, fanout } = oneShard((f) => seen.push(Buffer.from(f.message).toString()));
  t.teardown(() => bus.stop());
  const sizes = [0, 1, 1000, 16 * 1024, 100 * 1024, 2 * 1024 * 1024];
  const frames = sizes.map((n, i) => `{"event":"e${i}","data":"${'ü'.repeat(n >> 1)}"}`);
  for (const m of frames) fanout.broadcast('app', 'ch', '', m);
  t.equal(seen.length, frames.length);
  for (let i = 0; i < frames.length; i++) t.ok(seen[i] === frames[i], `${Buffer.byteLength(frames[i])} bytes`);
});
