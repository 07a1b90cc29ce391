// One thread's end of the ring mesh: a writer per peer, a reader per peer, one doorbell.
//
//   rings[from][to]   SPSC ring written only by thread `from`, read only by thread `to`
//   doorbells[to]     rung by any writer to `to` (once per event-loop turn), waited on by `to`
//
// Frames addressed to the thread itself are handled by a direct call, so a shard that
// publishes delivers to its own subscribers synchronously and in order.
// Per-pair FIFO is the only ordering promise: A→B frames arrive in the order A wrote them.

import { DoorbellListener, DoorbellRinger } from './doorbell';
import { RingReader, RingWriter } from './ring';
import {
  ControlMsg, FrameType, PublishFrame, RequestBody, RequestMsg,
  decodeControl, decodePublish, encodeControl, encodePublish,
} from './messages';

export interface BusTopology {
  threads: number;
  /** rings[from][to]; null on the diagonal. */
  rings: (SharedArrayBuffer | null)[][];
  doorbells: SharedArrayBuffer[];
  maxSpillBytes: number;
}

export interface BusHandlers {
  onPublish(frame: PublishFrame): void;
  onControl(msg: ControlMsg, from: number): void;
  /** A handler threw while a frame was being delivered; the frame is dropped, the bus goes on. */
  onError(err: unknown, frameType: number): void;
}

export class BusFullError extends Error {
  readonly code = 'RC_ERR_BUS_FULL';
  constructor(to: number) {
    super(`internal queue to thread ${to} is full`);
  }
}

export class BusTimeoutError extends Error {
  readonly code = 'RC_ERR_BUS_TIMEOUT';
  constructor(to: number, type: string) {
    super(`thread ${to} did not answer ${type} in time`);
  }
}

interface Pending {
  resolve(body: unknown): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

export class Bus {
  private readonly writers: (RingWriter | null)[] = [];
  private readonly readers: (RingReader | null)[] = [];
  private readonly ringers: (DoorbellRinger | null)[] = [];
  private listener: DoorbellListener | null = null;
  private readonly pending = new Map<number, Pending>();
  private nextReq = 1;
  private handlers: BusHandlers | null = null;

  constructor(
    readonly self: number,
    private readonly topo: BusTopology,
    private readonly requestTimeoutMs = 5000,
  ) {
    for (let peer = 0; peer < topo.threads; peer++) {
      if (peer === self) {
        this.writers.push(null); this.readers.push(null); this.ringers.push(null);
        continue;
      }
      const ringer = new DoorbellRinger(topo.doorbells[peer]);
      this.ringers.push(ringer);
      this.writers.push(new RingWriter(topo.rings[self][peer]!, {
        maxSpillBytes: topo.maxSpillBytes,
        onWritten: () => ringer.request(),
      }));
      this.readers.push(new RingReader(topo.rings[peer][self]!));
    }
  }

  get threads(): number {
    return this.topo.threads;
  }

  start(handlers: BusHandlers): void {
    this.handlers = handlers;
    this.listener = new DoorbellListener(this.topo.doorbells[this.self], () => this.drain());
    this.listener.start();
    this.drain();
  }

  /** Spilled bytes waiting on every outgoing ring (a gauge for metrics and tests). */
  spilledBytes(): number {
    let n = 0;
    for (const w of this.writers) if (w) n += w.spilledBytes;
    return n;
  }

  /** Throws BusFullError when the ring and its spill queue to `to` are full (nothing taken). */
  publish(to: number, app: string, channel: string, except: string, message: Uint8Array): void {
    if (to === this.self) {
      this.handlers!.onPublish({ app, channel, except, message });
      return;
    }
    if (!this.writers[to]!.write(FrameType.Publish, encodePublish(app, channel, except, message))) {
      throw new BusFullError(to);
    }
  }

  /** Throws BusFullError when full. */
  control(to: number, msg: ControlMsg): void {
    if (to === this.self) {
      this.handlers!.onControl(msg, this.self);
      return;
    }
    if (!this.writers[to]!.write(FrameType.Control, encodeControl(msg))) throw new BusFullError(to);
  }

  request<T>(to: number, body: RequestBody): Promise<T> {
    const req = this.nextReq++;
    const msg = { ...body, req, from: this.self } as RequestMsg;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(req);
        reject(new BusTimeoutError(to, body.type));
      }, this.requestTimeoutMs);
      this.pending.set(req, { resolve: resolve as (b: unknown) => void, reject, timer });
      try {
        this.control(to, msg);
      } catch (err) {
        clearTimeout(timer);
        this.pending.delete(req);
        reject(err as Error);
      }
    });
  }

  reply(to: number, req: number, body: unknown): void {
    if (to === this.self) {
      this.settle(req, body);
      return;
    }
    this.control(to, { type: 'reply', req, body });
  }

  stop(): void {
    this.listener?.stop();
    for (const w of this.writers) w?.close();
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(new Error('bus stopped'));
    }
    this.pending.clear();
  }

  private settle(req: number, body: unknown): void {
    const p = this.pending.get(req);
    if (!p) return; // timed out already
    this.pending.delete(req);
    clearTimeout(p.timer);
    p.resolve(body);
  }

  private drain(): void {
    const h = this.handlers!;
    for (let peer = 0; peer < this.readers.length; peer++) {
      const reader = this.readers[peer];
      if (!reader) continue;
      reader.drain((type, payload) => {
        try {
          if (type === FrameType.Publish) {
            h.onPublish(decodePublish(payload));
          } else if (type === FrameType.Control) {
            const msg = decodeControl(payload);
            if (msg.type === 'reply') this.settle(msg.req, msg.body);
            else h.onControl(msg, peer);
          }
        } catch (err) {
          h.onError(err, type);
        }
      });
    }
  }
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
  return { threads, rings, doorbells, maxSpillBytes };
}
