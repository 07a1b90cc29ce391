// One thread's end of the ring mesh: a writer per peer, a reader per peer, one doorbell.
//
//   rings[from][to]   SPSC ring written only by thread `from`, read only by thread `to`
//   doorbells[to]     rung by any writer to `to` (once per event-loop turn), waited on by `to`
//
// Frames addressed to the thread itself are handled by a direct call, so a shard that
// publishes delivers to its own subscribers synchronously and in order.
//
// Order. Per pair, FIFO: A→B frames arrive in the order A wrote them. Across rings,
// causal: every frame carries a stamp from one process-wide counter (`clock`), taken
// just before it is written. A reader collects what its rings hold, notes the highest
// stamp m, collects once more (anything stamped before m was written before the frame
// stamped m was, so it is visible now), and delivers the frames stamped ≤ m in stamp
// order, holding later ones for the next drain. So when a publish answered on shard A
// is followed by one on shard B (a client awaiting each HTTP response, on a new
// connection each time), every shard delivers them in that order. A publish to the
// thread itself first delivers what the rings hold from before it. Frames that wait in
// a writer's spill queue because a ring is full are covered too: each ring shows the
// stamp of the writer's oldest spilled frame (ring invariant 6), read between the two
// collects, and nothing stamped after it is delivered before it arrives (the writer rings
// the doorbell when it moves spilled frames). A writer that shows the same oldest frame
// for SPILL_WAIT_MAX_MS is taken for gone (crashed, stopped) and no longer waited for.

import { DoorbellListener, DoorbellRinger } from './doorbell';
import { BusFullError, BusPeerRestartedError, BusTimeoutError } from './errors';
import { RingReader, RingWriter } from './ring';
import {
  ControlMsg, FrameType, PublishFrame, RequestBody, RequestMsg,
  decodeControl, decodePublish, encodeControl, encodePublish,
} from './messages';
import type { BusTopology } from './topology';

export interface BusHandlers {
  onPublish(frame: PublishFrame): void;
  onControl(msg: ControlMsg, from: number): void;
  /** A handler threw while a frame was being delivered; the frame is dropped, the bus goes on. */
  onError(err: unknown, frameType: number): void;
}

export { BusFullError, BusPeerRestartedError, BusTimeoutError };

interface Pending {
  to: number;
  type: string;
  resolve(body: unknown): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

/** A frame read from a ring (or a publish to this thread), waiting for its turn. */
interface Stamped {
  stamp: number;
  from: number;
  type: number;
  payload: Uint8Array | null;
  local: PublishFrame | null;
}

/** a - b for stamps that wrap at 2^32. */
const stampDiff = (a: number, b: number) => (a - b) | 0;
/** The stamp of a frame payload (its first 4 bytes, big-endian; see Bus.stamp). */
const stampOf = (p: Uint8Array) => (p[0] << 24) | (p[1] << 16) | (p[2] << 8) | p[3];
/** How long a reader holds frames for a writer's spilled frame that does not move (see top). */
const SPILL_WAIT_MAX_MS = 1000;
const byStamp = (a: Stamped, b: Stamped) => stampDiff(a.stamp, b.stamp);

export class Bus {
  private readonly writers: (RingWriter | null)[] = [];
  private readonly readers: (RingReader | null)[] = [];
  private readonly ringers: (DoorbellRinger | null)[] = [];
  private listener: DoorbellListener | null = null;
  private readonly pending = new Map<number, Pending>();
  private nextReq = 1;
  private handlers: BusHandlers | null = null;
  private readonly clock: Int32Array;
  /** Frames read but stamped after the last drain's horizon. */
  private held: Stamped[] = [];
  private redrain: NodeJS.Immediate | null = null;
  /** Inside a handler: a frame to this thread is delivered at once (it follows the one being handled). */
  private handling = false;
  /** After stop(): frames to other threads are refused (BusFullError), nobody may read them any more. */
  private stopped = false;
  /** Test hook (pauseDraining): the rings are not read until then; 0 = not paused. */
  private pausedUntil = 0;
  /** Per peer: the spill mark last waited for, and since when (0: not waiting). */
  private readonly spillWaitMark: number[] = [];
  private readonly spillWaitSince: number[] = [];
  private spillTimer: NodeJS.Timeout | null = null;
  private pauseTimer: NodeJS.Timeout | null = null;

  constructor(
    readonly self: number,
    private readonly topo: BusTopology,
    private readonly requestTimeoutMs = 5000,
  ) {
    this.clock = new Int32Array(topo.clock);
    for (let peer = 0; peer < topo.threads; peer++) {
      if (peer === self) {
        this.writers.push(null); this.readers.push(null); this.ringers.push(null);
        continue;
      }
      const ringer = new DoorbellRinger(topo.doorbells[peer]);
      this.ringers.push(ringer);
      this.writers.push(new RingWriter(topo.rings[self][peer]!, {
        maxSpillBytes: topo.maxSpillBytes,
        onWritten: () => ringer.request(),
        mark: stampOf,
      }));
      this.readers.push(new RingReader(topo.rings[peer][self]!));
    }
  }

