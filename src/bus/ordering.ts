/*
 * Causal order across rings: which of the frames a thread has read may be delivered now,
 * and in what order. Pure: it reads frames through a FrameSource and the time through a
 * clock, and tells its caller (Bus) what to schedule next; it arms no timer itself.
 *
 *   writer:  stamp = clock.tick()  ──▶ frame [u32 stamp][…] written to rings[self][peer]
 *   reader:  collect ─▶ m = max stamp ─▶ spill marks ─▶ collect again ─▶ deliver ≤ horizon
 *                                                                      in stamp order
 * Invariants
 *  1. Per ring, FIFO (the ring's own guarantee). Stamps come from one process-wide
 *     counter taken just before the frame is written, so a frame written after another
 *     was *written* (not merely stamped) carries a later stamp.
 *  2. Horizon: the first collect notes m, the highest stamp seen. A frame that causally
 *     precedes the one stamped m (written completely before that one was stamped: e.g.
 *     the API answered it first) was in its ring before the first collect found m, so
 *     the second collect finds it even where the first read its ring too early. Frames
 *     stamped ≤ horizon are delivered sorted by stamp; later ones are held and join the
 *     next drain's batch.
 *  3. Spill: a writer whose ring is full queues frames in its spill queue and shows the
 *     stamp of the oldest one in the ring header (ring.ts invariant 6). If that mark is
 *     ≤ horizon, the horizon drops to mark − 1: nothing after a spilled frame is
 *     delivered before it (the writer rings the doorbell when the spill moves).
 *  4. A writer whose oldest spilled frame shows the same mark for more than
 *     SPILL_WAIT_MAX_MS is taken for gone (crashed, stopped) and no longer waited for.
 *  5. An answer that settles a request ends the batch (deliver returns true): the rest
 *     is delivered by resume() — after the requester's continuation ran — up to the same
 *     horizon, reading nothing new (a peer streaming answers cannot starve the thread).
 *  6. Stamps wrap at 2^32 and are compared by signed difference: fine while fewer than
 *     2^31 frames separate two frames compared.
 */
import type { PublishFrame } from './messages';

/** A frame read from a ring (or a publish to the thread itself), waiting for its turn. */
export interface Stamped {
  stamp: number;
  from: number;
  type: number;
  /** The frame's payload as read (starts with the stamp); null for a local publish. */
  payload: Uint8Array | null;
  /** A publish to this thread itself, not encoded. */
  local: PublishFrame | null;
}

/** Where a reader's frames come from: the incoming rings (bus/endpoints.ts) or a test. */
export interface FrameSource {
  /** Number of peers (thread indexes 0 … peers − 1). */
  readonly peers: number;
  /** Appends every frame the incoming rings hold now, each ring in its FIFO order. */
  collect(into: Stamped[]): void;
  /** Stamp of the oldest frame in `peer`'s spill queue to this thread, or null: none spilled. */
  spillMark(peer: number): number | null;
}

/** What the caller should schedule after a drain. */
export const Next = {
  /** Nothing held: wait for the next doorbell. */
  Idle: 0,
  /** An answer ended the batch: call resume() once the requester's continuation ran (a microtask). */
  Resume: 1,
  /** Held for a spilled frame: drain again when the writer rings, or after SPILL_WAIT_MAX_MS. */
  WaitSpill: 2,
  /** Frames stamped after the horizon are held: drain again soon (next turn). */
  Again: 3,
} as const;
export type Next = (typeof Next)[keyof typeof Next];

/** How long a reader holds frames for a spilled frame that does not move (invariant 4). */
export const SPILL_WAIT_MAX_MS = 1000;

/** a − b for stamps that wrap at 2^32. */
export const stampDiff = (a: number, b: number): number => (a - b) | 0;
/** The stamp of a frame payload: its first 4 bytes, big-endian. */
export const stampOf = (p: Uint8Array): number => (p[0] << 24) | (p[1] << 16) | (p[2] << 8) | p[3];
const byStamp = (a: Stamped, b: Stamped): number => stampDiff(a.stamp, b.stamp);

/** The process-wide stamp counter (BusTopology.clock): one Int32, shared by every thread. */
export class StampClock {
  private readonly i32: Int32Array;
  constructor(sab: SharedArrayBuffer) {
    this.i32 = new Int32Array(sab, 0, 1);
  }

  tick(): number {
    return (Atomics.add(this.i32, 0, 1) + 1) | 0;
  }

