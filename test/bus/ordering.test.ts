// Causal order across rings (src/bus/ordering.ts), without threads: a FrameSource fed by
// hand (what each ring holds at each collect, the writers' spill marks) and a fake clock.
import t from 'tap';
import { CausalOrder, FrameSource, Next, SPILL_WAIT_MAX_MS, StampClock, Stamped, stampDiff, stampOf } from '../../src/bus/ordering';

const frame = (stamp: number, from: number, type = 1): Stamped => ({ stamp: stamp | 0, from, type, payload: null, local: null });

/** Per peer, the frames its ring shows; `between` runs after the first collect of a drain (a write racing the reader). */
class Source implements FrameSource {
  readonly rings: Stamped[][];
  readonly marks: (number | null)[];
  collects = 0;
  between: (() => void) | null = null;
  constructor(readonly peers: number) {
    this.rings = Array.from({ length: peers }, () => []);
    this.marks = Array.from({ length: peers }, () => null);
  }
  write(from: number, ...stamps: number[]): void {
    for (const s of stamps) this.rings[from].push(frame(s, from));
  }
  collect(into: Stamped[]): void {
    this.collects++;
    for (const ring of this.rings) into.push(...ring.splice(0));
    const b = this.between;
    this.between = null;
    b?.();
  }
  spillMark(peer: number): number | null {
    return this.marks[peer];
  }
}

function setup(peers = 3) {
  const src = new Source(peers);
  let now = 10_000;
  const order = new CausalOrder(src, () => now);
  const got: number[] = [];
  let answerAt: number | null = null;
  const deliver = (f: Stamped): boolean => { got.push(f.stamp); return f.stamp === answerAt; };
  return {
    src, order, got, deliver,
    drain: () => order.drain(deliver),
    answer: (stamp: number) => { answerAt = stamp; },
    advance: (ms: number) => { now += ms; },
  };
}

t.test('frames from several rings are delivered in stamp order, each ring FIFO', async (t) => {
  const s = setup();
  s.src.write(0, 2, 5, 9);
  s.src.write(1, 1, 7);
  s.src.write(2, 3, 4);
  t.equal(s.drain(), Next.Idle, 'nothing held: wait for the doorbell');
  t.same(s.got, [1, 2, 3, 4, 5, 7, 9]);
  t.equal(s.drain(), Next.Idle, 'an empty drain');
  t.equal(s.got.length, 7);
});

t.test('horizon: a causal predecessor seen only by the second collect comes first; later frames are held', async (t) => {
  const s = setup();
  s.src.write(1, 10);
  // ring 0 was read before it held 8 (stamped and written before 10 was stamped), and
  // a frame stamped 12 lands between the two collects too
  s.src.between = () => s.src.write(0, 8, 12);
  t.equal(s.drain(), Next.Again, 'a frame past the horizon is held: drain again');
  t.same(s.got, [8, 10], '8 before 10; 12 is past the horizon (10)');
  t.equal(s.order.heldCount, 1);
  s.src.write(2, 11);
  t.equal(s.drain(), Next.Idle);
  t.same(s.got, [8, 10, 11, 12], 'held frames join the next batch, sorted with the new ones');
});

t.test('a local publish joins the batch by its stamp', async (t) => {
  const s = setup();
  s.src.write(1, 3, 6);
  const local: Stamped = { stamp: 5, from: 0, type: 1, payload: null, local: { app: 'a', channel: 'c', except: '', message: new Uint8Array(1) } };
  t.equal(s.order.drain(s.deliver, local), Next.Idle);
  t.same(s.got, [3, 5, 6]);
});

t.test('spill marks: nothing stamped after a spilled frame is delivered before it', async (t) => {
  const s = setup();
  s.src.write(0, 5, 7);
  s.src.marks[1] = 6; // peer 1's frame 6 waits in its spill queue
  t.equal(s.drain(), Next.WaitSpill, 'wait for the spilled frame (the writer rings when it moves)');
  t.same(s.got, [5]);
  s.src.write(1, 6);
  s.src.marks[1] = null;
  t.equal(s.drain(), Next.Idle);
  t.same(s.got, [5, 6, 7]);

  const u = setup();
  u.src.write(0, 5, 7);
  u.src.marks[1] = 9; // spilled after everything read: no reason to wait
  t.equal(u.drain(), Next.Idle);
  t.same(u.got, [5, 7]);

  const v = setup();
  v.src.write(0, 5, 9);
  v.src.marks[1] = 8;
  v.src.marks[2] = 6; // the lowest mark wins, whatever the peer order
  t.equal(v.drain(), Next.WaitSpill);
  t.same(v.got, [5]);
  v.src.write(2, 6);
  v.src.marks[2] = 7; // peer 2 moved one frame; its next spilled frame is 7
  t.equal(v.drain(), Next.WaitSpill);
  t.same(v.got, [5, 6]);
  v.src.write(2, 7);
  v.src.marks[2] = null;
  v.src.write(1, 8);
  v.src.marks[1] = null;
  t.equal(v.drain(), Next.Idle);
  t.same(v.got, [5, 6, 7, 8, 9]);
});

