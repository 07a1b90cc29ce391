/*
 * The spill budget of one thread (bus.max_spill_bytes): the bytes all of its ring writers
 * together may hold in their spill queues (ring.ts), so a thread holds at most that much
 * whatever number of peers it writes to (a bound per ring grew with the threads: 64 MiB ×
 * 16 shards × …). A spill past it is refused (the caller's BusFullError, 503 on the API).
 *
 * All-or-nothing writes to several rings (Bus.publishTo, BusBatch.commit) ask every ring
 * first, then write: what a check found room for is promised to that writer until it
 * writes it or the current synchronous run of the thread ends (a microtask), so rings
 * checked one after the other are not each promised the same free bytes, and a write a
 * check allowed is never refused by the writes before it.
 */
export class SpillBudget {
  /** Bytes in the spill queues of the writers sharing this budget. */
  used = 0;
  private promised = 0;
  private readonly holders = new Map<object, number>();
  private clearing = false;

  constructor(readonly max: number) {
    if (!(Number.isInteger(max) && max > 0)) throw new RangeError(`a spill budget must be a positive integer of bytes, got ${max}`);
  }

  /** Whether `bytes` more would fit for `who` now, counting what others were promised; if so they are promised to it (instead of its earlier promise). */
  promise(who: object, bytes: number): boolean {
    const mine = this.holders.get(who) ?? 0;
    if (this.used + this.promised - mine + bytes > this.max) return false;
    this.hold(who, mine, bytes);
    return true;
  }

  /** Takes `bytes` into `who`'s spill queue: from its promise first, else from what is free; false: refused. */
  take(who: object, bytes: number): boolean {
    const mine = this.holders.get(who) ?? 0;
    if (mine >= bytes) {
      this.hold(who, mine, mine - bytes);
    } else {
      if (this.used + this.promised - mine + bytes > this.max) return false;
      if (mine > 0) this.hold(who, mine, 0);
    }
    this.used += bytes;
    return true;
  }

  /** `bytes` left a spill queue (moved into the ring, or dropped with a discarded writer). */
  release(bytes: number): void {
    this.used -= bytes;
  }

  private hold(who: object, was: number, now: number): void {
    this.promised += now - was;
    if (now === 0) this.holders.delete(who);
    else this.holders.set(who, now);
    if (this.promised > 0 && !this.clearing) {
      this.clearing = true;
      queueMicrotask(() => {
        this.clearing = false;
        this.promised = 0;
        this.holders.clear();
      });
    }
  }
}
