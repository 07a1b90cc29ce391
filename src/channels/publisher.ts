// The publish pipeline: every message to a channel's subscribers goes through here — API
// events and batches, client events, presence member events, subscription counts and
// server-to-user messages — out of the thread that made it, and into each shard that
// delivers it.
//
//   outbound (the thread that made the message)
//     validate ─▶ cache remember ─▶ [delta route] ─▶ [adapter out] ─▶ bus (shards with interest)
//   inbound (each shard the frame reaches)
//     cache delivered ─▶ backpressure guard ─▶ [filter visitor] ─▶ native uWS publish
//
// The bracketed stages are slots (OutboundStage, InboundStage), empty until the delta
// worker, the cluster adapters and tag filters fill them. Bytes are produced once per
// publish; each shard hands them to uWS's native topic publish, so JavaScript never loops
// over plain subscribers. A publish is written only to the shards that have a subscriber
// of its channel (channels/interest.ts).
//
// All or nothing, with every stage: an outbound stage writes only through the StageWrites
// it is handed (the delta route to the sequencer, the adapter-out copy to the primary,
// cluster_coordination's delta_origin), which is the publish's own bus batch. Its frames
// are committed with the frames to the shards, so a BusFullError (a 503) has sent nothing
// anywhere: no shard, no sequencer, no other node (the primary forwards only what it read,
// i.e. what was committed). A publish whose stages write nothing keeps the direct path.

import type { Logger } from 'pino';
import { BusFullError } from '../bus/errors';
import { TAGS_ALL, type ControlMsg, type FrameTags, type PublishFrame } from '../bus/messages';
import { metersFor, type Meters } from '../metrics/meters';
import { noMetrics, type MetricsSink } from '../metrics/types';
import { Ev } from '../protocol/events';
import { frame } from '../protocol/frames';
import type { CacheChannels } from './cache';
import { publishExcept, type ExcludedSocket } from './exclude';
import type { Fanout } from './fanout';
import type { Interest } from './interest';
import { ownerOf } from './owner';
import { topicOf } from './topic';
import { logLimited } from '../log';
import type { Tracing } from '../tracing/tracer';

/** What a message is: only `api` events are cached (cache channels) and counted as API publishes. */
export type MessageKind = 'api' | 'client' | 'member' | 'count' | 'user';

export interface Outgoing {
  kind: MessageKind;
  app: string;
  channel: string;
  /** socket_id that must not receive it, or ''. */
  except: string;
  /** The serialised client frame ({"event","channel","data",…}). */
  message: string;
  /** Tag filtering: the event's tags as sorted JSON (filter/tags.ts); absent or null = untagged. */
  tags?: string | null;
  /** A publish's `"delta": true|false` (delta/stage.ts); absent: the configuration decides. */
  delta?: boolean;
}

/** What the pipeline needs of the bus (bus/bus.ts). */
export interface PipelineBus {
  readonly self: number;
  /** All or nothing over `targets` (BusFullError, written nowhere). `self` may be a target. */
  publishTo(targets: ArrayLike<number>, app: string, channel: string, except: string, message: Uint8Array, tags?: FrameTags, trace?: string | null): void;
  control(to: number, msg: ControlMsg): void;
  /** Frames written all or nothing (bus/batch.ts): commit() throws BusFullError having written none. */
  batch(): PipelineBatch;
}

/** Frames into a bus batch (the bytes are copied at once). */
export interface BatchWrites {
  publish(targets: ArrayLike<number>, app: string, channel: string, except: string, message: Uint8Array, tags?: FrameTags, trace?: string | null): unknown;
  control(to: number, msg: ControlMsg): unknown;
}

/** Where an outbound stage writes: into the publish's batch. */
export interface StageWrites extends BatchWrites {
  /**
   * Runs `fn` once the publish is written (committed, or sent on the direct path); never
   * when it is refused (BusFullError): for what a stage does outside the bus (the console's
   * live log), so that a publish answered 503 is not shown as sent.
   */
  after(fn: () => void): void;
}

