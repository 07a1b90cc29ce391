// Doorbell: one shared Int32 counter that wakes a consumer thread reading several
// rings. Producers bump it and Atomics.notify (coalesced to one notify per
// microtask checkpoint, i.e. per turn of the event loop); the consumer waits with
// Atomics.waitAsync, so it never blocks its event loop and never busy-spins.
//
// Lost wake-ups cannot happen: the listener reads the counter *before* calling
// onWake (which drains the rings) and then waits for the counter to differ from
// that value; a ring that lands during the drain makes the wait return at once.
//
// Keep-alive: a pending Atomics.waitAsync does NOT keep a thread's event loop
// alive. A thread whose only pending work is a DoorbellListener exits (or, on the
// main thread, the process ends) without ever waking. The caller must hold some
// other handle (a server socket, parentPort 'message' listener, a timer).
//
// Checked on Node 20.20 in the main thread and in worker_threads: waitAsync
// resolves on notify from another thread, so no MessagePort fallback is needed.
import { DOORBELL, DOORBELL_BYTES } from './layout';

export type WaitAsync = (ta: Int32Array, index: number, value: number) =>
  | { async: false; value: 'not-equal' | 'timed-out'; }
  | { async: true; value: Promise<'ok' | 'timed-out'>; };
// lib is ES2022 in tsconfig; waitAsync is typed from ES2024 on. Also used by ring.ts.
export const waitAsync = (Atomics as unknown as { waitAsync?: WaitAsync; }).waitAsync as WaitAsync;

export function createDoorbell(): SharedArrayBuffer {
  return new SharedArrayBuffer(DOORBELL_BYTES);
}

function view(sab: SharedArrayBuffer): Int32Array {
  if (sab.byteLength < DOORBELL_BYTES) throw new RangeError('not a doorbell: use createDoorbell()');
  return new Int32Array(sab, 0, 1);
}

/** Producer side. request() from hot paths; ringNow() when a notify must go out now. */
export class DoorbellRinger {
  private readonly i32: Int32Array;
  private scheduled = false;

  constructor(sab: SharedArrayBuffer) {
    this.i32 = view(sab);
  }

  /** Schedules one ring via queueMicrotask unless one is already scheduled. */
  request(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    queueMicrotask(this.flush);
  }

  /** Bumps the counter and wakes the waiting consumer; cancels a scheduled ring. */
  ringNow(): void {
    this.scheduled = false;
    Atomics.add(this.i32, DOORBELL, 1);
    Atomics.notify(this.i32, DOORBELL);
  }

  private readonly flush = (): void => {
    if (this.scheduled) this.ringNow();
  };
}

/**
 * Consumer side: calls onWake() once inside start() (to drain what arrived before)
 * and then, each time as its own task (never re-entrantly), after every change of
 * the counter. If onWake throws, the loop is re-armed first and the error propagates
 * (from start(), or later as an unhandled rejection / uncaught exception).
 */
export class DoorbellListener {
  private readonly i32: Int32Array;
  private epoch = 0;
  private running = false;

  constructor(sab: SharedArrayBuffer, private readonly onWake: () => void) {
    if (waitAsync === undefined) throw new Error('Atomics.waitAsync is not available (Node ≥ 16 required)');
    this.i32 = view(sab);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop(++this.epoch);
  }

  /** Ends the loop; the notify releases the pending wait (another listener on the same doorbell would see one spurious wake). */
  stop(): void {
    if (!this.running) return;
    this.running = false;
    this.epoch++;
    Atomics.notify(this.i32, DOORBELL);
  }

  private loop(epoch: number): void {
    if (epoch !== this.epoch) return;
    const seen = Atomics.load(this.i32, DOORBELL);
    try {
      this.onWake();
    } finally {
      this.arm(epoch, seen);
    }
  }

  private arm(epoch: number, seen: number): void {
    if (epoch !== this.epoch) return; // stopped (or restarted) inside onWake
    const r = waitAsync(this.i32, DOORBELL, seen);
    if (r.async) {
      void r.value.then(() => this.loop(epoch));
    } else {
      // rung while we drained: go again, but after this turn's other callbacks,
      // so a producer that never pauses cannot starve this thread's I/O and timers
      setImmediate(() => this.loop(epoch));
    }
  }
}