t.test(`a spill mark that does not move for more than ${SPILL_WAIT_MAX_MS} ms is given up`, async (t) => {
  const s = setup();
  s.src.write(0, 5, 7);
  s.src.marks[1] = 6;
  t.equal(s.drain(), Next.WaitSpill);
  s.advance(SPILL_WAIT_MAX_MS);
  t.equal(s.drain(), Next.WaitSpill, `still waited for at exactly ${SPILL_WAIT_MAX_MS} ms`);
  t.same(s.got, [5]);
  s.advance(1);
  t.equal(s.drain(), Next.Idle, 'taken for gone after that');
  t.same(s.got, [5, 7]);
  s.src.write(0, 8);
  t.equal(s.drain(), Next.Idle, 'and not waited for again while its mark stays');
  t.same(s.got, [5, 7, 8]);

  const m = setup();
  m.src.write(0, 5, 9);
  m.src.marks[1] = 6;
  t.equal(m.drain(), Next.WaitSpill);
  m.advance(800);
  m.src.write(1, 6);
  m.src.marks[1] = 7; // the spill moved: the wait starts over
  t.equal(m.drain(), Next.WaitSpill);
  m.advance(800);
  t.equal(m.drain(), Next.WaitSpill, '1.6 s since the first mark but 0.8 s since this one');
  t.same(m.got, [5, 6]);
  m.src.marks[1] = null; // the spill emptied; its frame 7 was dropped (peer restarted), say
  t.equal(m.drain(), Next.Idle);
  t.same(m.got, [5, 6, 9]);
});

t.test('an answer ends the batch; resume() delivers the rest up to the same horizon, reading nothing', async (t) => {
  const s = setup();
  s.src.write(0, 1, 2, 3);
  s.src.write(1, 4);
  s.answer(2);
  t.equal(s.drain(), Next.Resume);
  t.same(s.got, [1, 2], 'stopped right after the answer');
  s.src.write(1, 5); // arrives before the resume
  const collects = s.src.collects;
  t.equal(s.order.resume(s.deliver), Next.Idle);
  t.same(s.got, [1, 2, 3, 4], 'the rest of the batch');
  t.equal(s.src.collects, collects, 'resume() reads no ring');
  t.equal(s.drain(), Next.Idle);
  t.same(s.got, [1, 2, 3, 4, 5], 'the new frame at the next drain');

  const h = setup();
  h.src.write(0, 1, 2);
  h.src.between = () => h.src.write(1, 9); // past the horizon (2)
  h.answer(1);
  t.equal(h.drain(), Next.Resume);
  t.equal(h.order.resume(h.deliver), Next.Again, 'resume holds what is past the horizon');
  t.same(h.got, [1, 2]);
  t.equal(h.drain(), Next.Idle);
  t.same(h.got, [1, 2, 9]);

  const last = setup();
  last.src.write(0, 1, 2);
  last.answer(2);
  t.equal(last.drain(), Next.Idle, 'an answer that ends the batch anyway needs no resume');
  t.equal(last.order.resume(last.deliver), Next.Idle, 'resume() with nothing held');
});

t.test('stamps wrap at 2^32', async (t) => {
  const s = setup();
  s.src.write(0, 0x7ffffffe, -0x80000000, -0x7fffffff); // 2^31 − 2, 2^31, 2^31 + 1 as Int32
  s.src.write(1, 0x7fffffff);
  t.equal(s.drain(), Next.Idle);
  t.same(s.got, [0x7ffffffe, 0x7fffffff, -0x80000000, -0x7fffffff]);
  const w = setup();
  w.src.write(0, -1, 1); // 2^32 − 1, then 2^32 + 1
  w.src.write(1, 0);
  w.drain();
  t.same(w.got, [-1, 0, 1]);
  t.ok(stampDiff(0, -1) > 0 && stampDiff(-0x80000000, 0x7fffffff) > 0);
});

t.test('dropHeld removes a peer\'s held frames that keep() refuses', async (t) => {
  const s = setup();
  s.order.hold(frame(3, 1, 2));
  s.order.hold(frame(4, 1, 1));
  s.order.hold(frame(5, 2, 2));
  s.order.dropHeld(1, (f) => f.type === 1);
  t.equal(s.order.heldCount, 2);
  s.drain();
  t.same(s.got, [4, 5]);
});

t.test('StampClock: one shared counter, big-endian stamps in the payload', async (t) => {
  const sab = new SharedArrayBuffer(4);
  const a = new StampClock(sab);
  const b = new StampClock(sab);
  t.equal(a.tick(), 1);
  t.equal(b.tick(), 2, 'shared between clocks (threads)');
  const p = new Uint8Array(6);
  t.equal(a.stamp(p), p);
  t.same([...p.subarray(0, 4)], [0, 0, 0, 3]);
  t.equal(stampOf(p), 3);
  new Int32Array(sab)[0] = 0x7fffffff;
  t.equal(stampOf(a.stamp(p)), -0x80000000, 'wraps to a negative Int32');
  t.same([...p.subarray(0, 4)], [0x80, 0, 0, 0]);
});