export interface PipelineBatch extends BatchWrites {
  commit(): void;
}

/** A slot between the cache and the bus (delta route, adapter out). */
export interface OutboundStage {
  /**
   * Sees each message on its way out; returns true when it took it over (the bus step is
   * skipped). Whatever it sends goes through `w`, committed all or nothing with the
   * publish: a stage that wrote to the bus itself would reach its target even when the
   * publish is refused (503).
   */
  out(msg: Outgoing, w: StageWrites): boolean;
}

/** A slot before the native publish (filter visitor). */
export interface InboundStage {
  /** Returns true when it delivered the frame itself (uWS's native publish is skipped). */
  deliver(f: PublishFrame, topic: string): boolean;
}

/** Sees every local publish before uWS does (the slow-consumer watch, ws/backpressure.ts). */
export interface PublishGuard {
  beforePublish(topic: string, bytes: number, except: string, tags?: FrameTags): void;
}

/** What the inbound side needs of a local socket (a uWS WebSocket; ws/types.ts). */
export type LocalSocket = ExcludedSocket;

export interface PublisherDeps {
  bus: PipelineBus;
  /** A member event was written to shard `shard` (channels/reconcile.ts MemberTally). */
  memberSent?(shard: number): void;
  interest: Interest;
  shards: number;
  /** The shard's native fan-out and sockets (inbound); a thread without sockets passes null. */
  uws: Fanout | null;
  sockets: ReadonlyMap<string, LocalSocket>;
  cache?: CacheChannels | null;
  guard?: PublishGuard | null;
  metrics?: MetricsSink;
  log: Logger;
  /** Outgoing event name with the configured prefix. */
  out(canonical: string): string;
  /** Sees each member event this shard delivers (the shadow member sets, channels/rebuild.ts). */
  onMember?(m: MemberMsg): void;
  stages?: { delta?: OutboundStage[]; adapter?: OutboundStage[]; filter?: InboundStage[] };
  /** OpenTelemetry traces (tracing/tracer.ts); null or absent: off, and no publish carries a trace context. */
  tracing?: PublishTracing | null;
}

/** What the pipeline needs of tracing: the trace context a publish carries, a span per delivery. */
export type PublishTracing = Pick<Tracing, 'current' | 'delivered'>;

export type MemberMsg = Extract<ControlMsg, { type: 'member' }>;

export interface Publisher {
  /**
   * Sends every message to the subscribers of its channel in the process. All or nothing:
   * when any shard's queue cannot take its part, throws BusFullError having sent nothing
   * (no cache entry stored either).
   */
  publish(msgs: readonly Outgoing[]): void;
  /** publish([msg]) without the array. */
  publishOne(msg: Outgoing): void;
  /** A presence member event decided by the owner: to every shard with subscribers of the channel (best effort, logged). */
  member(m: MemberMsg): void;
  /** A publish frame reached this shard: hand it to uWS (inbound stages first). */
  deliver(f: PublishFrame): void;
  /** A member event reached this shard: frame it for the local subscribers. */
  deliverMember(m: MemberMsg): void;
}

/** Largest frame encoded into the reused buffer (bigger ones get a Buffer of their own). */
const MAX_SCRATCH = 1024 * 1024;
const NO_STAGES: never[] = [];

