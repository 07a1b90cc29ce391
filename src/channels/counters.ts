// Process-wide connection counts per app, shared by every shard through one
// SharedArrayBuffer and updated with Atomics: max_connections holds across shards
// without a message round trip.
//
// In a cluster the buffer has a second row: per app, the connections the other nodes
// last reported (written by the primary, adapter/connections.ts). A connection is
// admitted when this process's count plus that row stays within max_connections.

export class ConnectionCounters {
  private readonly counts: Int32Array;
  private readonly apps: number;

  static allocate(apps: number): SharedArrayBuffer {
    // + 1: this process's connections of every app together (limits.max_connections)
    return new SharedArrayBuffer((Math.max(1, apps) * 2 + 1) * 4);
  }

  constructor(sab: SharedArrayBuffer) {
    this.counts = new Int32Array(sab);
    this.apps = (this.counts.length - 1) / 2;
  }

  /** Takes one of this process's `max` connection slots (all apps); false when they are all taken. */
  tryAcquireNode(max: number): boolean {
    const total = this.apps * 2;
    if (Atomics.add(this.counts, total, 1) + 1 > max) {
      Atomics.sub(this.counts, total, 1);
      return false;
    }
    return true;
  }

  releaseNode(): void {
    Atomics.sub(this.counts, this.apps * 2, 1);
  }

  /** Takes a connection slot; false (nothing taken) when the app is at `max` (over the cluster). */
  tryAcquire(appIdx: number, max: number | null): boolean {
    const after = Atomics.add(this.counts, appIdx, 1) + 1;
    if (max !== null && after + Atomics.load(this.counts, this.apps + appIdx) > max) {
      Atomics.sub(this.counts, appIdx, 1);
      return false;
    }
    return true;
  }

  release(appIdx: number): void {
    Atomics.sub(this.counts, appIdx, 1);
  }

  /** This process's connections of the app. */
  get(appIdx: number): number {
    return Atomics.load(this.counts, appIdx);
  }

  /** The other nodes' connections of the app (cluster; 0 on a single node). */
  remote(appIdx: number): number {
    return Atomics.load(this.counts, this.apps + appIdx);
  }

  setRemote(appIdx: number, n: number): void {
    Atomics.store(this.counts, this.apps + appIdx, n);
  }
}
