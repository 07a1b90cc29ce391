/*
 * One thread's bus: publish and control frames to any thread of the mesh, requests with
 * answers, frames from every peer delivered to the handlers in causal order. It composes
 *
 *   endpoints.ts  the ring ends: a writer and a reader per peer, the doorbells
 *   ordering.ts   which frames read may be delivered now, in what order (stamps)
 *   requests.ts   requests waiting for their answer, timeouts, restarted peers
 *   batch.ts      several frames written all or nothing
 *
 * and adds what ties them to the event loop: a drain per doorbell wake-up, the timers
 * ordering asks for, and frames addressed to the thread itself, which are delivered by a
 * direct call (a shard that publishes reaches its own subscribers synchronously and in
 * order: first what its rings hold from before, unless nothing is waiting at all).
 */
import { BusBatch, type BatchWriter } from './batch';
import { Endpoints } from './endpoints';
import { BusFullError, BusPeerRestartedError, BusTimeoutError } from './errors';
import {
  ControlMsg, FrameType, PublishFrame, RequestBody,
  decodeControl, decodePublish, encodeControl, encodePublish, type FrameTags,
} from './messages';
import { CausalOrder, Next, SPILL_WAIT_MAX_MS, StampClock, stampOf, type Stamped } from './ordering';
import { Requests } from './requests';
import type { BusTopology } from './topology';

export interface BusHandlers {
  onPublish(frame: PublishFrame): void;
  onControl(msg: ControlMsg, from: number): void;
  /** A handler threw while a frame was being delivered; the frame is dropped, the bus goes on. */
  onError(err: unknown, frameType: number): void;
  /**
   * Control frames a restarted peer had written and this thread had not read yet (see
   * rewire). Without this handler they are dropped; the primary takes its webhook reports.
   */
  onOrphanControl?(msg: ControlMsg, from: number): void;
}

export { BusBatch, BusFullError, BusPeerRestartedError, BusTimeoutError };

export class Bus {
  private readonly ends: Endpoints;
  private readonly order: CausalOrder;
  private readonly requests: Requests;
  private readonly clock: StampClock;
  private handlers: BusHandlers | null = null;
  /** Inside a handler: a frame to this thread is delivered at once (it follows the one being handled). */
  private handling = false;
  /** After stop(): frames to other threads are refused (BusFullError), nobody may read them any more. */
  private stopped = false;
  /** Test hook (pauseDraining): the rings are not read until then; 0 = not paused. */
  private pausedUntil = 0;
  private redrain: NodeJS.Immediate | null = null;
  private spillTimer: NodeJS.Timeout | null = null;
  private pauseTimer: NodeJS.Timeout | null = null;
  /** The shards' thread indexes (0 … shards − 1; then the primary, then the delta sequencer if any): publishAll's targets. */
  private readonly shards: Uint16Array;
  /** publishTo: seen[to] === epoch marks a target already listed in this call. */
  private readonly seen: Uint32Array;
  private epoch = 0;
  /** What a BusBatch needs of the bus to commit. */
  private readonly batchWriter: BatchWriter;

  constructor(
    readonly self: number,
    private readonly topo: BusTopology,
    requestTimeoutMs = 5000,
  ) {
    this.ends = new Endpoints(self, topo);
    this.order = new CausalOrder(this.ends);
    this.requests = new Requests(requestTimeoutMs);
    this.clock = new StampClock(topo.clock);
    this.shards = Uint16Array.from({ length: topo.shards ?? topo.threads - 1 }, (_, i) => i);
    this.seen = new Uint32Array(topo.threads);
    this.batchWriter = {
      self,
      checkTarget: (to, epoch) => this.checkTarget(to, epoch),
      nextEpoch: () => this.nextEpoch(),
      canWrite: (to, lengths) => !this.stopped && this.ends.wouldTakeAll(to, lengths),
      write: (to, type, payload) => {
        if (this.stopped || !this.ends.write(to, type, this.clock.stamp(payload))) throw new BusFullError(to); // not after canWrite
      },
      publishSelf: (app, channel, except, message, tags, trace) => this.publish(self, app, channel, except, message, tags, trace),
      controlSelf: (msg) => this.control(self, msg),
    };
  }

  get threads(): number {
    return this.topo.threads;
  }

  start(handlers: BusHandlers): void {
    this.handlers = handlers;
    this.ends.listen(() => this.drain()); // calls drain() once now
  }

