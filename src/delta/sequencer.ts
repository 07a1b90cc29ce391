// The delta sequencer: one endpoint of the ring mesh (its own thread, delta/thread.ts),
// with no sockets. Every message for a channel with delta subscribers reaches it from
// the publishing shard's delta-route stage (delta/stage.ts); it numbers the message in
// its stream, keeps the bases (delta/streams.ts), has the delta computed once — for all
// subscribers, per algorithm in use — and writes one `delta` frame to each shard with
// delta subscribers of the channel (delta/shard.ts fans it out natively).
//
//   shard ─publish [force][envelope]─▶ sequencer ── decide (streams.ts)
//                                          │            └─▶ compute (pool or inline) ─┐
//                                          ▼                                          │
//                                      output queue (submission order) ◀──────────────┘
//                                          └─▶ control `delta` to each shard with delta interest
//
// Rules
//  1. Output leaves in the order messages arrived, whatever order the pool finishes in,
//     so every stream's frames reach each shard in seq order (per-pair rings are FIFO).
//  2. A `delta_states` answer (delta_cache_sync) takes its place in the same queue: it
//     reflects every message decided before it and reaches the shard after their frames.
//  3. The sequencer never throws into the bus: a message it cannot read is logged and
//     dropped. A frame for a shard whose ring and spill are full waits, in order, in that
//     shard's backlog (later frames for it queue behind), retried every RETRY_MS; while a
//     backlog waits the sequencer reads nothing (its bus is held), so its own ring and
//     spill fill and the shards' publishes to it are refused (the API answers 503 and
//     delivers nothing) instead of frames being dropped after a 200 (backlog.ts). Only past
//     MAX_BACKLOG frames (what was already read and computed) is a frame dropped
//     (logged, counted in bus_full_total{source="delta_frame"}); its clients resynchronise
//     (base_index mismatch → pusher:delta_sync_error).
//  4. Tag filters (spec order: filter, then delta; delta/shard.ts rule 8): a shard
//     registers each (channel, filter, algorithm) it has delta subscribers of
//     (`delta_filter`, answered in this queue). A tagged message is also numbered in the
//     streams of every registered filter it matches (stream table key `app C\0<filter>`,
//     so a filter's seq and bases are exactly the messages its subscribers received, with
//     local numbering in cluster_coordination mode), each stream's delta computed once for
//     the algorithms its shards use; each shard's frame carries the parts of the filters
//     it registered. A filter no shard uses any more is forgotten with its streams.
//  5. The unfiltered stream is numbered for every message, but its delta is computed only
//     for the algorithms some shard registered an unfiltered subscriber of (filter ''):
//     on a channel whose delta subscribers all filter, it goes full (to nobody). A
//     subscriber whose registration is still on its way gets full messages, as rule 2
//     allows for any socket; it takes deltas from the answer on.
//  6. History channels (docs/history.md, "With delta compression"): their messages come
//     from the channel's owner shard once numbered ([force|SERIAL][serial][epoch][envelope]), in
//     serial order, and the frame carries the serial and epoch. The owner's answer to a delta
//     subscription's hist_sub comes the same way (`hist_relay`, after every message it
//     numbered before answering) and takes its place in the output queue as rule 2's
//     answers do: the subscribing shard gets it behind the frames of every message ≤ S and
//     ahead of every later one.

import type { Logger } from 'pino';
import type { ControlMsg, FilteredDelta, PublishFrame } from '../bus/messages';
import type { Config } from '../config/types';
import type { Interest } from '../channels/interest';
import { noMetrics, type MetricsSink } from '../metrics/types';
import { ALGOS, ChannelSettings, type Algo } from './settings';
import { compileFilter } from '../filter/compile';
import { ChannelMatcher, type MatchEntry } from '../filter/matcher';
import type { FilterNode } from '../filter/parse';
import { parseTags } from '../filter/tags';
import { StreamTable, type Decision, type Entry } from './streams';
import { conflationValueOf, deltaMessage, Force, fullMessage, readSerialInput, SERIAL, STAMPED } from './wire';
import { logLimited } from '../log';
import { BusFullError } from '../bus/errors';
import { createBacklog } from './backlog';

