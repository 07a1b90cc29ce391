/*
 * Single-producer / single-consumer byte ring on a SharedArrayBuffer.
 *
 *  0              64            128                        128 + capacity   (bytes)
 *  ┌──────────────┬─────────────┬───────────────────────────────────────┐
 *  │HEAD CAPACITY │TAIL WAITING │ free │ frame │ frame │ free   │WRAP…  │
 *  └──────────────┴─────────────┴──────▲───────────────▲────────────────┘
 *   reader's line  writer's line       head & mask     tail & mask
 *
 *  frame   [u32 length = 1 + n][u8 type][n payload bytes][pad to 4]
 *  WRAP    a length word 0: the rest of the area is padding, go on at offset 0
 *  chunked [CHUNK_START: u32 total, u8 type, bytes…][CHUNK: bytes…]…  when a frame
 *          would pass capacity / 2; each chunk frame ≤ capacity / 4
 *
 * Invariants
 *  1. HEAD and TAIL are free-running u32 byte counters; position = counter &
 *     (capacity - 1), and capacity (a power of two ≤ 2^30) divides 2^32, so
 *     positions survive the counter wrap. used = (tail - head) >>> 0 ≤ capacity;
 *     head === tail ⇔ empty.
 *  2. Only the writer stores TAIL, only the reader stores HEAD (Atomics.store);
 *     each Atomics.loads the other's. Frame bytes are written before TAIL passes
 *     them and copied out before HEAD passes them; seq-cst atomics order the plain
 *     accesses around them.
 *  3. Frames are contiguous and 4-aligned: the length word is an aligned Int32 and
 *     a payload never straddles the end. The gap left before the end is ≥ 4 bytes.
 *  4. A whole frame is ≤ capacity / 2, so an empty ring takes it wherever head is.
 *     Chunks of one payload are consecutive: nothing is written between them.
 *  5. A frame taken by write() is never dropped or reordered: while the spill
 *     queue is non-empty, new frames queue behind it. A writer with spilled frames
 *     sets WAITING and waits on HEAD; a drain that moved HEAD clears it and notifies.
 *  6. With a `mark` option, SPILLED / SPILL_MARK tell the reader what is still to come:
 *     the mark of the oldest spilled frame, updated before write() returns and after
 *     frames move into the ring (so a reader that sees a newer mark, or none, sees the
 *     frames that left the spill queue in the ring).
 */
import {
  ALIGN, CAPACITY, CHUNK, CHUNK_START, CHUNK_START_PREFIX, FRAME_HEADER_BYTES, HEAD,
  HEADER_BYTES, MAX_CAPACITY, MIN_CAPACITY, RESERVED_TYPE_MIN, SPILL_MARK, SPILLED, TAIL, WAITING, WRAP,
} from './layout';
import { waitAsync } from './doorbell';
import { SpillBudget } from './spill';

type RingErrorCode = 'RING_ERR_CAPACITY' | 'RING_ERR_BUFFER' | 'RING_ERR_TYPE' | 'RING_ERR_CORRUPT';
export class RingError extends Error {
  override name = 'RingError';
  constructor(readonly code: RingErrorCode, message: string) { super(message); }
}

const frameBytes = (n: number): number => (FRAME_HEADER_BYTES + n + ALIGN - 1) & -ALIGN;

/** Allocates header + data area; capacity is rounded up to a power of two ≥ 4096. */
export function createRingBuffer(capacityBytes: number): SharedArrayBuffer {
  if (!(capacityBytes > 0 && capacityBytes <= MAX_CAPACITY)) {
    throw new RingError('RING_ERR_CAPACITY', `ring capacity must be in (0, ${MAX_CAPACITY}] bytes, got ${capacityBytes}`);
  }
  let capacity = MIN_CAPACITY;
  while (capacity < capacityBytes) capacity *= 2;
  const sab = new SharedArrayBuffer(HEADER_BYTES + capacity);
  new Int32Array(sab)[CAPACITY] = capacity;
  return sab;
}