  /** Spilled bytes waiting on every outgoing ring (a gauge for metrics and tests). */
  spilledBytes(): number {
    return this.ends.spilledBytes();
  }

  /** Throws BusFullError when the ring and its spill queue to `to` are full (nothing taken). */
  publish(to: number, app: string, channel: string, except: string, message: Uint8Array, tags: FrameTags = null, trace: string | null = null): void {
    if (to === this.self) {
      if (this.handling) this.handlers!.onPublish({ app, channel, except, message, tags, trace });
      else if (this.quiet()) this.deliverNow({ app, channel, except, message, tags, trace });
      // drain may hold the frame back for ordering: it keeps a copy (the caller's bytes are
      // only its own during the call; shard/fanout.ts reuses them).
      else this.drain({ stamp: this.clock.tick(), from: this.self, type: FrameType.Publish, payload: null, local: { app, channel, except, message: Buffer.from(message), tags, trace } });
      return;
    }
    if (this.stopped || !this.ends.write(to, FrameType.Publish, this.clock.stamp(encodePublish(app, channel, except, message, tags, trace)))) {
      throw new BusFullError(to);
    }
  }

  /**
   * publish() to each thread listed in `targets` (distinct indexes; this thread may be one
   * of them: delivered directly, after the frames to the others are written, so that no
   * handler it runs can take room they were promised), all or nothing: when the ring and
   * spill queue to any of them cannot take the frame, throws BusFullError having written
   * nowhere (so a 503 means no subscriber got it). The frame is encoded once. A bad or
   * repeated index throws RangeError, also before anything is written.
   */
  publishTo(targets: ArrayLike<number>, app: string, channel: string, except: string, message: Uint8Array, tags: FrameTags = null, trace: string | null = null): void {
    const epoch = this.nextEpoch();
    let payload: Uint8Array | null = null;
    let local = false;
    for (let i = 0; i < targets.length; i++) {
      const to = targets[i];
      this.checkTarget(to, epoch);
      if (to === this.self) {
        local = true;
        continue;
      }
      if (this.stopped) throw new BusFullError(to);
      payload ??= encodePublish(app, channel, except, message, tags, trace);
      if (!this.ends.wouldTake(to, payload.length)) throw new BusFullError(to);
    }
    if (payload !== null) {
      for (let i = 0; i < targets.length; i++) {
        const to = targets[i];
        if (to !== this.self && !this.ends.write(to, FrameType.Publish, this.clock.stamp(payload))) throw new BusFullError(to); // not after wouldTake
      }
    }
    if (local) this.publish(this.self, app, channel, except, message, tags, trace);
  }

  /** publishTo() every shard (threads 0 … threads − 2). */
  publishAll(app: string, channel: string, except: string, message: Uint8Array): void {
    this.publishTo(this.shards, app, channel, except, message);
  }

  /**
   * Frames to write all or nothing (batch.ts): add publishes and control messages, then
   * commit(), which checks every ring concerned for all of its frames before writing any.
   * For a multi-channel publish or a batch of events that must not half reach subscribers.
   */
  batch(): BusBatch {
    return new BusBatch(this.batchWriter);
  }

  /**
   * Stops reading the incoming rings for `ms`, as if this thread could not keep up;
   * writers fill their rings, then their spill queues, then get BusFullError. Publishes
   * to this thread itself wait too. The delta sequencer's backpressure (delta/backlog.ts),
   * and a test hook (wired only when RINGCAST_TEST_HOOKS=1).
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
    if (this.stopped || !this.ends.write(to, FrameType.Control, this.clock.stamp(encodeControl(msg)))) throw new BusFullError(to);
  }

  /**
   * Sends a request; the promise settles with the body of the answer (reply()), or rejects
   * with BusFullError (not sent), BusTimeoutError (no answer in time, or stop()) or
   * BusPeerRestartedError (the peer was replaced before it answered).
   */
  request<T>(to: number, body: RequestBody): Promise<T> {
    const { req, answer } = this.requests.open<T>(to, body.type);
    try {
      this.control(to, { ...body, req, from: this.self });
    } catch (err) {
      this.requests.fail(req, err as Error);
    }
    return answer;
  }

  reply(to: number, req: number, body: unknown): void {
    if (to === this.self) {
      this.requests.settle(req, body);
      return;
    }
    this.control(to, { type: 'reply', req, body });
  }

