// The ring mesh of a process: one SPSC ring per ordered pair of threads, one doorbell
// per thread, one stamp counter (see bus.ts for how a thread uses its end of it).

export interface BusTopology {
  threads: number;
  /** rings[from][to]; null on the diagonal. */
  rings: (SharedArrayBuffer | null)[][];
  doorbells: SharedArrayBuffer[];
  /** One Int32: the process-wide frame stamp counter (wraps; compared modulo 2^32). */
  clock: SharedArrayBuffer;
  maxSpillBytes: number;
}

/** Allocates the ring mesh and doorbells for `threads` threads. */
export function createTopology(
  threads: number,
  ringBytes: number,
  maxSpillBytes: number,
  createRing: (bytes: number) => SharedArrayBuffer,
  createBell: () => SharedArrayBuffer,
): BusTopology {
  const rings: (SharedArrayBuffer | null)[][] = [];
  for (let from = 0; from < threads; from++) {
    const row: (SharedArrayBuffer | null)[] = [];
    for (let to = 0; to < threads; to++) row.push(from === to ? null : createRing(ringBytes));
    rings.push(row);
  }
  const doorbells = Array.from({ length: threads }, () => createBell());
  return { threads, rings, doorbells, clock: new SharedArrayBuffer(4), maxSpillBytes };
}