/** What both ends share: views of the buffer and its geometry. */
abstract class RingEnd {
  protected readonly i32: Int32Array;
  protected readonly u8: Uint8Array;
  protected readonly capacity: number;
  protected readonly mask: number;

  constructor(sab: SharedArrayBuffer) {
    const capacity = sab.byteLength >= HEADER_BYTES ? Atomics.load(new Int32Array(sab, 0, 2), CAPACITY) : 0;
    if (capacity < MIN_CAPACITY || (capacity & (capacity - 1)) !== 0 || sab.byteLength !== HEADER_BYTES + capacity) {
      throw new RingError('RING_ERR_BUFFER', 'not a ring buffer: use createRingBuffer()');
    }
    this.capacity = capacity;
    this.mask = capacity - 1;
    this.i32 = new Int32Array(sab);
    this.u8 = new Uint8Array(sab);
  }
}

interface Spilled { type: number; bytes: Uint8Array; done: number; /* bytes already in the ring (chunked) */ }

export interface RingWriterOptions {
  maxSpillBytes?: number; // bound of the spill queue (payload + 5 bytes per frame) when no budget is given; default 64 MiB
  budget?: SpillBudget; // shared by the writers of one thread (bus/spill.ts): bounds their spill queues together
  onWritten?: () => void; // called (synchronously) after write()/flushSpill() made ≥ 1 frame visible
  mark?: (payload: Uint8Array) => number; // an Int32 the reader sees for the oldest spilled frame (invariant 6)
}

export class RingWriter extends RingEnd {
  // field initialisers run after super(), so the views and capacity are set
  private readonly maxWhole = this.capacity / 2 - FRAME_HEADER_BYTES - (ALIGN - 1); // largest one-frame payload
  private readonly chunkPayload = this.capacity / 4 - FRAME_HEADER_BYTES - (ALIGN - 1);
  private readonly budget: SpillBudget;
  private readonly onWritten: (() => void) | undefined;
  private tail = Atomics.load(this.i32, TAIL) >>> 0;
  private head = Atomics.load(this.i32, HEAD) >>> 0; // last HEAD seen; reloaded only when the ring looks full
  private spill: (Spilled | undefined)[] = [];
  private spillAt = 0;
  private spilled = 0;
  private timer: NodeJS.Timeout | null = null;
  private immediate: NodeJS.Immediate | null = null;
  private waiting = false; // an Atomics.waitAsync on HEAD is pending
  private closed = false;
  private readonly markOf: ((payload: Uint8Array) => number) | undefined;
  private marked: Spilled | null = null; // the spilled frame whose mark is published

  constructor(sab: SharedArrayBuffer, opts: RingWriterOptions = {}) {
    super(sab);
    this.budget = opts.budget ?? new SpillBudget(opts.maxSpillBytes ?? 64 * 1024 * 1024);
    this.onWritten = opts.onWritten;
    this.markOf = opts.mark;
  }

  get spilledBytes(): number { return this.spilled; }
  get spilledFrames(): number { return this.spill.length - this.spillAt; }

  /**
   * Whether write() of a payload of n bytes would take it now. May move spilled frames
   * into the ring first (as write() would); lets a caller that writes one frame to several
   * rings refuse it everywhere or nowhere.
   */
  wouldTake(n: number): boolean {
    if (this.spillAt < this.spill.length) this.flushSpill();
    if (this.spilled === 0 && n <= this.maxWhole) {
      const fb = frameBytes(n);
      const toEnd = this.capacity - (this.tail & this.mask);
      const need = fb <= toEnd ? fb : toEnd + fb;
      this.head = Atomics.load(this.i32, HEAD) >>> 0;
      if (need <= this.capacity - ((this.tail - this.head) >>> 0)) return true;
    }
    return this.budget.promise(this, n + FRAME_HEADER_BYTES);
  }