  stop(): void {
    this.stopped = true;
    if (this.pauseTimer) clearTimeout(this.pauseTimer);
    this.pauseTimer = null;
    if (this.redrain) clearImmediate(this.redrain);
    this.redrain = null;
    if (this.spillTimer) clearTimeout(this.spillTimer);
    this.spillTimer = null;
    this.ends.close();
    this.requests.closeAll(); // never answered: 503 for the API
  }

  /**
   * Thread `peer` was replaced by a new one (shard restart, see main.ts): from now on this
   * thread talks to it over the fresh rings and doorbell the primary allocated. Complete
   * publish frames the old thread left in its ring are still delivered (an answered API
   * publish reaches the surviving subscribers); its control frames go to onOrphanControl
   * if there is one (the primary: webhook reports), else are dropped (its records are
   * rebuilt instead). Frames still queued to the old thread (ring or spill)
   * are dropped, and requests waiting for its answer are rejected at once with
   * BusPeerRestartedError.
   */
  rewire(peer: number, toPeer: SharedArrayBuffer, fromPeer: SharedArrayBuffer, doorbell: SharedArrayBuffer): void {
    if (peer === this.self || this.stopped) return;
    const old = this.ends.replace(peer, toPeer, fromPeer, doorbell);
    try {
      old?.drain((type, payload) => {
        if (type === FrameType.Publish) this.order.hold({ stamp: stampOf(payload), from: peer, type, payload, local: null });
        else if (type === FrameType.Control) this.handlers?.onOrphanControl?.(decodeControl(payload), peer);
      });
    } catch (err) {
      this.handlers?.onError(err, FrameType.Publish); // a torn chunked frame: drop the rest
    }
    this.order.dropHeld(peer, (f) => f.type === FrameType.Publish);
    this.requests.peerRestarted(peer);
    // Frames the new thread wrote before this rewire rang a doorbell this thread already
    // answered from the old ring: look again (and deliver the held publishes).
    if (this.handlers && !this.redrain) this.redrain = setImmediate(() => this.drain());
  }

  private nextEpoch(): number {
    if (++this.epoch === 0x100000000) { // after 2^32 calls: clear the marks rather than alias
      this.seen.fill(0);
      this.epoch = 1;
    }
    return this.epoch;
  }

  private checkTarget(to: number, epoch: number): void {
    if (!(to >= 0 && to < this.topo.threads && to === Math.floor(to))) {
      throw new RangeError(`bus target must be a thread index in [0, ${this.topo.threads - 1}], got ${to}`);
    }
    if (this.seen[to] === epoch) throw new RangeError(`bus target ${to} listed twice`);
    this.seen[to] = epoch;
  }

  /** Reads the rings and delivers what ordering allows (ordering.ts), then schedules what it asks for. */
  private drain(local?: Stamped): void {
    this.run(local, false);
  }

  private run(local: Stamped | undefined, resume: boolean): void {
    if (this.pausedUntil !== 0) { // test hook: read nothing; the timer drains when it ends
      if (local) this.order.hold(local);
      return;
    }
    if (this.redrain) clearImmediate(this.redrain);
    this.redrain = null;
    if (this.stopped) return; // e.g. a drain queued behind an answer, after a crash stopped the bus
    let next: Next;
    this.handling = true;
    try {
      next = resume ? this.order.resume(this.deliver) : this.order.drain(this.deliver, local);
    } finally {
      this.handling = false;
    }
    // The resumed drain reads nothing new, so a peer streaming answers cannot keep this
    // thread in microtasks: new frames wait for the next wake-up as usual.
    if (next === Next.Resume) queueMicrotask(() => this.run(undefined, true));
    else if (next === Next.WaitSpill) this.armSpillTimer(); // the writer rings when its spill moves
    else if (next === Next.Again) this.redrain = setImmediate(() => this.drain());
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
   * publish with no other traffic: docs/benchmarks.md).
   */
  private quiet(): boolean {
    return this.order.heldCount === 0 && this.pausedUntil === 0 && !this.stopped && this.redrain === null && this.ends.idle();
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
  private readonly deliver = (f: Stamped): boolean => {
    const h = this.handlers!;
    try {
      if (f.local) {
        h.onPublish(f.local);
      } else if (f.type === FrameType.Publish) {
        h.onPublish(decodePublish(f.payload!));
      } else if (f.type === FrameType.Control) {
        const msg = decodeControl(f.payload!);
        if (msg.type === 'reply') return this.requests.settle(msg.req, msg.body);
        h.onControl(msg, f.from);
      }
    } catch (err) {
      h.onError(err, f.type);
    }
    return false;
  };
}
