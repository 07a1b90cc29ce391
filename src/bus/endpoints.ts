/*
 * One thread's ends of the ring mesh (bus/topology.ts): a writer and a reader per peer,
 * the doorbells of the peers it writes to and the one it listens on.
 *
 *   rings[self][peer]   written here (RingWriter), read by `peer`
 *   rings[peer][self]   read here (RingReader), written by `peer`
 *   doorbells[peer]     rung (once per microtask checkpoint) after writing to `peer`
 *   doorbells[self]     waited on; a wake-up reads every incoming ring
 *
 * Nothing is addressed to the thread itself here (index `self` holds no ring): Bus
 * delivers those frames by a direct call. The ends of one peer are replaced together
 * when that peer is restarted (replace()); the others never change.
 */
import { DoorbellListener, DoorbellRinger } from './doorbell';
import { RingReader, RingWriter } from './ring';
import { SpillBudget } from './spill';
import { stampOf, type FrameSource, type Stamped } from './ordering';
import type { BusTopology } from './topology';

export class Endpoints implements FrameSource {
  private readonly writers: (RingWriter | null)[] = [];
  private readonly readers: (RingReader | null)[] = [];
  private listener: DoorbellListener | null = null;
  /** bus.max_spill_bytes for every outgoing ring together (bus/spill.ts). */
  private readonly budget: SpillBudget;

  constructor(readonly self: number, private readonly topo: BusTopology) {
    this.budget = new SpillBudget(topo.maxSpillBytes);
    for (let peer = 0; peer < topo.threads; peer++) {
      this.writers.push(peer === self ? null : this.writerTo(topo.rings[self][peer]!, topo.doorbells[peer]));
      this.readers.push(peer === self ? null : new RingReader(topo.rings[peer][self]!));
    }
  }

  get peers(): number {
    return this.topo.threads;
  }

  /** Calls onWake now and after every ring of this thread's doorbell (see doorbell.ts). */
  listen(onWake: () => void): void {
    this.listener = new DoorbellListener(this.topo.doorbells[this.self], onWake);
    this.listener.start();
  }

  /** Writes a frame to `peer` (the payload is copied); false: its ring and spill queue are full. */
  write(peer: number, type: number, payload: Uint8Array): boolean {
    return this.writers[peer]!.write(type, payload);
  }

  /** Whether write(peer, …) of an n-byte payload would take it now (RingWriter.wouldTake). */
  wouldTake(peer: number, n: number): boolean {
    return this.writers[peer]!.wouldTake(n);
  }

  /** Whether writes to `peer` of payloads of these lengths, in this order, would all be taken now. */
  wouldTakeAll(peer: number, lengths: readonly number[]): boolean {
    return this.writers[peer]!.wouldTakeAll(lengths);
  }

  /** Bytes waiting in the spill queues of every outgoing ring (≤ bus.max_spill_bytes). */
  spilledBytes(): number {
    let n = 0;
    for (const w of this.writers) if (w) n += w.spilledBytes;
    return n;
  }

  collect(into: Stamped[]): void {
    for (let peer = 0; peer < this.readers.length; peer++) {
      this.readers[peer]?.drain((type, payload) => {
        into.push({ stamp: stampOf(payload), from: peer, type, payload, local: null });
      });
    }
  }

  spillMark(peer: number): number | null {
    return this.readers[peer]?.spillMark() ?? null;
  }

  /** Nothing to read and nothing spilled towards this thread on any incoming ring. */
  idle(): boolean {
    for (const r of this.readers) if (r !== null && !r.idle()) return false;
    return true;
  }

  /**
   * Thread `peer` was replaced: talk to it over fresh rings and its fresh doorbell from
   * now on (the topology is updated too). Frames still queued to the old thread are
   * dropped. Returns the old reader, still holding what the old thread wrote.
   */
  replace(peer: number, toPeer: SharedArrayBuffer, fromPeer: SharedArrayBuffer, doorbell: SharedArrayBuffer): RingReader | null {
    const old = this.readers[peer];
    this.writers[peer]?.discard(); // its spilled bytes go back to the thread's budget
    this.writers[peer] = this.writerTo(toPeer, doorbell);
    this.readers[peer] = new RingReader(fromPeer);
    this.topo.rings[this.self][peer] = toPeer;
    this.topo.rings[peer][this.self] = fromPeer;
    this.topo.doorbells[peer] = doorbell;
    return old;
  }

  /** Stops listening and every writer's retry timer; spilled frames are not delivered any more. */
  close(): void {
    this.listener?.stop();
    for (const w of this.writers) w?.close();
  }

  private writerTo(ring: SharedArrayBuffer, doorbell: SharedArrayBuffer): RingWriter {
    const ringer = new DoorbellRinger(doorbell);
    return new RingWriter(ring, {
      budget: this.budget,
      onWritten: () => ringer.request(),
      mark: stampOf, // the reader waits for spilled frames by stamp (ordering.ts invariant 3)
    });
  }
}