  /** Writes a fresh stamp into the payload's first 4 bytes (big-endian); returns the payload. */
  stamp(payload: Uint8Array): Uint8Array {
    const s = this.tick();
    payload[0] = s >>> 24; payload[1] = s >>> 16; payload[2] = s >>> 8; payload[3] = s;
    return payload;
  }
}

export class CausalOrder {
  /** Frames read but not delivered yet: stamped after the last horizon, or behind an answer. */
  private held: Stamped[] = [];
  /** The horizon of the batch an answer ended (for resume()). */
  private resumeAt = 0;
  /** Per peer: the spill mark last waited for, and since when (0: not waiting). */
  private readonly waitMark: number[] = [];
  private readonly waitSince: number[] = [];

  constructor(
    private readonly source: FrameSource,
    private readonly now: () => number = Date.now,
  ) {}

  /** Frames read and not delivered yet. */
  get heldCount(): number {
    return this.held.length;
  }

  /** Adds a frame to the next batch (a local publish while reading is paused; a dead peer's publishes). */
  hold(f: Stamped): void {
    this.held.push(f);
  }

  /** Drops the held frames of `peer` for which keep() is false (a restarted peer's control frames). */
  dropHeld(peer: number, keep: (f: Stamped) => boolean): void {
    this.held = this.held.filter((f) => f.from !== peer || keep(f));
  }

  /**
   * Reads what the source holds and delivers, in stamp order, every frame whose causal
   * predecessors are all here (invariants 2–4); `local` (a publish to this thread) joins
   * the batch. deliver() returns true when the frame was an answer that settled a request
   * (invariant 5). A deliver() that throws propagates; the frames not reached stay lost,
   * so callers catch inside deliver().
   */
  drain(deliver: (f: Stamped) => boolean, local?: Stamped): Next {
    const batch = this.held;
    this.held = [];
    if (local) batch.push(local);
    this.source.collect(batch);
    if (batch.length === 0) return Next.Idle;
    let horizon = batch[0].stamp;
    for (const f of batch) if (stampDiff(f.stamp, horizon) > 0) horizon = f.stamp;
    const spill = this.spillHorizon(horizon);
    if (spill !== null) horizon = spill;
    this.source.collect(batch);
    const next = this.deliverUpTo(batch, horizon, deliver);
    return next === Next.Resume || spill === null ? next : Next.WaitSpill;
  }

  /** After Next.Resume: delivers the held frames up to the same horizon, reading nothing new. */
  resume(deliver: (f: Stamped) => boolean): Next {
    const batch = this.held;
    this.held = [];
    if (batch.length === 0) return Next.Idle;
    return this.deliverUpTo(batch, this.resumeAt, deliver);
  }

  private deliverUpTo(batch: Stamped[], horizon: number, deliver: (f: Stamped) => boolean): Next {
    batch.sort(byStamp);
    for (let k = 0; k < batch.length; k++) {
      const f = batch[k];
      if (stampDiff(f.stamp, horizon) > 0) {
        this.held.push(f);
      } else if (deliver(f) && k + 1 < batch.length) {
        // E.g. a presence snapshot, then member events that need the joining socket
        // subscribed: the requester's continuation (a promise job) runs in between.
        for (let r = k + 1; r < batch.length; r++) this.held.push(batch[r]);
        this.resumeAt = horizon;
        return Next.Resume;
      }
    }
    return this.held.length > 0 ? Next.Again : Next.Idle;
  }

  /**
   * The horizon lowered to just before the oldest spilled frame of any peer, if that is
   * at or before `horizon`; else null. A peer whose mark has not moved for more than
   * SPILL_WAIT_MAX_MS is not waited for (invariant 4).
   */
  private spillHorizon(horizon: number): number | null {
    let out: number | null = null;
    let now = 0;
    for (let peer = 0; peer < this.source.peers; peer++) {
      const mark = this.source.spillMark(peer);
      if (mark === null) {
        this.waitSince[peer] = 0;
        continue;
      }
      if (stampDiff(mark, out ?? horizon) > 0) continue;
      now ||= this.now();
      if (!this.waitSince[peer] || this.waitMark[peer] !== mark) {
        this.waitMark[peer] = mark;
        this.waitSince[peer] = now;
      } else if (now - this.waitSince[peer] > SPILL_WAIT_MAX_MS) {
        continue;
      }
      out = (mark - 1) | 0;
    }
    return out;
  }
}