  /**
   * wouldTake() for several frames: whether write() of payloads of these lengths, one
   * after the other with nothing written in between, would take every one of them now.
   * Simulates the writes (into the ring while they fit and nothing is spilled, then into
   * the spill queue); the reader only ever frees room, so a true answer holds until this
   * writer writes something else.
   */
  wouldTakeAll(lengths: readonly number[]): boolean {
    if (this.spillAt < this.spill.length) this.flushSpill();
    this.head = Atomics.load(this.i32, HEAD) >>> 0;
    let tail = this.tail;
    let spilled = 0; // of these frames
    for (const n of lengths) {
      if (this.spilled === 0 && spilled === 0 && n <= this.maxWhole) {
        const fb = frameBytes(n);
        const toEnd = this.capacity - (tail & this.mask);
        const need = fb <= toEnd ? fb : toEnd + fb;
        if (need <= this.capacity - ((tail - this.head) >>> 0)) {
          tail = (tail + need) >>> 0;
          continue;
        }
      }
      spilled += n + FRAME_HEADER_BYTES;
    }
    return spilled === 0 || this.budget.promise(this, spilled);
  }

  /**
   * Enqueues a frame; the payload is copied, so the caller may reuse it at once. Returns
   * false (frame not taken) only when it does not go straight into the ring as one frame
   * and its length + 5 more spilled bytes would pass the spill budget (bus/spill.ts). Chunked payloads (frame >
   * capacity / 2) always pass through the spill queue: copied once, streamed as room frees.
   */
  write(type: number, payload: Uint8Array): boolean {
    if (!(type >= 0 && type < RESERVED_TYPE_MIN && type === (type | 0))) {
      throw new RingError('RING_ERR_TYPE', `frame type must be an integer in [0, ${RESERVED_TYPE_MIN - 1}], got ${type}`);
    }
    const n = payload.length;
    if (n <= this.maxWhole && (this.spillAt === this.spill.length || this.flushSpill() === 0) && this.put(type, payload, 0, n, -1)) {
      this.onWritten?.();
      return true;
    }
    if (!this.budget.take(this, n + FRAME_HEADER_BYTES)) return false;
    this.spill.push({ type, bytes: new Uint8Array(payload), done: 0 });
    this.spilled += n + FRAME_HEADER_BYTES;
    this.flushSpill(); // starts streaming a chunked payload; arms the retry timer
    return true;
  }

  /** Moves spilled frames into the ring as space allows; returns the spilled bytes left. */
  flushSpill(): number {
    let wrote = false;
    while (this.spillAt < this.spill.length) {
      const e = this.spill[this.spillAt] as Spilled;
      const done = e.done;
      const all = this.advance(e);
      wrote ||= all || e.done > done;
      if (!all) { this.unspill(e.done - done); break; }
      this.unspill(e.bytes.length - done + FRAME_HEADER_BYTES);
      this.spill[this.spillAt++] = undefined;
    }
    if (this.spillAt === this.spill.length || (this.spillAt >= 1024 && this.spillAt * 2 >= this.spill.length)) {
      this.spill = this.spill.slice(this.spillAt); // drop taken entries; O(1) amortised
      this.spillAt = 0;
    }
    if (this.markOf !== undefined) this.publishMark();
    if (wrote) this.onWritten?.();
    this.arm();
    return this.spilled;
  }

  /**
   * Stops the retry timer; spilled frames stay queued (flushSpill() still moves them), but
   * the reader is no longer told to wait for them (SPILLED cleared).
   */
  close(): void {
    this.closed = true;
    this.cancel();
    if (this.marked !== null) Atomics.store(this.i32, SPILLED, 0);
    this.marked = null;
  }

  /**
   * close(), and the spilled frames dropped: their bytes go back to the budget (the ring's
   * reader is gone for good, e.g. a replaced thread).
   */
  discard(): void {
    this.close();
    this.budget.release(this.spilled);
    this.spilled = 0;
    this.spill = [];
    this.spillAt = 0;
  }

  private unspill(bytes: number): void {
    this.spilled -= bytes;
    this.budget.release(bytes);
  }

