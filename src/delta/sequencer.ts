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
//     dropped; a shard whose ring is full misses the frame (logged, counted) and its
//     clients resynchronise (base_index mismatch → pusher:delta_sync_error).

import type { Logger } from 'pino';
import type { ControlMsg, PublishFrame } from '../bus/messages';
import type { Config } from '../config/types';
import type { Interest } from '../channels/interest';
import type { MetricsSink } from '../metrics/types';
import { ALGOS, ChannelSettings, type Algo } from './settings';
import { StreamTable } from './streams';
import { conflationValueOf, deltaMessage, Force, fullMessage, STAMPED } from './wire';

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
}

export interface Sequencer {
  publish(f: PublishFrame): void;
  control(msg: ControlMsg, from: number): void;
  /** Drops state older than max_state_age_secs. */
  sweep(): void;
  /** Messages waiting for their delta (tests, shutdown). */
  readonly pending: number;
}

interface Slot {
  ready: boolean;
  send: () => void;
}

const utf8 = new TextDecoder();

export function createSequencer(deps: SequencerDeps): Sequencer {
  const { config, bus, log } = deps;
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

  function sendTo(targets: ReadonlySet<number>, msg: ControlMsg): void {
    for (const s of targets) {
      try {
        bus.control(s, msg);
      } catch (err) {
        // rule 3: the shard's clients resynchronise on the next delta
        log.error({ err, shard: s, channel: (msg as { channel?: string }).channel }, 'delta frame not delivered: internal queue full');
      }
    }
  }

  function publish(f: PublishFrame): void {
    const head = f.message[0];
    const force = (head & ~STAMPED) as Force;
    // cluster_coordination: the position the cluster agreed on (delta/coord.ts)
    const stamped = (head & STAMPED) !== 0;
    const position = stamped ? Buffer.from(f.message.buffer, f.message.byteOffset + 1, 8).readDoubleLE(0) : null;
    const bytes = f.message.slice(stamped ? 9 : 1); // a copy: the frame's bytes are the ring's
    const envelope = utf8.decode(bytes);
    let parsed: { event?: unknown; data?: unknown };
    try {
      parsed = JSON.parse(envelope) as { event?: unknown; data?: unknown };
    } catch (err) {
      return log.error({ err, channel: f.channel }, 'delta sequencer: a message that is not JSON, dropped');
    }
    const event = parsed.event;
    if (typeof event !== 'string') return log.error({ channel: f.channel }, 'delta sequencer: a message without an event name, dropped');
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
    const d = table.next(key, event, value ?? '', envelope, bytes.length, ch, force, now(), position);
    const full = fullMessage(envelope, d.seq, value);
    const base: { app: string; channel: string; except: string; stream: number; full: string; dropped: number[] } =
      { app: f.app, channel: f.channel, except: f.except, stream: d.stream, full, dropped: d.dropped };
    if (d.base === null) {
      enqueue(() => sendTo(targets, { type: 'delta', ...base, deltas: null }), true);
      return;
    }
    const baseIndex = d.base.seq;
    const finish = (result: DeltaResult): void => {
      let any = false;
      // bytes of the full message on the wire (the `__` fields are ASCII)
      const fullBytes = bytes.length + full.length - envelope.length;
      const deltas = result.map((delta, i) => {
        if (delta === null) return null;
        const m = deltaMessage(deps.deltaEvent, f.channel, event, delta, d.seq, baseIndex, omitAlgorithm ? null : ALGOS[i], value);
        // "not smaller": the pusher:delta as sent (base64, wrapper; ASCII) against the full
        // message, unless the publisher forced a delta
        if (m.length >= fullBytes && force !== Force.Delta) return null;
        any = true;
        return m;
      });
      slot.send = () => sendTo(targets, { type: 'delta', ...base, deltas: any ? deltas : null });
      slot.ready = true;
    };
    const slot = enqueue(() => undefined, false);
    let out: DeltaResult | Promise<DeltaResult>;
    try {
      out = deps.compute({ base: Buffer.from(d.base.content), target: bytes, algos });
    } catch (err) {
      log.error({ err, channel: f.channel }, 'delta computation failed; sent in full');
      out = ALGOS.map(() => null);
    }
    if (out instanceof Promise) {
      out.then(finish, (err: unknown) => {
        log.error({ err, channel: f.channel }, 'delta computation failed; sent in full');
        finish(ALGOS.map(() => null));
      }).finally(flush);
    } else {
      finish(out);
      flush();
    }
  }

  function control(msg: ControlMsg, from: number): void {
    if (msg.type !== 'delta_states') {
      log.warn({ type: msg.type, from }, 'delta sequencer: unexpected control message');
      return;
    }
    const ch = settings.of(msg.app, msg.channel);
    const states = table.states(msg.app + ' ' + msg.channel);
    const body = { conflation_key: ch.conflationKey, states: states.states, streams: states.streams };
    enqueue(() => bus.reply(from, msg.req, body), true);
  }

  return {
    publish,
    control,
    sweep: () => table.sweep(now()),
    get pending() {
      return queue.length;
    },
  };
}
