// Interest routing: which shards have at least one subscriber of a channel, so that a
// publish is written only to those shards (its cost does not grow with the shard count).
//
//   table (SharedArrayBuffer, one for the process)
//   ┌────────────┬────────────┬─────┬────────────────┐
//   │ slot 0     │ slot 1     │ …   │ slot S−1       │   slot = channelHash(app, channel) & (S−1)
//   │ W × u32    │ W × u32    │     │ W × u32        │   W = ceil(shards / 32) words: bit s = shard s
//   └────────────┴────────────┴─────┴────────────────┘
//
// Invariants
//  1. Only shard s writes bit s of any slot (Atomics.or / Atomics.and), so there is no
//     lost update between shards and no lock.
//  2. Bit s of a slot is set while shard s holds at least one subscription record of a
//     channel hashing to that slot (a per-slot count in the shard's own memory). Channels
//     that share a slot share the bit: a publish may reach a shard that has no subscriber
//     of its channel (harmless: uWS finds no subscriber), never miss one that has.
//  3. A shard sets its bit *before* the subscription can be observed from outside (before
//     `subscription_succeeded`, before a presence join request leaves the shard), and the
//     publisher reads the bits (Atomics.load, sequentially consistent) after it received the
//     request. So a publish caused by anything the client did after its subscription
//     succeeded finds the bit: nothing is lost at the edge (test/e2e/interest-race.test.ts).
//  4. A shard that dies has its bits cleared by the primary before its replacement starts
//     (the replacement starts with no subscriptions).
//
// Why shard-kept bits and not the owner's records: the owner learns of a subscription
// asynchronously; routing by its view would lose the publishes that overtake the `sub`
// message. A bit the subscribing shard sets itself is visible before the client knows it
// is subscribed, with no round trip. Measured in bench/shards/ (docs/benchmarks.md).

import { channelHash } from './topic';

/** Slots per table: 65,536 (× 4 bytes × words). 10,000 channels share a slot with ~7 % odds. */
export const INTEREST_SLOTS = 1 << 16;

/**
 * The bucket of interest slot `slot` among `buckets` (a power of two ≤ INTEREST_SLOTS):
 * the slot mixed (Fibonacci hashing), since the low bits of similar channel names'
 * hashes go together (adapter/buckets.ts).
 */
export function bucketOfSlot(slot: number, buckets: number): number {
  return ((Math.imul(slot + 1, 0x9e3779b1) >>> 0) >>> 16) & (buckets - 1);
}

/** A channel's bucket among `buckets`: the bucket of its slot in a full-size table. */
export function bucketOf(app: string, channel: string, buckets: number): number {
  return bucketOfSlot(channelHash(app, channel) & (INTEREST_SLOTS - 1), buckets);
}

/** The slots of each bucket (index: bucket), for Interest.anyIn. */
export function slotsByBucket(buckets: number): Int32Array[] {
  const counts = new Int32Array(buckets);
  for (let s = 0; s < INTEREST_SLOTS; s++) counts[bucketOfSlot(s, buckets)]++;
  const out = Array.from(counts, (n) => new Int32Array(n));
  counts.fill(0);
  for (let s = 0; s < INTEREST_SLOTS; s++) {
    const b = bucketOfSlot(s, buckets);
    out[b][counts[b]++] = s;
  }
  return out;
}

/** Allocates the table for `shards` shards. */
export function allocateInterest(shards: number, slots = INTEREST_SLOTS): SharedArrayBuffer {
  return new SharedArrayBuffer(slots * wordsFor(shards) * 4);
}

const wordsFor = (shards: number) => Math.max(1, Math.ceil(shards / 32));

/** One thread's view of the table: shards update their own bit, anyone reads. */
export class Interest {
  private readonly table: Int32Array;
  private readonly words: number;
  private readonly mask: number;
  /** This shard's subscription records per slot (only for the shard that owns bit `self`). */
  private readonly counts: Int32Array | null;
  private readonly word: number;
  private readonly bit: number;

  /** `self`: this shard's index, or -1 for a thread that only reads (the primary). */
  constructor(sab: SharedArrayBuffer, private readonly shards: number, self: number) {
    this.words = wordsFor(shards);
    this.table = new Int32Array(sab);
    const slots = this.table.length / this.words;
    if (slots === 0 || (slots & (slots - 1)) !== 0) throw new RangeError('interest table: slots must be a power of two');
    this.mask = slots - 1;
    this.counts = self >= 0 ? new Int32Array(slots) : null;
    this.word = self >> 5;
    this.bit = 1 << (self & 31);
  }

  /** This shard holds one more subscription record of the channel (invariant 3: call before it shows). */
  add(app: string, channel: string): void {
    const slot = channelHash(app, channel) & this.mask;
    if (this.counts![slot]++ === 0) Atomics.or(this.table, slot * this.words + this.word, this.bit);
  }

  /** One subscription record of the channel on this shard is gone. */
  remove(app: string, channel: string): void {
    const slot = channelHash(app, channel) & this.mask;
    const counts = this.counts!;
    if (counts[slot] <= 0) return; // never below zero (a record removed twice)
    if (--counts[slot] === 0) Atomics.and(this.table, slot * this.words + this.word, ~this.bit);
  }

  /**
   * The shards that may have subscribers of the channel, ascending, written into `out`
   * (reused by the caller: no allocation per publish). Returns `out`.
   */
  targets(app: string, channel: string, out: number[]): number[] {
    out.length = 0;
    const base = (channelHash(app, channel) & this.mask) * this.words;
    for (let w = 0; w < this.words; w++) {
      let bits = Atomics.load(this.table, base + w);
      while (bits !== 0) {
        const low = bits & -bits;
        const s = (w << 5) + 31 - Math.clz32(low);
        if (s < this.shards) out.push(s);
        bits ^= low;
      }
    }
    return out;
  }

  /** Whether any shard has a subscriber of a channel in these slots (a full-size table: slotsByBucket). */
  anyIn(slots: Int32Array): boolean {
    const t = this.table;
    for (let i = 0; i < slots.length; i++) {
      const base = slots[i] * this.words;
      for (let w = 0; w < this.words; w++) if (Atomics.load(t, base + w) !== 0) return true;
    }
    return false;
  }

  /** Primary, when shard `s` died: its bits go (its replacement starts with no subscription). */
  clearShard(s: number): void {
    const w = s >> 5;
    const keep = ~(1 << (s & 31));
    for (let slot = w; slot < this.table.length; slot += this.words) Atomics.and(this.table, slot, keep);
  }
}