  get threads(): number {
    return this.topo.threads;
  }

  start(handlers: BusHandlers): void {
    this.handlers = handlers;
    this.listener = new DoorbellListener(this.topo.doorbells[this.self], () => this.drain());
    this.listener.start();
    this.drain();
  }

  /** Spilled bytes waiting on every outgoing ring (a gauge for metrics and tests). */
  spilledBytes(): number {
    let n = 0;
    for (const w of this.writers) if (w) n += w.spilledBytes;
    return n;
  }

  /** Throws BusFullError when the ring and its spill queue to `to` are full (nothing taken). */
  publish(to: number, app: string, channel: string, except: string, message: Uint8Array): void {
    if (to === this.self) {
      if (this.handling) this.handlers!.onPublish({ app, channel, except, message });
      else if (this.quiet()) this.deliverNow({ app, channel, except, message });
      // drain may hold the frame back for ordering: it keeps a copy (the caller's bytes are
      // only its own during the call; shard/fanout.ts reuses them).
      else this.drain({ stamp: this.tick(), from: this.self, type: FrameType.Publish, payload: null, local: { app, channel, except, message: Buffer.from(message) } });
      return;
    }
    if (this.stopped || !this.writers[to]!.write(FrameType.Publish, this.stamp(encodePublish(app, channel, except, message)))) {
      throw new BusFullError(to);
    }
  }

  /**
   * publish() to every shard (threads 0 … threads − 2), all or nothing: when the ring and
   * spill queue to any of them cannot take the frame, throws BusFullError having written
   * nowhere (so a 503 means no subscriber got it). The frame is encoded once.
   */
  publishAll(app: string, channel: string, except: string, message: Uint8Array): void {
    const shards: number[] = [];
    for (let s = 0; s < this.topo.threads - 1; s++) shards.push(s);
    this.publishTo(shards, app, channel, except, message);
  }

  /**
   * A publish to the listed threads (this one included: a direct call, last). All or
   * nothing: every ring is asked first, and BusFullError is thrown having written nowhere.
   */
  publishTo(targets: ArrayLike<number>, app: string, channel: string, except: string, message: Uint8Array): void {
    let payload: Uint8Array | null = null;
    let self = false;
    for (let i = 0; i < targets.length; i++) {
      const to = targets[i];
      if (to === this.self) { self = true; continue; }
      if (this.stopped) throw new BusFullError(to);
      payload ??= encodePublish(app, channel, except, message);
      if (!this.writers[to]!.wouldTake(payload.length)) throw new BusFullError(to);
    }
    if (payload !== null) {
      for (let i = 0; i < targets.length; i++) {
        const to = targets[i];
        if (to === this.self) continue;
        // a fresh stamp per ring: each frame is stamped just before it is written
        if (!this.writers[to]!.write(FrameType.Publish, this.stamp(payload))) throw new BusFullError(to); // not after wouldTake
      }
    }
    if (self) this.publish(this.self, app, channel, except, message);
  }

  /** Room for `frames` more frames of `bytes` payload bytes in all to thread `to` (ring + spill)? */
  hasRoom(to: number, bytes: number, frames: number): boolean {
    if (to === this.self) return true;
    if (this.stopped) return false;
    return this.writers[to]!.wouldTake(bytes + (frames - 1) * 8);
  }

  /**
   * Test hook (only wired when RINGCAST_TEST_HOOKS=1): stops reading the incoming rings
   * for `ms`, as if this thread could not keep up; writers fill their rings, then their
   * spill queues, then get BusFullError. Publishes to this thread itself wait too.
   */
  pauseDraining(ms: number): void {
    if (this.pauseTimer) clearTimeout(this.pauseTimer);
    this.pausedUntil = Date.now() + ms;
    this.pauseTimer = setTimeout(() => {
      this.pauseTimer = null;
      this.pausedUntil = 0;
      if (!this.stopped && this.handlers) this.drain();
    }, ms);
  }

  /** Throws BusFullError when full. */
  control(to: number, msg: ControlMsg): void {
    if (to === this.self) {
      const was = this.handling;
      this.handling = true;
      try {
        this.handlers!.onControl(msg, this.self);
      } finally {
        this.handling = was;
      }
      return;
    }
    if (this.stopped || !this.writers[to]!.write(FrameType.Control, this.stamp(encodeControl(msg)))) throw new BusFullError(to);
  }

