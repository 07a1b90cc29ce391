// The ring mesh of a process: one SPSC ring per ordered pair of threads, one doorbell
// per thread, one stamp counter (see bus.ts for how a thread uses its end of it).
//
// Ring size. Unless set (bus.ring_bytes), each thread gets RING_BYTES_PER_THREAD of
// incoming ring in all, split over its T − 1 peers: the largest power of two ≤ 4 MiB /
// (T − 1), between 32 KiB and 256 KiB. So the mesh grows as 4 MiB × T, not as T²:
//
//   threads   5      9      17      18      33       34      65       129
//   ring      256K   256K   256K    128K    128K     64K     64K      32K
//   mesh      5 MiB  18     68      38      132      70      260      516
//
// Measured in docs/benchmarks.md ("Ring memory at 16–32 threads"): a mesh is fully
// resident once traffic has passed over every ring; 128 KiB rings carry mixed publishes
// nearly as fast as 256 KiB ones, 64 KiB at about 0.6–0.7×; below that size bursts go
// to the writers' spill queues (JS heap) instead.

export interface BusTopology {
  threads: number;
  /** The shards are threads 0 … shards − 1 (publishAll's targets); the primary is thread `shards`. */
  shards: number;
  /** Requested size of each ring (bus.ring_bytes, or ringBytesFor(threads)); createRingBuffer rounds it up to a power of two. */
  ringBytes: number;
  /** rings[from][to]; null on the diagonal. */
  rings: (SharedArrayBuffer | null)[][];
  doorbells: SharedArrayBuffer[];
  /** One Int32: the process-wide frame stamp counter (wraps; compared modulo 2^32). */
  clock: SharedArrayBuffer;
  /** bus.max_spill_bytes: each thread's spill budget, all its outgoing rings together (spill.ts). */
  maxSpillBytes: number;
}

/** Incoming ring bytes per thread, in all, when bus.ring_bytes is not set. */
export const RING_BYTES_PER_THREAD = 4 * 1024 * 1024;
export const AUTO_RING_MAX = 256 * 1024;
export const AUTO_RING_MIN = 32 * 1024;

/** The ring size for a mesh of `threads` threads when bus.ring_bytes is not set (see top). */
export function ringBytesFor(threads: number): number {
  if (!(Number.isInteger(threads) && threads >= 1)) throw new RangeError(`threads must be a positive integer, got ${threads}`);
  const share = RING_BYTES_PER_THREAD / Math.max(1, threads - 1);
  let bytes = AUTO_RING_MAX;
  while (bytes > share && bytes > AUTO_RING_MIN) bytes /= 2;
  return bytes;
}

/** Allocates the ring mesh and doorbells for `threads` threads; ringBytes null: ringBytesFor(threads). */
export function createTopology(
  threads: number,
  ringBytes: number | null,
  maxSpillBytes: number,
  createRing: (bytes: number) => SharedArrayBuffer,
  createBell: () => SharedArrayBuffer,
  shards = threads - 1,
): BusTopology {
  const bytes = ringBytes ?? ringBytesFor(threads);
  const rings: (SharedArrayBuffer | null)[][] = [];
  for (let from = 0; from < threads; from++) {
    const row: (SharedArrayBuffer | null)[] = [];
    for (let to = 0; to < threads; to++) row.push(from === to ? null : createRing(bytes));
    rings.push(row);
  }
  const doorbells = Array.from({ length: threads }, () => createBell());
  return { threads, shards, ringBytes: bytes, rings, doorbells, clock: new SharedArrayBuffer(4), maxSpillBytes };
}
