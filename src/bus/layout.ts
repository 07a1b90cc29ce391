// Shared-memory layout of a ring (diagram and invariants: ring.ts).
// Int32 slot indices of the control header; HEAD and TAIL sit on separate
// 64-byte cache lines so the reader's and the writer's stores do not false-share.
export const HEAD = 0; // reader's byte counter (u32, wraps at 2^32); stored only by the reader
export const CAPACITY = 1; // data-area bytes (power of two); written once by createRingBuffer
export const TAIL = 16; // writer's byte counter (u32, wraps at 2^32); stored only by the writer
export const WAITING = 17; // 1: the writer has spilled frames and waits (Atomics.waitAsync) on HEAD;
//                           the reader clears it and notifies HEAD after a drain
export const SPILLED = 18; // 1 while the writer's spill queue is not empty (with RingWriterOptions.mark)
export const SPILL_MARK = 19; // mark(payload) of the oldest spilled frame; stored before SPILLED is set
export const HEADER_BYTES = 128; // data area starts here (two cache lines)

export const MIN_CAPACITY = 4096;
export const MAX_CAPACITY = 1 << 30; // must divide 2^32 so counter & (capacity - 1) survives wrapping
export const ALIGN = 4; // every frame starts 4-byte aligned: its length word is an aligned Int32
export const FRAME_HEADER_BYTES = 5; // u32 length (= 1 + payload bytes) + u8 type
export const WRAP = 0; // a length word of 0: the rest of the data area is padding, go on at offset 0

// Frame types >= RESERVED_TYPE_MIN belong to the ring.
export const RESERVED_TYPE_MIN = 250;
export const CHUNK_START = 254; // payload: u32 total length (LE), u8 user type, first bytes
export const CHUNK = 255; // payload: following bytes of the chunked frame
export const CHUNK_START_PREFIX = 5;

// Doorbell: one Int32 counter.
export const DOORBELL = 0;
export const DOORBELL_BYTES = 4;