  /** Invariant 6: SPILL_MARK / SPILLED follow the head of the spill queue. */
  private publishMark(): void {
    if (this.closed) return;
    const head = this.spillAt < this.spill.length ? this.spill[this.spillAt] as Spilled : null;
    if (head === this.marked) return;
    if (head === null) {
      Atomics.store(this.i32, SPILLED, 0);
    } else {
      Atomics.store(this.i32, SPILL_MARK, this.markOf!(head.bytes) | 0);
      if (this.marked === null) Atomics.store(this.i32, SPILLED, 1);
    }
    this.marked = head;
  }

  private readonly retry = (): void => { this.cancel(); this.flushSpill(); };
  private readonly woken = (): void => { this.waiting = false; if (!this.closed) this.retry(); };
  private cancel(): void {
    clearTimeout(this.timer ?? undefined); clearImmediate(this.immediate ?? undefined);
    this.timer = this.immediate = null;
  }

  /**
   * While anything is spilled: Atomics.waitAsync on HEAD (the reader notifies after a drain
   * when WAITING is set), so a chunked payload streams at the reader's pace; plus a ref'ed
   * 1 ms timer, as a pending waitAsync keeps no thread alive and taken frames must not be
   * stranded. Nothing armed when empty.
   */
  private arm(): void {
    if (this.spilled === 0 || this.closed) return this.cancel();
    if (this.timer === null) this.timer = setTimeout(this.retry, 1);
    if (this.waiting || this.immediate !== null) return;
    Atomics.store(this.i32, WAITING, 1); // before the wait: a drain ending after this notifies
    const r = waitAsync(this.i32, HEAD, this.head | 0);
    if (r.async) { this.waiting = true; void r.value.then(this.woken); }
    else this.immediate = setImmediate(this.retry); // HEAD moved meanwhile: next turn, no spinning
  }

  /** Puts what fits of a spilled frame (chunk by chunk when big); true once all of it is in. */
  private advance(e: Spilled): boolean {
    const n = e.bytes.length;
    if (n <= this.maxWhole) return this.put(e.type, e.bytes, 0, n, -1);
    if (e.done === 0) {
      if (!this.put(e.type, e.bytes, 0, this.chunkPayload - CHUNK_START_PREFIX, n)) return false;
      e.done = this.chunkPayload - CHUNK_START_PREFIX;
    }
    for (let len; e.done < n; e.done += len) {
      len = Math.min(this.chunkPayload, n - e.done);
      if (!this.put(CHUNK, e.bytes, e.done, len, -1)) return false;
    }
    return true;
  }

  /** One frame of src[start, start + len), prefixed by [u32 total][u8 type] as CHUNK_START when total ≥ 0. */
  private put(type: number, src: Uint8Array, start: number, len: number, total: number): boolean {
    const n = total < 0 ? len : len + CHUNK_START_PREFIX;
    const fb = frameBytes(n);
    let tail = this.tail;
    const pos = tail & this.mask;
    const toEnd = this.capacity - pos;
    const need = fb <= toEnd ? fb : toEnd + fb;
    if (need > this.capacity - ((tail - this.head) >>> 0)) {
      this.head = Atomics.load(this.i32, HEAD) >>> 0;
      if (need > this.capacity - ((tail - this.head) >>> 0)) return false;
    }
    let at = HEADER_BYTES + pos;
    if (fb > toEnd) {
      this.i32[at >> 2] = WRAP;
      tail = (tail + toEnd) >>> 0;
      at = HEADER_BYTES;
    }
    const u8 = this.u8;
    this.i32[at >> 2] = 1 + n; // length word, then type byte
    let p = at + FRAME_HEADER_BYTES;
    u8[at + 4] = total < 0 ? type : CHUNK_START;
    if (total >= 0) {
      u8[p] = total; u8[p + 1] = total >>> 8; u8[p + 2] = total >>> 16; u8[p + 3] = total >>> 24; u8[p + 4] = type;
      p += CHUNK_START_PREFIX;
    }
    u8.set(start === 0 && len === src.length ? src : src.subarray(start, start + len), p);
    this.tail = (tail + fb) >>> 0;
    Atomics.store(this.i32, TAIL, this.tail);
    return true;
  }
}