  request<T>(to: number, body: RequestBody): Promise<T> {
    const req = this.nextReq++;
    const msg = { ...body, req, from: this.self } as RequestMsg;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(req);
        reject(new BusTimeoutError(to, body.type));
      }, this.requestTimeoutMs);
      this.pending.set(req, { to, type: body.type, resolve: resolve as (b: unknown) => void, reject, timer });
      try {
        this.control(to, msg);
      } catch (err) {
        clearTimeout(timer);
        this.pending.delete(req);
        reject(err as Error);
      }
    });
  }

  reply(to: number, req: number, body: unknown): void {
    if (to === this.self) {
      this.settle(req, body);
      return;
    }
    this.control(to, { type: 'reply', req, body });
  }

  stop(): void {
    this.stopped = true;
    if (this.pauseTimer) clearTimeout(this.pauseTimer);
    this.pauseTimer = null;
    this.listener?.stop();
    if (this.redrain) clearImmediate(this.redrain);
    this.redrain = null;
    if (this.spillTimer) clearTimeout(this.spillTimer);
    this.spillTimer = null;
    for (const w of this.writers) w?.close();
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(new BusTimeoutError(p.to, p.type)); // never answered: 503 for the API
    }
    this.pending.clear();
  }

  /**
   * Thread `peer` was replaced by a new one (shard restart, see main.ts): from now on this
   * thread talks to it over the fresh rings and doorbell the primary allocated. Complete
   * publish frames the old thread left in its ring are still delivered (an answered API
   * publish reaches the surviving subscribers); its control frames are dropped (its
   * records are rebuilt instead). Frames still queued to the old thread (ring or spill)
   * are dropped, and requests waiting for its answer are rejected at once with
   * BusPeerRestartedError.
   */
  rewire(peer: number, toPeer: SharedArrayBuffer, fromPeer: SharedArrayBuffer, doorbell: SharedArrayBuffer): void {
    if (peer === this.self || this.stopped) return;
    const old = this.readers[peer];
    try {
      old?.drain((type, payload) => {
        if (type !== FrameType.Publish) return;
        const stamp = (payload[0] << 24) | (payload[1] << 16) | (payload[2] << 8) | payload[3];
        this.held.push({ stamp, from: peer, type, payload, local: null });
      });
    } catch (err) {
      this.handlers?.onError(err, FrameType.Publish); // a torn chunked frame: drop the rest
    }
    this.held = this.held.filter((f) => f.from !== peer || f.type === FrameType.Publish);
    this.writers[peer]?.close();
    const ringer = new DoorbellRinger(doorbell);
    this.ringers[peer] = ringer;
    this.writers[peer] = new RingWriter(toPeer, { maxSpillBytes: this.topo.maxSpillBytes, onWritten: () => ringer.request(), mark: stampOf });
    this.readers[peer] = new RingReader(fromPeer);
    this.topo.rings[this.self][peer] = toPeer;
    this.topo.rings[peer][this.self] = fromPeer;
    this.topo.doorbells[peer] = doorbell;
    for (const [req, p] of this.pending) {
      if (p.to !== peer) continue;
      this.pending.delete(req);
      clearTimeout(p.timer);
      p.reject(new BusPeerRestartedError(peer, p.type));
    }
    // Frames the new thread wrote before this rewire rang a doorbell this thread already
    // answered from the old ring: look again (and deliver the held publishes).
    if (this.handlers && !this.redrain) this.redrain = setImmediate(() => this.drain());
  }

  private settle(req: number, body: unknown): boolean {
    const p = this.pending.get(req);
    if (!p) return false; // timed out already
    this.pending.delete(req);
    clearTimeout(p.timer);
    p.resolve(body);
    return true;
  }

  private tick(): number {
    return (Atomics.add(this.clock, 0, 1) + 1) | 0;
  }

  /** Writes a fresh stamp into the payload's first 4 bytes (big-endian). */
  private stamp(payload: Uint8Array): Uint8Array {
    const s = this.tick();
    payload[0] = s >>> 24; payload[1] = s >>> 16; payload[2] = s >>> 8; payload[3] = s;
    return payload;
  }

  private collect(into: Stamped[]): void {
    for (let peer = 0; peer < this.readers.length; peer++) {
      const reader = this.readers[peer];
      if (!reader) continue;
      reader.drain((type, payload) => {
        const stamp = (payload[0] << 24) | (payload[1] << 16) | (payload[2] << 8) | payload[3];
        into.push({ stamp, from: peer, type, payload, local: null });
      });
    }
  }

  /** Delivers, in stamp order, every frame whose causal predecessors are all here (see top). */
  /** `resume`: go on with the held frames up to this horizon, reading nothing new (after a yield). */
  private drain(local?: Stamped, resume?: number): void {
    if (this.pausedUntil !== 0) { // test hook: read nothing; the timer drains when it ends
      if (local) this.held.push(local);
      return;
    }
    if (this.redrain) clearImmediate(this.redrain);
    this.redrain = null;
    if (this.stopped) return; // e.g. a drain queued behind an answer, after a crash stopped the bus
    const batch = this.held;
    this.held = [];
    if (local) batch.push(local);
    let horizon: number;
    let waitSpill: number | null = null;
    if (resume === undefined) {
      this.collect(batch);
      if (batch.length === 0) return;
      horizon = batch[0].stamp;
      for (const f of batch) if (stampDiff(f.stamp, horizon) > 0) horizon = f.stamp;
      waitSpill = this.spillHorizon(horizon);
      if (waitSpill !== null) horizon = waitSpill;
      this.collect(batch);
    } else {
      if (batch.length === 0) return;
      horizon = resume;
    }
    batch.sort(byStamp);
    this.handling = true;
    let yielded = false;
    try {
      for (let k = 0; k < batch.length; k++) {
        const f = batch[k];
        if (stampDiff(f.stamp, horizon) > 0) this.held.push(f);
        else if (this.deliver(f) && k + 1 < batch.length) {
          // An answer settled a request: the requester's continuation (a promise job) runs
          // before the frames behind the answer. E.g. a presence snapshot, then member
          // events that need the joining socket subscribed (and the shadow set updated).
          for (let r = k + 1; r < batch.length; r++) this.held.push(batch[r]);
          yielded = true;
          break;
        }
      }
    } finally {
      this.handling = false;
    }
    // The resumed drain reads nothing new, so a peer streaming answers cannot keep this
    // thread in microtasks: new frames wait for the next wake-up as usual.
    if (yielded) queueMicrotask(() => this.drain(undefined, horizon));
    else if (waitSpill !== null) this.armSpillTimer(); // the writer rings when its spill moves
    else if (this.held.length > 0) this.redrain = setImmediate(() => this.drain());
  }

  /**
   * The horizon lowered to just before the oldest spilled frame of any peer, if that is
   * at or before `horizon`; else null. A peer whose oldest spilled frame has not moved for
   * SPILL_WAIT_MAX_MS is not waited for (see top).
   */
  private spillHorizon(horizon: number): number | null {
    let out: number | null = null;
    let now = 0;
    for (let peer = 0; peer < this.readers.length; peer++) {
      const mark = this.readers[peer]?.spillMark() ?? null;
      if (mark === null) {
        this.spillWaitSince[peer] = 0;
        continue;
      }
      if (stampDiff(mark, out ?? horizon) > 0) continue;
      now ||= Date.now();
      if (this.spillWaitSince[peer] === 0 || this.spillWaitSince[peer] === undefined || this.spillWaitMark[peer] !== mark) {
        this.spillWaitMark[peer] = mark;
        this.spillWaitSince[peer] = now;
      } else if (now - this.spillWaitSince[peer] > SPILL_WAIT_MAX_MS) {
        continue;
      }
      out = (mark - 1) | 0;
    }
    return out;
  }

  /** A drain after SPILL_WAIT_MAX_MS, in case the writer waited for never moves its spill. */
  private armSpillTimer(): void {
    if (this.spillTimer) return;
    this.spillTimer = setTimeout(() => {
      this.spillTimer = null;
      if (!this.stopped) this.drain();
    }, SPILL_WAIT_MAX_MS + 10);
    this.spillTimer.unref();
  }

  /**
   * Nothing held back and nothing waiting in any incoming ring or spill queue: a local
   * publish is then the newest frame this thread knows of, and drain() would deliver it
   * at once, alone. deliverNow() does that without the batch, stamp and sort (an API
   * publish with no other traffic: docs/performance.md).
   */
  private quiet(): boolean {
    if (this.held.length !== 0 || this.pausedUntil !== 0 || this.stopped || this.redrain !== null) return false;
    for (const r of this.readers) if (r !== null && !r.idle()) return false;
    return true;
  }

  private deliverNow(local: PublishFrame): void {
    this.handling = true;
    try {
      this.handlers!.onPublish(local);
    } catch (err) {
      this.handlers!.onError(err, FrameType.Publish);
    } finally {
      this.handling = false;
    }
  }

  /** Returns true when the frame was an answer that settled a pending request. */
  private deliver(f: Stamped): boolean {
    const h = this.handlers!;
    try {
      if (f.local) {
        h.onPublish(f.local);
      } else if (f.type === FrameType.Publish) {
        h.onPublish(decodePublish(f.payload!));
      } else if (f.type === FrameType.Control) {
        const msg = decodeControl(f.payload!);
        if (msg.type === 'reply') return this.settle(msg.req, msg.body);
        h.onControl(msg, f.from);
      }
    } catch (err) {
      h.onError(err, f.type);
    }
    return false;
  }
}