/** The delta pool's queue is full (delta_compression.pool_max_queue): the message goes out in full. */
export class PoolFullError extends Error {
  readonly code = 'RC_ERR_DELTA_POOL_FULL';
  constructor(maxQueue: number) {
    super(`delta pool queue full (${maxQueue} waiting)`);
  }
}

/** What the pool computes: the delta from base to target per algorithm asked (ALGOS order, null when not asked). */
export interface DeltaTask {
  base: Uint8Array;
  target: Uint8Array;
  algos: boolean[];
}
export type DeltaResult = (Uint8Array | null)[];
export type Compute = (task: DeltaTask) => DeltaResult | Promise<DeltaResult>;

export interface SequencerBus {
  control(to: number, msg: ControlMsg): void;
  reply(to: number, req: number, body: unknown): void;
}

export interface SequencerDeps {
  config: Config;
  bus: SequencerBus;
  /** The delta interest tables (read only): which shards have subscribers per algorithm. */
  interest: Record<Algo, Interest>;
  compute: Compute;
  log: Logger;
  metrics?: MetricsSink;
  /** Outgoing name of pusher:delta (event_prefix). */
  deltaEvent: string;
  now?: () => number;
  /** Stop reading the bus for `ms` (0: read again now); rule 3's backpressure. */
  hold?(ms: number): void;
}


export interface Sequencer {
  publish(f: PublishFrame): void;
  control(msg: ControlMsg, from: number): void;
  /** Shard `shard` was replaced: its filter registrations go. */
  forgetShard(shard: number): void;
  /** Drops state older than max_state_age_secs. */
  sweep(): void;
  /** Messages waiting for their delta (tests, shutdown). */
  readonly pending: number;
}

type DeltaFrame = Extract<ControlMsg, { type: 'delta' }>;

/** One delta to compute: a message against its stream's base, and where its result goes. */
interface Job {
  base: Entry;
  target: Uint8Array;
  envelope: string;
  full: string;
  event: string;
  channel: string;
  seq: number;
  value: string | null;
  force: Force;
  algos: boolean[];
  set(deltas: (string | null)[] | null): void;
}

/** A registered tag filter: which shards use it, with how many subscriptions per algorithm. */
interface FilterReg {
  key: string;
  users: Map<number, number[]>;
  /** ALGOS order: some shard decodes this algorithm. */
  algos: boolean[];
}

interface ChannelFilters {
  matcher: ChannelMatcher<FilterReg>;
  byKey: Map<string, MatchEntry<FilterReg>>;
}

/** The stream table's key of a filter's streams on a channel. */
const filterTableKey = (channelKey: string, filter: string) => channelKey + '\0' + filter;

interface Slot {
  ready: boolean;
  send: () => void;
}

const utf8 = new TextDecoder();

