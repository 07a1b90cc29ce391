/*
 * Several frames written all or nothing (Bus.batch()): the frames of a multi-channel
 * publish, of a batch of events, or a control message and the publishes behind it.
 *
 *   const b = bus.batch();
 *   b.publish(targetsA, app, 'a', except, bytesA);     encoded (and copied) now
 *   b.publish(targetsB, app, 'b', except, bytesB);
 *   b.control(owner, { type: 'cache_set', … });
 *   b.commit();     every ring concerned is asked for ALL of its frames (RingWriter.
 *                   wouldTakeAll); then the frames are written in the order added, and
 *                   last those to this thread itself are delivered, in their order.
 *
 * commit() throws BusFullError having written nothing when any ring and its spill queue
 * cannot take all of the frames meant for it, so a 503 means no subscriber got any part.
 * The check holds until the writes: a ring's reader only frees room, and nothing else
 * writes on this thread in between (commit() is synchronous; frames to this thread itself
 * need no room and are delivered after the writes, as their handlers may write too).
 * No client can tell: subscribers on different threads get a publish at unrelated times.
 * A batch commits once; a bad or repeated target within one publish() throws RangeError.
 */
import { BusFullError } from './errors';
import { ControlMsg, FrameType, encodeControl, encodePublish, type FrameTags } from './messages';

/** What a batch needs of its bus (built by Bus). */
export interface BatchWriter {
  readonly self: number;
  /** Throws RangeError for an index that is no thread, or one already seen in this epoch. */
  checkTarget(to: number, epoch: number): void;
  nextEpoch(): number;
  /** Whether the ring (and spill queue) to `to` would take payloads of these lengths now. */
  canWrite(to: number, lengths: readonly number[]): boolean;
  /** Stamps and writes a payload; throws BusFullError if not taken. */
  write(to: number, type: number, payload: Uint8Array): void;
  publishSelf(app: string, channel: string, except: string, message: Uint8Array, tags: FrameTags, trace: string | null): void;
  controlSelf(msg: ControlMsg): void;
}

type Entry =
  | { to: number; type: typeof FrameType.Publish; payload: Uint8Array; local: null }
  | { to: number; type: typeof FrameType.Publish; payload: null; local: { app: string; channel: string; except: string; message: Uint8Array; tags: FrameTags; trace: string | null } }
  | { to: number; type: typeof FrameType.Control; payload: Uint8Array | null; msg: ControlMsg };

export class BusBatch {
  private readonly entries: Entry[] = [];
  private committed = false;

  constructor(private readonly bus: BatchWriter) {}

  /** Frames added so far (one per target). */
  get size(): number {
    return this.entries.length;
  }

  /** Adds a publish to each of `targets` (distinct thread indexes; may include this thread). The bytes are copied now. */
  publish(targets: ArrayLike<number>, app: string, channel: string, except: string, message: Uint8Array, tags: FrameTags = null, trace: string | null = null): this {
    this.open();
    const epoch = this.bus.nextEpoch();
    for (let i = 0; i < targets.length; i++) this.bus.checkTarget(targets[i], epoch);
    let payload: Uint8Array | null = null;
    for (let i = 0; i < targets.length; i++) {
      const to = targets[i];
      if (to === this.bus.self) {
        this.entries.push({ to, type: FrameType.Publish, payload: null, local: { app, channel, except, message: Buffer.from(message), tags, trace } });
      } else {
        payload ??= encodePublish(app, channel, except, message, tags, trace); // shared: write() copies it into each ring
        this.entries.push({ to, type: FrameType.Publish, payload, local: null });
      }
    }
    return this;
  }

  /** Adds a control message (not a request: those wait for an answer, see Bus.request). */
  control(to: number, msg: ControlMsg): this {
    this.open();
    this.bus.checkTarget(to, this.bus.nextEpoch());
    this.entries.push({ to, type: FrameType.Control, payload: to === this.bus.self ? null : encodeControl(msg), msg });
    return this;
  }

  /** Writes every frame, or none: BusFullError names a ring that could not take its share. */
  commit(): void {
    this.open();
    this.committed = true;
    const lengths = new Map<number, number[]>();
    for (const e of this.entries) {
      if (e.payload === null) continue;
      const l = lengths.get(e.to);
      if (l) l.push(e.payload.length);
      else lengths.set(e.to, [e.payload.length]);
    }
    for (const [to, l] of lengths) if (!this.bus.canWrite(to, l)) throw new BusFullError(to);
    for (const e of this.entries) if (e.payload !== null) this.bus.write(e.to, e.type, e.payload);
    // Then the frames to this thread: a handler they run may write to the rings, and must
    // not take room promised to the frames above.
    for (const e of this.entries) {
      if (e.payload !== null) continue;
      if (e.type === FrameType.Control) this.bus.controlSelf(e.msg);
      else this.bus.publishSelf(e.local.app, e.local.channel, e.local.except, e.local.message, e.local.tags, e.local.trace);
    }
  }

  private open(): void {
    if (this.committed) throw new Error('bus batch already committed: start a new one with bus.batch()');
  }
}