export function createPublisher(deps: PublisherDeps): Publisher {
  const { bus, interest, shards, uws, sockets, log } = deps;
  const cache = deps.cache ?? null;
  const guard = deps.guard ?? null;
  const meters: Meters = metersFor(deps.metrics ?? noMetrics);
  const outStages: OutboundStage[] = [...(deps.stages?.delta ?? NO_STAGES), ...(deps.stages?.adapter ?? NO_STAGES)];
  const filters: InboundStage[] = deps.stages?.filter ?? NO_STAGES;
  const tracing = deps.tracing ?? null;
  let scratch = Buffer.allocUnsafe(16 * 1024);
  const targetBuf: number[] = [];
  /** True while a publish from `scratch` / `targetBuf` is under way (a nested one allocates). */
  let busy = false;

  function validate(m: Outgoing): void {
    // The publish frame's header fields (bus/messages.ts): a caller bug, not a client's.
    if (m.except.length > 255) throw new RangeError(`socket_id to exclude is too long (${m.except.length})`);
  }

  /** The frame's tag section: subscription counts reach filtered subscribers too (channels/filtered.ts). */
  function tagsOf(m: Outgoing): FrameTags {
    return m.kind === 'count' ? TAGS_ALL : m.tags ?? null;
  }

  /** True when a stage took the message over; the stages write into `w`. */
  function stagesTake(m: Outgoing, w: StageWrites): boolean {
    for (let i = 0; i < outStages.length; i++) if (outStages[i].out(m, w)) return true;
    return false;
  }

  function cacheTtl(m: Outgoing): number | null {
    return cache !== null && m.kind === 'api' ? cache.ttl(m.channel) : null;
  }

  /** The stages' after() callbacks of the publishes under way (nested ones above their outer's). */
  const afters: (() => void)[] = [];
  /** Runs the callbacks from `mark` on (the publish was written), or drops them (`ok` false: refused). */
  function settle(mark: number, ok: boolean): void {
    if (afters.length === mark) return;
    const fns = afters.splice(mark);
    if (ok) for (const fn of fns) fn();
  }

  /** Stage writes into the batch `into()` gives (asked at each write). */
  const writesInto = (into: () => PipelineBatch): StageWrites => ({
    publish: (targets, app, channel, except, message, tags, trace) => into().publish(targets, app, channel, except, message, tags, trace),
    control: (to, msg) => into().control(to, msg),
    after: (fn) => void afters.push(fn),
  });
  /** one()'s stage writes: a batch opened by the first one, so a stage that writes nothing costs no batch. */
  let staged: PipelineBatch | null = null;
  const lazy = writesInto(() => (staged ??= bus.batch()));
  /** many()'s stage writes: into its batch. */
  let manyBatch: PipelineBatch | null = null;
  const inMany = writesInto(() => manyBatch!);
  function takeStaged(): PipelineBatch | null {
    const b = staged;
    staged = null;
    return b;
  }

  /**
   * `message` as UTF-8 bytes that are only needed during the call that takes them (uWS
   * copies what it publishes, the bus what it keeps): encoded into a reused buffer. A
   * Buffer per publish cost a slice of Node's 8 KiB pool and a malloc'd pool every few
   * dozen (docs/benchmarks.md). A publish made while one is delivering from that buffer
   * (`busy`: a slow consumer closed during a publish, its presence member_removed) gets
   * a Buffer of its own.
   */
  function encoded(message: string): Uint8Array {
    if (busy || 3 * message.length > MAX_SCRATCH) return Buffer.from(message);
    if (3 * message.length > scratch.length) scratch = Buffer.allocUnsafe(Math.min(MAX_SCRATCH, Math.max(3 * message.length, 2 * scratch.length)));
    return scratch.subarray(0, scratch.write(message, 0, 'utf8'));
  }

  /** The hot path: one message, no cache entry. */
  function one(m: Outgoing): void {
    validate(m);
    const mark = afters.length;
    if (outStages.length > 0) {
      // a publish made while the stages run (nested) stages into a batch of its own
      const outer = takeStaged();
      let took: boolean;
      let batch: PipelineBatch | null;
      try {
        took = stagesTake(m, lazy);
      } catch (err) {
        settle(mark, false);
        throw err;
      } finally {
        batch = takeStaged();
        staged = outer;
      }
      if (batch !== null) {
        try {
          if (!took) add(batch, m);
          batch.commit();
        } catch (err) {
          settle(mark, false);
          throw err;
        }
        settle(mark, true);
        return;
      }
      if (took) {
        settle(mark, true);
        return;
      }
    }
    const nested = busy;
    const targets = interest.targets(m.app, m.channel, nested ? [] : targetBuf);
    if (targets.length > 0) {
      const bytes = encoded(m.message);
      busy = true;
      try {
        bus.publishTo(targets, m.app, m.channel, m.except, bytes, tagsOf(m), tracing === null ? null : tracing.current());
      } catch (err) {
        settle(mark, false);
        throw err;
      } finally {
        busy = nested;
      }
    }
    settle(mark, true);
  }

  /** The publish frames of `m` to the shards with interest, into `batch` (which copies the bytes at once). */
  function add(batch: PipelineBatch, m: Outgoing): void {
    const targets = interest.targets(m.app, m.channel, busy ? [] : targetBuf);
    if (targets.length > 0) batch.publish(targets, m.app, m.channel, m.except, encoded(m.message), tagsOf(m), tracing === null ? null : tracing.current());
  }

  /**
   * Several messages (or a cached one): one bus batch, whose commit checks every ring
   * concerned for all of its frames before writing any (bus/batch.ts).
   */
  function many(msgs: readonly Outgoing[]): void {
    const batch = bus.batch();
    const mark = afters.length;
    const outer = manyBatch;
    try {
      for (const m of msgs) {
        validate(m);
        // Cache channels: the owner hears of it before the publish frames, so every later
        // subscriber gets the event live or as the replay (channels/cache.ts).
        const ttl = cacheTtl(m);
        if (ttl !== null) {
          // tags: a filtered subscriber gets the replay only when its filter matches them
          batch.control(ownerOf(m.app, m.channel, shards), { type: 'cache_set', app: m.app, channel: m.channel, message: m.message, ttl, ...(m.tags ? { tags: m.tags } : {}) });
        }
        if (outStages.length > 0) {
          manyBatch = batch;
          const took = stagesTake(m, inMany);
          manyBatch = outer;
          if (took) continue;
        }
        add(batch, m);
      }
      batch.commit();
    } catch (err) {
      manyBatch = outer;
      settle(mark, false);
      throw err;
    }
    settle(mark, true);
  }

  function deliver(f: PublishFrame): void {
    cache?.delivered(f);
    const topic = topicOf(f.app, f.channel);
    guard?.beforePublish(topic, f.message.length, f.except, f.tags);
    for (let i = 0; i < filters.length; i++) if (filters[i].deliver(f, topic)) return;
    if (uws === null) return;
    // messages_sent_total counts what is handed to uWS (sockets over their backpressure
    // limit skip it inside uWS, uncounted).
    const n = publishExcept(uws, topic, f.message, f.except ? sockets.get(f.except) : undefined, meters.enabled || tracing !== null);
    if (meters.enabled) meters.delivered(f.app, f.message, n);
    if (tracing !== null) tracing.delivered(f.app, f.channel, n, f.trace);
  }

  return {
    publish(msgs) {
      if (msgs.length === 1 && cacheTtl(msgs[0]) === null) one(msgs[0]);
      else if (msgs.length > 0) many(msgs);
    },
    publishOne(m) {
      if (cacheTtl(m) === null) one(m);
      else many([m]);
    },
    member(m) {
      // A fresh target list: a member event can be decided while a publish is delivering.
      for (const s of interest.targets(m.app, m.channel, [])) {
        try {
          bus.control(s, m);
          deps.memberSent?.(s);
        } catch (err) {
          if (err instanceof BusFullError) meters.busFullAt('member_event');
          logLimited(log, 'error', { err, channel: m.channel, shard: s }, 'member event not delivered: internal queue full');
        }
      }
    },
    deliver,
    deliverMember(m) {
      deps.onMember?.(m);
      const data = m.op === 'added' ? { user_id: m.userId, user_info: m.userInfo } : { user_id: m.userId };
      const bytes = Buffer.from(frame(deps.out(m.op === 'added' ? Ev.MemberAdded : Ev.MemberRemoved), JSON.stringify(data), m.channel));
      deliver({ app: m.app, channel: m.channel, except: m.except, message: bytes, tags: TAGS_ALL });
    },
  };
}
