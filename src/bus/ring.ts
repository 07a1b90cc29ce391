/*
 * Single-producer / single-consumer byte ring on a SharedArrayBuffer.
 *
 *  byte 0        64            128                                 128 + capacity
 *  ┌────────────┬─────────────┬───────────────────────────────────────────┐
 *  │HEAD CAPACITY│TAIL         │ free │ frame │ frame │ frame │ free │WRAP…│
 *  └────────────┴─────────────┴──────▲───────────────────────▲───────────┘
 *   reader's line  writer's line     head & mask             tail & mask
 *                                    (next to read)          (next to write)
 *  frame = [u32 length = 1 + n][u8 type][n payload bytes][0..3 pad]
 *          → align4(5 + n) bytes.  WRAP = a length word of 0: the rest of the
 *          data area is padding, the next frame is at offset 0.
 *  chunked payload (frame > capacity / 2):
 *          [CHUNK_START: u32 total, u8 type, bytes…][CHUNK: bytes…]…  (each ≤ capacity / 4)
 *
 * Invariants
 *  1. HEAD and TAIL are free-running u32 byte counters; a position is counter &
 *     (capacity - 1). capacity is a power of two ≤ 2^30, so positions survive the
 *     2^32 wrap. used = (tail - head) >>> 0 ∈ [0, capacity]; head === tail ⇔ empty.
 *  2. Only the writer stores TAIL, only the reader stores HEAD (Atomics.store); each
 *     Atomics.loads the other's. Frame bytes are written before TAIL moves past them
 *     and copied out before HEAD moves past them; seq-cst atomics order the plain
 *     accesses around them (ES memory model: synchronizes-with).
 *  3. A frame is contiguous and starts 4-aligned, so its length word is an aligned
 *     Int32 and a payload is never split by the end of the area. The gap left at
 *     the end is ≥ 4 bytes (positions are 4-aligned) and starts with WRAP.
 *  4. A whole frame is ≤ capacity / 2, so an empty ring takes it wherever head is
 *     (the stretch after tail or the one before it has ≥ capacity / 2 bytes).
 *     Bigger payloads go as consecutive chunk frames ≤ capacity / 4, reassembled
 *     by the reader; nothing else is ever written between two chunks of a payload.
 *  5. A frame taken by write() is never dropped or reordered: while the writer's
 *     spill queue is non-empty, new frames queue behind it.
 */
import {
  ALIGN, CAPACITY, CHUNK, CHUNK_START, CHUNK_START_PREFIX, FRAME_HEADER_BYTES, HEAD,
  HEADER_BYTES, MAX_CAPACITY, MIN_CAPACITY, RESERVED_TYPE_MIN, TAIL, WRAP,
} from './layout'

export class RingError extends Error {
  constructor(readonly code: 'RING_ERR_CAPACITY' | 'RING_ERR_BUFFER' | 'RING_ERR_TYPE' | 'RING_ERR_CORRUPT', message: string) {
    super(message)
    this.name = 'RingError'
  }
}

const frameBytes = (n: number): number => (FRAME_HEADER_BYTES + n + ALIGN - 1) & -ALIGN

/** Allocates header + data area; capacity is rounded up to a power of two ≥ 4096. */
export function createRingBuffer(capacityBytes: number): SharedArrayBuffer {
  if (!(capacityBytes > 0 && capacityBytes <= MAX_CAPACITY)) {
    throw new RingError('RING_ERR_CAPACITY', `ring capacity must be in (0, ${MAX_CAPACITY}] bytes, got ${capacityBytes}`)
  }
  let capacity = MIN_CAPACITY
  while (capacity < capacityBytes) capacity *= 2
  const sab = new SharedArrayBuffer(HEADER_BYTES + capacity)
  new Int32Array(sab)[CAPACITY] = capacity
  return sab
}

