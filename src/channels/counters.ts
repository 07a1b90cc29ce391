// Process-wide connection counts per app, shared by every shard through one
// SharedArrayBuffer and updated with Atomics: max_connections holds across shards
// without a message round trip.
//
// In a cluster the buffer has a second row: per app, the connections the other nodes
// last reported (written by the primary, adapter/connections.ts). A connection is
// admitted when this process's count plus that row stays within max_connections.
//
// After them, connections per client address (limits.max_connections_per_ip) in a
// count-min sketch: ADDRESS_ROWS rows of ADDRESS_WIDTH counters, an address adds one to a
// counter of each row (chosen by two hashes of it) and its count is the smallest of those.
// Fixed memory (512 KiB) however many addresses connect; two addresses share a count only
// when they meet in every row (about one pair in 4·10⁹), and then only err towards refusing.

const ADDRESS_WIDTH = 65_536;
const ADDRESS_ROWS = 2;
const ADDRESS_INTS = ADDRESS_WIDTH * ADDRESS_ROWS;

/** FNV-1a of the address text, 32 bits. */
function addressHash(ip: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < ip.length; i++) h = Math.imul(h ^ ip.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

export class ConnectionCounters {
  private readonly counts: Int32Array;
  private readonly addresses: Int32Array;
  private readonly apps: number;
  /** This thread's connections counted per address: socket_id → the address's hash (releaseAddress). */
  private readonly byAddress = new Map<string, number>();

  static allocate(apps: number): SharedArrayBuffer {
    // + 1: this process's connections of every app together (limits.max_connections)
    return new SharedArrayBuffer((Math.max(1, apps) * 2 + 1 + ADDRESS_INTS) * 4);
  }

  constructor(sab: SharedArrayBuffer) {
    const all = new Int32Array(sab);
    this.counts = all.subarray(0, all.length - ADDRESS_INTS);
    this.addresses = all.subarray(all.length - ADDRESS_INTS);
    this.apps = (this.counts.length - 1) / 2;
  }

  /** The sketch counters of an address's hash, one per row. */
  private cells(h: number): [number, number] {
    // the second row's index from a mix of the hash (murmur3's finalizer), not from its other bits alone
    let m = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
    m = Math.imul(m ^ (m >>> 13), 0xc2b2ae35);
    m = (m ^ (m >>> 16)) >>> 0;
    return [h & (ADDRESS_WIDTH - 1), ADDRESS_WIDTH + (m & (ADDRESS_WIDTH - 1))];
  }

  /**
   * Counts connection `socketId` against client address `ip` (limits.max_connections_per_ip,
   * all shards of the process); false (nothing counted) when the address has `max` already.
   * A connection without an address ('') is not counted.
   */
  tryAcquireAddress(socketId: string, ip: string, max: number): boolean {
    if (ip === '') return true; // no address (the Unix socket, its proxy not trusted): not counted
    const h = addressHash(ip);
    const cells = this.cells(h);
    let least = Infinity;
    for (const c of cells) least = Math.min(least, Atomics.add(this.addresses, c, 1) + 1);
    if (least > max) {
      for (const c of cells) Atomics.sub(this.addresses, c, 1);
      return false;
    }
    this.byAddress.set(socketId, h);
    return true;
  }

  /** Gives back what tryAcquireAddress counted for the connection (nothing when it counted nothing). */
  releaseAddress(socketId: string): void {
    const h = this.byAddress.get(socketId);
    if (h === undefined) return;
    this.byAddress.delete(socketId);
    for (const c of this.cells(h)) Atomics.sub(this.addresses, c, 1);
  }

  /** This process's connections from the address (tests, the console). */
  address(ip: string): number {
    const [a, b] = this.cells(addressHash(ip));
    return Math.min(Atomics.load(this.addresses, a), Atomics.load(this.addresses, b));
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
