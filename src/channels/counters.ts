// Process-wide connection counts per app, shared by every shard through one
// SharedArrayBuffer and updated with Atomics: max_connections holds across shards
// without a message round trip.

export class ConnectionCounters {
  private readonly counts: Int32Array;

  static allocate(apps: number): SharedArrayBuffer {
    return new SharedArrayBuffer(Math.max(1, apps) * 4);
  }

  constructor(sab: SharedArrayBuffer) {
    this.counts = new Int32Array(sab);
  }

  /** Takes a connection slot; false (nothing taken) when the app is at `max`. */
  tryAcquire(appIdx: number, max: number | null): boolean {
    const after = Atomics.add(this.counts, appIdx, 1) + 1;
    if (max !== null && after > max) {
      Atomics.sub(this.counts, appIdx, 1);
      return false;
    }
    return true;
  }

  release(appIdx: number): void {
    Atomics.sub(this.counts, appIdx, 1);
  }

  get(appIdx: number): number {
    return Atomics.load(this.counts, appIdx);
  }
}