function capacityOf(sab: SharedArrayBuffer): number {
  const capacity = sab.byteLength >= HEADER_BYTES ? Atomics.load(new Int32Array(sab, 0, 2), CAPACITY) : 0
  if (capacity < MIN_CAPACITY || (capacity & (capacity - 1)) !== 0 || sab.byteLength !== HEADER_BYTES + capacity) {
    throw new RingError('RING_ERR_BUFFER', 'not a ring buffer: use createRingBuffer()')
  }
  return capacity
}

interface Spilled { type: number; bytes: Uint8Array; done: number /* payload bytes already in the ring (chunked) */ }

export interface RingWriterOptions {
  /** Bound of the spill queue (payload + 5 bytes per frame); default 64 MiB. */
  maxSpillBytes?: number
  /** Called (synchronously) after a write()/flushSpill() made ≥ 1 frame visible to the reader. */
  onWritten?: () => void
}

export class RingWriter {
  private readonly i32: Int32Array
  private readonly u8: Uint8Array
  private readonly capacity: number
  private readonly mask: number
  private readonly maxWhole: number // largest payload sent as one frame
  private readonly chunkPayload: number // payload bytes of one chunk frame
  private readonly maxSpill: number
  private readonly onWritten: (() => void) | undefined
  private tail: number
  private head: number // last HEAD seen; reloaded only when the ring looks full
  private spill: (Spilled | undefined)[] = []
  private spillAt = 0
  private spilled = 0
  private timer: NodeJS.Timeout | null = null
  private immediate: NodeJS.Immediate | null = null
  private closed = false

  constructor(sab: SharedArrayBuffer, opts: RingWriterOptions = {}) {
    this.capacity = capacityOf(sab)
    this.mask = this.capacity - 1
    this.i32 = new Int32Array(sab)
    this.u8 = new Uint8Array(sab)
    this.maxWhole = this.capacity / 2 - FRAME_HEADER_BYTES - (ALIGN - 1)
    this.chunkPayload = this.capacity / 4 - FRAME_HEADER_BYTES - (ALIGN - 1)
    this.maxSpill = opts.maxSpillBytes ?? 64 * 1024 * 1024
    this.onWritten = opts.onWritten
    this.tail = Atomics.load(this.i32, TAIL) >>> 0
    this.head = Atomics.load(this.i32, HEAD) >>> 0
  }

  get spilledBytes(): number { return this.spilled }
  get spilledFrames(): number { return this.spill.length - this.spillAt }

  /**
   * Enqueues a frame; the payload is copied (into the ring, or into the spill
   * queue), so the caller may reuse it at once. Returns false — frame not taken —
   * only when it cannot go straight into the ring and spilledBytes + payload + 5
   * would pass maxSpillBytes (a payload bigger than that bound is therefore taken
   * only if the ring has room for all of it now).
   */
  write(type: number, payload: Uint8Array): boolean {
    if (!(type >= 0 && type < RESERVED_TYPE_MIN && type === (type | 0))) {
      throw new RingError('RING_ERR_TYPE', `frame type must be an integer in [0, ${RESERVED_TYPE_MIN - 1}], got ${type}`)
    }
    if (this.spillAt !== this.spill.length) this.flushSpill()
    const n = payload.length
    const over = this.spilled + n + FRAME_HEADER_BYTES > this.maxSpill
    if (this.spillAt === this.spill.length) {
      if (n <= this.maxWhole) {
        if (this.put(type, payload, 0, n, -1)) {
          this.onWritten?.()
          return true
        }
      } else if (!over) {
        const done = this.putChunks(type, payload, 0)
        if (done > 0) this.onWritten?.()
        if (done === n) return true
        this.enqueue({ type, bytes: new Uint8Array(payload), done })
        return true
      }
    }
    if (over) return false
    this.enqueue({ type, bytes: new Uint8Array(payload), done: 0 })
    return true
  }