export function createSequencer(deps: SequencerDeps): Sequencer {
  const { config, bus, log } = deps;
  const metrics = deps.metrics ?? noMetrics;
  const dc = config.delta_compression;
  const now = deps.now ?? Date.now;
  const settings = new ChannelSettings(config.apps);
  const table = new StreamTable({
    fullMessageInterval: dc.full_message_interval,
    minMessageSize: dc.min_message_size,
    maxStateAgeMs: dc.max_state_age_secs * 1000,
  });
  const omitAlgorithm = dc.omit_delta_algorithm;
  const queue: Slot[] = [];
  const scratch: number[][] = ALGOS.map(() => []);
  /** Frames a shard's full ring refused (rule 3). */
  const dropped = metrics.counter('bus_full_total', { source: 'delta_frame' });

  function flush(): void {
    while (queue.length > 0 && queue[0].ready) {
      const slot = queue.shift()!;
      try {
        slot.send();
      } catch (err) {
        log.error({ err }, 'delta sequencer: output not sent');
      }
    }
  }

  function enqueue(send: () => void, ready: boolean): Slot {
    const slot: Slot = { ready, send };
    queue.push(slot);
    if (ready) flush();
    return slot;
  }

  function lost(err: unknown, s: number, msg: ControlMsg): void {
    // rule 3: the shard's clients resynchronise on the next delta
    if (err instanceof BusFullError) dropped.inc();
    logLimited(log, 'error', { err, shard: s, channel: (msg as { channel?: string }).channel }, 'delta frame not delivered: internal queue full');
  }

  const backlog = createBacklog({ control: (to, msg) => bus.control(to, msg), hold: (ms) => deps.hold?.(ms), lost });
  const sendTo = backlog.send;

  /** The tag filters delta subscribers registered, per channel (rule 4). */
  const filters = new Map<string, ChannelFilters>();
  /** The shards' unfiltered delta subscribers, per channel (registered as filter ''; rule 5). */
  const open = new Map<string, FilterReg>();

  /** The pusher:delta messages of a computed result, null for each one not smaller than the full message (rule: "not smaller"). */
  function deltasOf(result: DeltaResult, j: Job): (string | null)[] | null {
    let any = false;
    // bytes of the full message on the wire (the `__` fields are ASCII)
    const fullBytes = j.target.length + j.full.length - j.envelope.length;
    const out = result.map((delta, i) => {
      if (delta === null) return null;
      const m = deltaMessage(deps.deltaEvent, j.channel, j.event, delta, j.seq, j.base.seq, omitAlgorithm ? null : ALGOS[i], j.value);
      // the pusher:delta as sent (base64, wrapper; ASCII) against the full message, unless
      // the publisher forced a delta
      if (m.length >= fullBytes && j.force !== Force.Delta) return null;
      any = true;
      return m;
    });
    return any ? out : null;
  }

  /** Has one job's delta computed; `done` once its result is set (failures: sent in full). */
  function run(j: Job, done: () => void): void {
    const finish = (result: DeltaResult): void => {
      j.set(deltasOf(result, j));
      done();
    };
    const failed = (err: unknown): void => {
      if (err instanceof PoolFullError) {
        metrics.inc('delta_pool_refused_total');
        logLimited(log, 'warn', { channel: j.channel, err: err.message }, 'delta pool queue full; message sent in full');
      } else logLimited(log, 'error', { err, channel: j.channel }, 'delta computation failed; sent in full');
      finish(ALGOS.map(() => null));
    };
    let out: DeltaResult | Promise<DeltaResult>;
    try {
      out = deps.compute({ base: Buffer.from(j.base.content), target: j.target, algos: j.algos });
    } catch (err) {
      return failed(err);
    }
    if (out instanceof Promise) out.then(finish, failed);
    else finish(out);
  }

  function publish(f: PublishFrame): void {
    const head = f.message[0];
    const force = (head & ~(STAMPED | SERIAL)) as Force;
    // cluster_coordination: the position the cluster agreed on (delta/coord.ts)
    const stamped = (head & STAMPED) !== 0;
    const position = stamped ? Buffer.from(f.message.buffer, f.message.byteOffset + 1, 8).readDoubleLE(0) : null;
    // rule 6: a history channel's serial and epoch
    const numbered = (head & SERIAL) !== 0 ? readSerialInput(f.message) : null;
    const bytes = f.message.slice(numbered !== null ? numbered.at : stamped ? 9 : 1); // a copy: the frame's bytes are the ring's
    const envelope = utf8.decode(bytes);
    let parsed: { event?: unknown; data?: unknown };
    try {
      parsed = JSON.parse(envelope) as { event?: unknown; data?: unknown };
    } catch (err) {
      return logLimited(log, 'error', { err, channel: f.channel }, 'delta sequencer: a message that is not JSON, dropped');
    }
    const event = parsed.event;
    if (typeof event !== 'string') return logLimited(log, 'error', { channel: f.channel }, 'delta sequencer: a message without an event name, dropped');
    // which shards, for which algorithms (rule: compute only what someone decodes)
    const targets = new Set<number>();
    const algos = ALGOS.map((a, i) => {
      const t = deps.interest[a].targets(f.app, f.channel, scratch[i]);
      for (const s of t) targets.add(s);
      return t.length > 0;
    });
    if (targets.size === 0) return; // everyone left meanwhile
    const ch = settings.of(f.app, f.channel);
    const value = ch.conflationKey === null ? null : conflationValueOf(parsed.data, ch.conflationKey.split('.'));
    const key = f.app + ' ' + f.channel;
    const tags = typeof f.tags === 'string' ? f.tags : null;
    const jobs: Job[] = [];
    const job = (d: Decision, full: string, algosOf: boolean[], set: (deltas: (string | null)[] | null) => void): void => {
      if (d.base !== null) jobs.push({ base: d.base, target: bytes, envelope, full, event, channel: f.channel, seq: d.seq, value, force, algos: algosOf, set });
    };

    const d = table.next(key, event, value ?? '', envelope, bytes.length, ch, force, now(), position);
    const full = fullMessage(envelope, d.seq, value);
    const msg: DeltaFrame = { type: 'delta', app: f.app, channel: f.channel, except: f.except, stream: d.stream, full, deltas: null, dropped: d.dropped, tags };
    if (numbered !== null) {
      msg.serial = numbered.serial;
      msg.epoch = numbered.epoch;
    }
    // rule 5: no delta for the unfiltered stream while no shard registered a subscriber of it
    const mine = open.get(key);
    if (mine !== undefined) job(d, full, algos.map((a, i) => a && mine.algos[i]), (deltas) => (msg.deltas = deltas));

    // rule 4: the same message in the stream of each registered filter it matches
    const parts: { reg: FilterReg; part: FilteredDelta }[] = [];
    const cf = tags === null ? undefined : filters.get(key);
    if (cf !== undefined && tags !== null) {
      const t = parseTags(tags);
      cf.matcher.match(t.tags, t.pairs, (reg) => {
        // local numbering (never the cluster's position): a filter's stream is this node's
        const fd = table.next(filterTableKey(key, reg.key), event, value ?? '', envelope, bytes.length, ch, force, now(), null);
        const part: FilteredDelta = { key: reg.key, stream: fd.stream, full: fullMessage(envelope, fd.seq, value), deltas: null, dropped: fd.dropped };
        parts.push({ reg, part });
        job(fd, part.full, reg.algos, (deltas) => (part.deltas = deltas));
      });
    }

    const send = (): void => {
      if (parts.length === 0) return sendTo(targets, msg);
      // each shard gets the streams of the filters it registered
      for (const s of targets) {
        const mine = parts.filter((p) => p.reg.users.has(s)).map((p) => p.part);
        sendTo([s], mine.length > 0 ? { ...msg, filtered: mine } : msg);
      }
    };
    if (jobs.length === 0) {
      enqueue(send, true);
      return;
    }
    const slot = enqueue(() => undefined, false);
    let left = jobs.length;
    const done = (): void => {
      if (--left > 0) return;
      slot.send = send;
      slot.ready = true;
      flush();
    };
    for (const j of jobs) run(j, done);
  }

  /** A shard's first / last subscriber of a channel with a filter and algorithm (rule 4). */
  function registerFilter(msg: Extract<ControlMsg, { type: 'delta_filter' }>, from: number): void {
    const i = ALGOS.indexOf(msg.algo as Algo);
    const key = msg.app + ' ' + msg.channel;
    let cf = filters.get(key);
    if (i >= 0 && msg.filter === '') {
      registerOpen(key, msg.op, i, from);
    } else if (i < 0) {
      log.error({ algo: msg.algo, channel: msg.channel }, 'delta sequencer: a filter registration with an unknown algorithm, ignored');
    } else if (msg.op === 'add') {
      if (cf === undefined) filters.set(key, (cf = { matcher: new ChannelMatcher<FilterReg>(), byKey: new Map() }));
      let e = cf.byKey.get(msg.filter);
      if (e === undefined) {
        try {
          e = cf.matcher.add({ key: msg.filter, users: new Map(), algos: ALGOS.map(() => false) }, compileFilter(JSON.parse(msg.filter) as FilterNode));
          cf.byKey.set(msg.filter, e);
        } catch (err) {
          log.error({ err, channel: msg.channel }, 'delta sequencer: a filter it cannot compile; its subscribers get full messages');
        }
      }
      if (e !== undefined) {
        const counts = e.sub.users.get(from) ?? ALGOS.map(() => 0);
        counts[i]++;
        e.sub.users.set(from, counts);
        e.sub.algos[i] = true;
      }
    } else {
      const e = cf?.byKey.get(msg.filter);
      const counts = e?.sub.users.get(from);
      if (e !== undefined && counts !== undefined && counts[i] > 0) {
        counts[i]--;
        if (counts.every((n) => n === 0)) e.sub.users.delete(from);
        settle(key, cf!, e);
      }
    }
    enqueue(() => bus.reply(from, msg.req, true), true);
  }

  /** Rule 5: a shard's first / last unfiltered delta subscriber of a channel with algorithm `i`. */
  function registerOpen(key: string, op: 'add' | 'remove', i: number, from: number): void {
    let reg = open.get(key);
    if (op === 'add') {
      if (reg === undefined) open.set(key, (reg = { key: '', users: new Map(), algos: ALGOS.map(() => false) }));
      const counts = reg.users.get(from) ?? ALGOS.map(() => 0);
      counts[i]++;
      reg.users.set(from, counts);
      reg.algos[i] = true;
      return;
    }
    const counts = reg?.users.get(from);
    if (reg === undefined || counts === undefined || counts[i] === 0) return;
    counts[i]--;
    if (counts.every((n) => n === 0)) reg.users.delete(from);
    recount(reg);
    if (reg.users.size === 0) open.delete(key);
  }

  function recount(reg: FilterReg): void {
    const users = [...reg.users.values()];
    reg.algos = ALGOS.map((_, i) => users.some((c) => c[i] > 0));
  }

  /** Recounts a filter's algorithms; forgets it (and its streams) when no shard uses it. */
  function settle(key: string, cf: ChannelFilters, e: MatchEntry<FilterReg>): void {
    recount(e.sub);
    if (e.sub.users.size > 0) return;
    cf.matcher.remove(e);
    cf.byKey.delete(e.sub.key);
    table.drop(filterTableKey(key, e.sub.key));
    if (cf.byKey.size === 0) filters.delete(key);
  }

  function control(msg: ControlMsg, from: number): void {
    if (msg.type === 'delta_filter') return registerFilter(msg, from);
    if (msg.type === 'hist_relay') {
      // rule 6: behind the frames of the messages the owner numbered before answering
      const { to, req, body } = msg;
      enqueue(() => bus.reply(to, req, body), true);
      return;
    }
    if (msg.type !== 'delta_states') {
      log.warn({ type: msg.type, from }, 'delta sequencer: unexpected control message');
      return;
    }
    const ch = settings.of(msg.app, msg.channel);
    const key = msg.app + ' ' + msg.channel;
    const states = table.states(msg.filter === undefined ? key : filterTableKey(key, msg.filter));
    const body = { conflation_key: ch.conflationKey, states: states.states, streams: states.streams };
    enqueue(() => bus.reply(from, msg.req, body), true);
  }

  /** A replaced shard: its registrations go (it registers its new subscribers afresh). */
  function forgetShard(shard: number): void {
    backlog.forget(shard);
    for (const [key, reg] of open) {
      if (!reg.users.delete(shard)) continue;
      recount(reg);
      if (reg.users.size === 0) open.delete(key);
    }
    for (const [key, cf] of filters) {
      for (const e of [...cf.byKey.values()]) {
        if (e.sub.users.delete(shard)) settle(key, cf, e);
      }
    }
  }

  return {
    publish,
    control,
    forgetShard,
    sweep: () => table.sweep(now()),
    get pending() {
      return queue.length;
    },
  };
}
