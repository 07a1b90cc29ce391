/*
 * PROTOTYPE for bench/bus/mpsc.bench.ts only: a multi-producer / single-consumer ring, to
 * measure what one ring per consumer would cost against one SPSC ring per pair
 * (docs/benchmarks.md, "Ring memory at 16–32 threads"). Not used by the server.
 *
 *  0              64                128                      128 + capacity
 *  ┌──────────────┬─────────────────┬──────────────────────────────────────┐
 *  │HEAD CAPACITY │TAIL (reserved)  │ free │ frame │ frame? │ frame │ free │
 *  └──────────────┴─────────────────┴──────────────────────────────────────┘
 *  frame  [i32 length = 1 + n, 0 until committed][u8 type][n bytes][pad to 4]
 *  WRAP   length −1: the rest of the area is padding (committed with the frame after it)
 *
 *  - A producer reserves room with a compareExchange loop on TAIL (it must see HEAD to
 *    know the room, and a wrap needs the padding reserved with the frame), copies its
 *    payload, then commits by storing the length word.
 *  - The reader goes from HEAD while length words are non-zero, copies each frame out and
 *    zeroes the bytes it passed (a later frame's length word may land anywhere in them),
 *    then stores HEAD. A zero word where TAIL says a frame is: a producer reserved and has
 *    not committed yet (preempted, say) — the reader must stop there ("stall") and every
 *    frame reserved after it waits too.
 *  - No spill queue and no chunking here (frames ≤ capacity / 2; full → write() false;
 *    the caller may set WAITING and wait on HEAD: the reader notifies, as in ring.ts).
 */
const HEAD = 0;
const CAPACITY = 1;
const TAIL = 16;
const WAITING = 17; // a producer found the ring full and waits on HEAD (as in ring.ts)
const HEADER_BYTES = 128;
const WRAP = -1;

const frameBytes = (n: number): number => (5 + n + 3) & -4;

export function createMpscRing(capacity: number): SharedArrayBuffer {
  const sab = new SharedArrayBuffer(HEADER_BYTES + capacity);
  new Int32Array(sab)[CAPACITY] = capacity;
  return sab;
}

export class MpscWriter {
  private readonly i32: Int32Array;
  private readonly u8: Uint8Array;
  private readonly capacity: number;
  private readonly mask: number;
  /** compareExchange attempts lost to another producer (contention). */
  retries = 0;

  constructor(sab: SharedArrayBuffer) {
    this.i32 = new Int32Array(sab);
    this.u8 = new Uint8Array(sab);
    this.capacity = this.i32[CAPACITY];
    this.mask = this.capacity - 1;
  }

  write(type: number, payload: Uint8Array): boolean {
    const n = payload.length;
    const fb = frameBytes(n);
    let tail: number;
    let pos: number;
    let need: number;
    for (;;) {
      tail = Atomics.load(this.i32, TAIL) >>> 0;
      const head = Atomics.load(this.i32, HEAD) >>> 0;
      pos = tail & this.mask;
      const toEnd = this.capacity - pos;
      need = fb <= toEnd ? fb : toEnd + fb;
      if (need > this.capacity - ((tail - head) >>> 0)) return false;
      if ((Atomics.compareExchange(this.i32, TAIL, tail | 0, (tail + need) | 0) >>> 0) === tail) break;
      this.retries++;
    }
    let at = HEADER_BYTES + pos;
    if (need !== fb) { // wrap: padding to the end, frame at 0
      Atomics.store(this.i32, at >> 2, WRAP);
      at = HEADER_BYTES;
    }
    this.u8[at + 4] = type;
    this.u8.set(payload, at + 5);
    Atomics.store(this.i32, at >> 2, 1 + n); // commit
    return true;
  }
}

export class MpscReader {
  private readonly i32: Int32Array;
  private readonly u8: Uint8Array;
  private readonly capacity: number;
  private readonly mask: number;
  private head: number;
  /** Drains that stopped at a reserved, uncommitted frame. */
  stalls = 0;

  constructor(sab: SharedArrayBuffer) {
    this.i32 = new Int32Array(sab);
    this.u8 = new Uint8Array(sab);
    this.capacity = this.i32[CAPACITY];
    this.mask = this.capacity - 1;
    this.head = Atomics.load(this.i32, HEAD) >>> 0;
  }

  drain(onFrame: (type: number, payload: Uint8Array) => void): number {
    const start = this.head;
    let count = 0;
    for (;;) {
      const pos = this.head & this.mask;
      const at = HEADER_BYTES + pos;
      const len = Atomics.load(this.i32, at >> 2);
      if (len === 0) {
        if ((Atomics.load(this.i32, TAIL) >>> 0) !== this.head) this.stalls++;
        break;
      }
      let step: number;
      if (len === WRAP) {
        step = this.capacity - pos;
        this.u8.fill(0, at, at + 4);
      } else {
        const n = len - 1;
        const type = this.u8[at + 4];
        const payload = Buffer.allocUnsafe(n);
        payload.set(this.u8.subarray(at + 5, at + 5 + n));
        step = frameBytes(n);
        this.u8.fill(0, at, at + step); // a later length word may fall anywhere in here
        count++;
        onFrame(type, payload);
      }
      this.head = (this.head + step) >>> 0;
      Atomics.store(this.i32, HEAD, this.head);
    }
    if (this.head !== start && Atomics.load(this.i32, WAITING) !== 0) {
      Atomics.store(this.i32, WAITING, 0);
      Atomics.notify(this.i32, HEAD);
    }
    return count;
  }
}