  /** Moves spilled frames into the ring as space allows; returns the spilled bytes left. */
  flushSpill(): number {
    let wrote = false
    while (this.spillAt < this.spill.length) {
      const e = this.spill[this.spillAt] as Spilled
      const n = e.bytes.length
      if (n <= this.maxWhole) {
        if (!this.put(e.type, e.bytes, 0, n, -1)) break
        this.spilled -= n + FRAME_HEADER_BYTES
      } else {
        const before = e.done
        e.done = this.putChunks(e.type, e.bytes, before)
        this.spilled -= e.done - before
        wrote ||= e.done > before
        if (e.done < n) break
        this.spilled -= FRAME_HEADER_BYTES
      }
      wrote = true
      this.spill[this.spillAt++] = undefined
    }
    if (this.spillAt === this.spill.length) {
      this.spill = []
      this.spillAt = 0
    } else if (this.spillAt >= 1024 && this.spillAt * 2 >= this.spill.length) {
      this.spill = this.spill.slice(this.spillAt)
      this.spillAt = 0
    }
    if (wrote) this.onWritten?.()
    this.arm(wrote)
    return this.spilled
  }

  /** Stops the retry timer; spilled frames stay queued (flushSpill() still moves them). */
  close(): void {
    this.closed = true
    this.cancel()
  }

  private readonly retry = (): void => {
    this.timer = this.immediate = null
    this.flushSpill()
  }

  private enqueue(e: Spilled): void {
    this.spill.push(e)
    this.spilled += e.bytes.length - e.done + FRAME_HEADER_BYTES
    this.arm(false)
  }

  /**
   * Retry timer, ref'ed while anything is spilled (a thread must not exit with taken
   * frames), gone when empty. After a flush that made progress the reader is
   * draining, so retry next turn (setImmediate: a big chunked payload streams at
   * ring speed, not one ring-full per ms); else poll every 1 ms, never spin.
   */
  private arm(progress: boolean): void {
    if (this.spilled === 0 || this.closed) this.cancel()
    else if (this.timer === null && this.immediate === null) {
      if (progress) this.immediate = setImmediate(this.retry)
      else this.timer = setTimeout(this.retry, 1)
    }
  }

  private cancel(): void {
    if (this.timer !== null) clearTimeout(this.timer)
    if (this.immediate !== null) clearImmediate(this.immediate)
    this.timer = this.immediate = null
  }

  /** Writes as many chunk frames of bytes[done..] as fit; returns the new done. */
  private putChunks(type: number, bytes: Uint8Array, done: number): number {
    const n = bytes.length
    if (done === 0) {
      if (!this.put(type, bytes, 0, this.chunkPayload - CHUNK_START_PREFIX, n)) return 0
      done = this.chunkPayload - CHUNK_START_PREFIX
    }
    while (done < n) {
      const len = Math.min(this.chunkPayload, n - done)
      if (!this.put(CHUNK, bytes, done, len, -1)) break
      done += len
    }
    return done
  }

  /** One frame of src[start, start + len), prefixed by [u32 total][u8 type] as CHUNK_START when total ≥ 0. */
  private put(type: number, src: Uint8Array, start: number, len: number, total: number): boolean {
    const n = total < 0 ? len : len + CHUNK_START_PREFIX
    const fb = frameBytes(n)
    let tail = this.tail
    const pos = tail & this.mask
    const toEnd = this.capacity - pos
    const need = fb <= toEnd ? fb : toEnd + fb
    if (need > this.capacity - ((tail - this.head) >>> 0)) {
      this.head = Atomics.load(this.i32, HEAD) >>> 0
      if (need > this.capacity - ((tail - this.head) >>> 0)) return false
    }
    let at = HEADER_BYTES + pos
    if (fb > toEnd) {
      this.i32[at >> 2] = WRAP
      tail = (tail + toEnd) >>> 0
      at = HEADER_BYTES
    }
    const u8 = this.u8
    this.i32[at >> 2] = 1 + n
    let p = at + FRAME_HEADER_BYTES
    if (total >= 0) {
      u8[at + 4] = CHUNK_START
      u8[p] = total; u8[p + 1] = total >>> 8; u8[p + 2] = total >>> 16; u8[p + 3] = total >>> 24
      u8[p + 4] = type
      p += CHUNK_START_PREFIX
    } else {
      u8[at + 4] = type
    }
    if (len <= 32) {
      // byte loop: cheaper than set()/subarray() for small frames (bench/bus/ring.bench.ts)
      for (let i = 0; i < len; i++) u8[p + i] = src[start + i]
    } else {
      u8.set(start === 0 && len === src.length ? src : src.subarray(start, start + len), p)
    }
    this.tail = (tail + fb) >>> 0
    Atomics.store(this.i32, TAIL, this.tail)
    return true
  }
}