export class RingReader extends RingEnd {
  private head = Atomics.load(this.i32, HEAD) >>> 0;

  /** The writer's mark of its oldest spilled frame (RingWriterOptions.mark), or null: nothing spilled. */
  spillMark(): number | null {
    return Atomics.load(this.i32, SPILLED) === 0 ? null : Atomics.load(this.i32, SPILL_MARK);
  }
  /** Nothing to read and nothing spilled: a drain() now would find no frame. */
  idle(): boolean {
    return (Atomics.load(this.i32, TAIL) >>> 0) === this.head && Atomics.load(this.i32, SPILLED) === 0;
  }
  private asm: Buffer | null = null; // chunked payload being reassembled
  private asmType = 0;
  private asmAt = 0;

  /**
   * Calls onFrame for every complete frame in the ring when drain starts, in order;
   * returns the count. The payload is a Buffer the callee owns (copied out of shared
   * memory; see bench/bus/ring.bench.ts for the cost). HEAD passes a frame before
   * onFrame sees it, so if onFrame throws, that frame counts as delivered and the
   * next drain() goes on with the following one.
   */
  drain(onFrame: (type: number, payload: Uint8Array) => void): number {
    const { i32, u8 } = this;
    const tail = Atomics.load(i32, TAIL) >>> 0;
    const start = this.head;
    let head = start;
    let count = 0;
    while (head !== tail) {
      const pos = head & this.mask;
      const at = HEADER_BYTES + pos;
      const len = i32[at >> 2];
      if (len === WRAP) { head = this.head = (head + this.capacity - pos) >>> 0; continue; }
      if (len < 1 || len > this.capacity - pos - 4) corrupt(`frame length ${len} at ${pos}`);
      const from = at + FRAME_HEADER_BYTES;
      const n = len - 1;
      let type = u8[at + 4];
      let payload: Buffer | null;
      if (type < RESERVED_TYPE_MIN) {
        payload = Buffer.allocUnsafe(n); // pooled below 4 KiB: the cheapest copy from 128 B up (bench)
        payload.set(u8.subarray(from, from + n));
      } else {
        payload = this.chunk(type, from, n);
        type = this.asmType;
      }
      head = this.head = (head + ((4 + len + ALIGN - 1) & -ALIGN)) >>> 0;
      Atomics.store(i32, HEAD, head); // per frame: frees room early; batching measured no faster
      if (payload !== null) { count++; onFrame(type, payload); }
    }
    if (head !== start && Atomics.load(i32, WAITING) !== 0) { // a writer waits for room
      Atomics.store(i32, WAITING, 0);
      Atomics.notify(i32, HEAD);
    }
    return count;
  }

  private chunk(type: number, from: number, n: number): Buffer | null {
    const u8 = this.u8;
    if (type === CHUNK_START) {
      if (this.asm !== null) corrupt('CHUNK_START inside a chunked frame');
      const total = (u8[from] | (u8[from + 1] << 8) | (u8[from + 2] << 16) | (u8[from + 3] << 24)) >>> 0;
      this.asm = Buffer.allocUnsafe(total);
      this.asmType = u8[from + 4];
      this.asmAt = 0;
      from += CHUNK_START_PREFIX;
      n -= CHUNK_START_PREFIX;
    } else if (type !== CHUNK || this.asm === null) {
      corrupt(type === CHUNK ? 'CHUNK without CHUNK_START' : `reserved frame type ${type}`);
    }
    const asm = this.asm;
    if (n > asm.length - this.asmAt) corrupt('chunks longer than their total');
    asm.set(u8.subarray(from, from + n), this.asmAt);
    this.asmAt += n;
    if (this.asmAt < asm.length) return null;
    this.asm = null;
    return asm;
  }
}

function corrupt(what: string): never {
  throw new RingError('RING_ERR_CORRUPT', `ring corrupt: ${what}`);
}