export class RingReader {
  private readonly i32: Int32Array
  private readonly u8: Uint8Array
  private readonly buf: Buffer
  private readonly capacity: number
  private readonly mask: number
  private head: number
  private asm: Buffer | null = null // chunked payload being reassembled
  private asmType = 0
  private asmAt = 0

  constructor(sab: SharedArrayBuffer) {
    this.capacity = capacityOf(sab)
    this.mask = this.capacity - 1
    this.i32 = new Int32Array(sab)
    this.u8 = new Uint8Array(sab)
    this.buf = Buffer.from(sab)
    this.head = Atomics.load(this.i32, HEAD) >>> 0
  }

  /**
   * Calls onFrame for every complete frame in the ring when drain starts, in order;
   * returns the count. The payload is a Buffer the callee owns (copied out of shared
   * memory; see bench/bus/ring.bench.ts for the cost). HEAD passes a frame before
   * onFrame sees it, so if onFrame throws, that frame counts as delivered and the
   * next drain() goes on with the following one.
   */
  drain(onFrame: (type: number, payload: Uint8Array) => void): number {
    const { i32, u8, buf } = this
    const tail = Atomics.load(i32, TAIL) >>> 0
    let head = this.head
    let count = 0
    while (head !== tail) {
      const pos = head & this.mask
      const at = HEADER_BYTES + pos
      const len = i32[at >> 2]
      if (len === WRAP) {
        head = (head + this.capacity - pos) >>> 0
        this.head = head
        continue
      }
      if (len < 1 || len > this.capacity - pos - 4) this.corrupt(`frame length ${len} at ${pos}`)
      const from = at + FRAME_HEADER_BYTES
      const n = len - 1
      let type = u8[at + 4]
      let payload: Buffer | null
      if (type < RESERVED_TYPE_MIN) {
        payload = Buffer.allocUnsafe(n)
        if (n <= 256) payload.set(u8.subarray(from, from + n))
        else buf.copy(payload, 0, from, from + n)
      } else {
        payload = this.chunk(type, from, n)
        type = this.asmType
      }
      head = (head + ((4 + len + ALIGN - 1) & -ALIGN)) >>> 0
      this.head = head
      Atomics.store(i32, HEAD, head)
      if (payload !== null) {
        count++
        onFrame(type, payload)
      }
    }
    return count
  }

  private chunk(type: number, from: number, n: number): Buffer | null {
    const u8 = this.u8
    if (type === CHUNK_START) {
      if (this.asm !== null) this.corrupt('CHUNK_START inside a chunked frame')
      const total = (u8[from] | (u8[from + 1] << 8) | (u8[from + 2] << 16) | (u8[from + 3] << 24)) >>> 0
      this.asm = Buffer.allocUnsafe(total)
      this.asmType = u8[from + 4]
      this.asmAt = 0
      from += CHUNK_START_PREFIX
      n -= CHUNK_START_PREFIX
    } else if (type !== CHUNK || this.asm === null) {
      this.corrupt(type === CHUNK ? 'CHUNK without CHUNK_START' : `reserved frame type ${type}`)
    }
    const asm = this.asm as Buffer
    if (n > asm.length - this.asmAt) this.corrupt('chunks longer than their total')
    this.buf.copy(asm, this.asmAt, from, from + n)
    this.asmAt += n
    if (this.asmAt < asm.length) return null
    this.asm = null
    return asm
  }

  private corrupt(what: string): never {
    throw new RingError('RING_ERR_CORRUPT', `ring corrupt: ${what}`)
  }
}
