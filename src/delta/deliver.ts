// The delta shard's fan-out (delta/shard.ts rules 1–4, 6–9): a sequencer `delta` frame to
// the subscriber sets of its channel (delta/registry.ts), and the inbound stage that gives
// the delta sockets the frames that do not come through the sequencer (member events,
// subscription counts).
//
// In the steady state a frame is one native publish per topic (the stream's topic of
// each algorithm with a delta, or the set's full-message topic); sockets are visited in
// JavaScript only when out of step (rule 1), when an algorithm has no delta for them
// (not smaller), or in a pending filter group (rule 8).

import type { ControlMsg, FilteredDelta, PublishFrame, FrameTags } from '../bus/messages';
import { publishExcept } from '../channels/exclude';
import type { Fanout } from '../channels/fanout';
import type { InboundStage } from '../channels/publisher';
import { topicOf } from '../channels/topic';
import { parseTags } from '../filter/tags';
import { sentLabelText, type Meters } from '../metrics/meters';
import { Ev } from '../protocol/events';
import type { DeltaRegistry } from './registry';
import { ALGOS } from './settings';
import type { DeltaSocket } from './socket';
import { ALGO_LETTER, dropStream, stepIn, stepOut, streamOf, type ChannelGroups, type ChannelSubs } from './subscribers';
import { deltaWithSerial, plainMessage, withSerial } from './wire';

export type DeltaFrame = Extract<ControlMsg, { type: 'delta' }>;

/** The slow-consumer guard's check (ws/backpressure.ts), before a publish to a delta socket's topics. */
export interface DeltaGuard {
  check(topic: string, bytes: number, except: string, tags?: FrameTags): void;
}

export interface DeltaDeliveryDeps<S extends DeltaSocket> {
  uws: Fanout;
  sockets: ReadonlyMap<string, S>;
  sets: DeltaRegistry<S>;
  meters: Meters;
  guard: DeltaGuard | null;
  now: () => number;
  /** The pusher_internal:recovery epoch_changed frame (history channels, rule 9). */
  epochChanged(channel: string, epoch: string, serial: number): string;
}

export interface DeltaDelivery {
  /** A sequencer `delta` frame to this shard's sets of its channel (a function: delta/shard.ts hands it on as is). */
  deliver: (msg: DeltaFrame) => void;
  /** Rule 4. */
  inbound: InboundStage;
}

const INTERNAL = ['{"event":"pusher_internal:', '{"event":"proto_internal:'];

export function createDeltaDelivery<S extends DeltaSocket>(deps: DeltaDeliveryDeps<S>): DeltaDelivery {
  const { uws, sockets, meters, guard, now } = deps;
  const { channels, filtered, serials } = deps.sets;

  /** Native publish skipping `sender` (channels/exclude.ts); how many it reached (when counting). */
  function publishTo(topic: string, bytes: string | Uint8Array, sender: S | undefined): number {
    return publishExcept(uws, topic, bytes, sender, meters.enabled);
  }

  /**
   * One message of stream `id` to the sockets of `ch` (rules 1–3): `only` the algorithm at
   * that index (a filter group) or every one (-1).
   */
  function deliverStream(app: string, ch: ChannelSubs<S>, only: number, id: number, full: string, deltas: (string | null)[] | null, dropped: number[], except: S | undefined): void {
    for (const gone of dropped) dropStream(ch, gone);
    const t = now();
    const st = streamOf(ch, id, t);
    st.lastUsed = t;
    const sender = except !== undefined && ch.sockets.has(except) ? except : undefined;
    // rule 7: the full message's label and size, only when counting
    const fullLabel = meters.enabled ? sentLabelText(full) : '';
    const fullBytes = meters.enabled ? Buffer.byteLength(full) : 0;
    if (deltas === null) {
      meters.deliveredText(app, fullLabel, fullBytes, publishTo(ch.allTopic, full, sender)); // rule 2
    } else {
      for (let i = 0; i < ALGOS.length; i++) {
        if (only >= 0 && i !== only) continue;
        const delta = deltas[i];
        if (delta !== null) {
          const n = publishTo(st.topics[i], delta, sender);
          if (n > 0) meters.deliveredText(app, Ev.Delta, Buffer.byteLength(delta), n);
        } else if (st.counts[i] > 0) {
          // no delta of this algorithm (not smaller, or not in use: the sequencer computes
          // those of the algorithms its registrations name): its in-step sockets get the full message
          for (const [ws, algo] of st.inStep) {
            if (algo === ALGOS[i] && ws !== sender) meters.sent(app, fullLabel, ws.send(full, false), fullBytes);
          }
        }
      }
    }
    // rule 1: the sockets not in step get the full message and step in
    if (st.inStep.size !== ch.sockets.size) {
      for (const [ws, algo] of ch.sockets) {
        if (ws === sender || st.inStep.has(ws)) continue;
        if (deltas !== null) ws.cork(() => meters.sent(app, fullLabel, ws.send(full, false), fullBytes));
        stepIn(st, ws, algo);
      }
    }
    if (sender !== undefined) stepOut(st, sender); // rule 3
  }

  /**
   * Rule 9: a history channel's frame to its subscriptions with positions: `__serial` on the
   * full message, `"serial"` in each pusher:delta's data; first an epoch_changed notice when
   * the channel's numbering was lost (its owner shard restarted) since the set's last frame.
   */
  function deliverSerial(msg: DeltaFrame, sc: ChannelSubs<S>, serial: number, except: S | undefined): void {
    if (msg.epoch !== undefined) {
      if (sc.epoch !== undefined && sc.epoch !== msg.epoch) {
        const notice = deps.epochChanged(msg.channel, msg.epoch, serial - 1);
        const n = publishTo(sc.allTopic, notice, undefined);
        if (n > 0) meters.deliveredText(msg.app, Ev.Recovery, Buffer.byteLength(notice), n);
      }
      sc.epoch = msg.epoch;
    }
    const deltas = msg.deltas === null ? null : msg.deltas.map((x) => (x === null ? null : deltaWithSerial(x, serial)));
    deliverStream(msg.app, sc, -1, msg.stream, withSerial(msg.full, serial), deltas, msg.dropped, except);
  }

  /** Rule 8: a frame to the filter groups of its channel. */
  function deliverGroups(msg: DeltaFrame, cg: ChannelGroups<S>, except: S | undefined): void {
    const parts: FilteredDelta[] | undefined = msg.filtered;
    if (parts !== undefined) {
      for (const p of parts) {
        for (let i = 0; i < ALGOS.length; i++) {
          const g = cg.groups.get(ALGO_LETTER[i] + p.key);
          if (g !== undefined && !g.pending) deliverStream(msg.app, g, i, p.stream, p.full, p.deltas, p.dropped, except);
        }
      }
    }
    // pending groups: tested here, sent the plain message
    if (cg.pending === 0 || typeof msg.tags !== 'string') return;
    const tags = parseTags(msg.tags).tags;
    let plain: string | null = null;
    for (const g of cg.groups.values()) {
      if (!g.pending || g.sockets.size === 0 || !g.filter.test(tags)) continue;
      plain ??= plainMessage(msg.full);
      const label = meters.enabled ? sentLabelText(plain) : '';
      const bytes = meters.enabled ? Buffer.byteLength(plain) : 0;
      for (const ws of g.sockets.keys()) {
        if (ws !== except) ws.cork(() => meters.sent(msg.app, label, ws.send(plain!, false), bytes));
      }
    }
  }

  const inbound: InboundStage = {
    deliver(f: PublishFrame, topic: string): boolean {
      if (channels.size === 0 && filtered.size === 0 && serials.size === 0) return false;
      const ch = channels.get(topic);
      const cg = filtered.get(topic);
      const sc = serials.size === 0 ? undefined : serials.get(topic);
      if (ch === undefined && cg === undefined && sc === undefined) return false;
      const head = Buffer.from(f.message.buffer, f.message.byteOffset, Math.min(f.message.byteLength, 32)).toString('latin1');
      if (INTERNAL.some((p) => head.startsWith(p))) {
        guard?.check(topic + '\x01', f.message.length, f.except, f.tags);
        const sender = f.except ? sockets.get(f.except) : undefined;
        let n = 0;
        if (ch !== undefined) n += publishTo(ch.allTopic, f.message, sender);
        if (cg !== undefined) n += publishTo(cg.internal, f.message, sender);
        if (sc !== undefined) n += publishTo(sc.allTopic, f.message, sender);
        if (n > 0) meters.delivered(f.app, f.message, n);
      }
      return false; // plain subscribers get it natively as well
    },
  };

  return {
    deliver(msg) {
      const key = topicOf(msg.app, msg.channel);
      const ch = channels.get(key);
      const cg = filtered.get(key);
      const sc = msg.serial === undefined ? undefined : serials.get(key);
      if (ch === undefined && cg === undefined && sc === undefined) return; // a shared interest slot, or everyone left
      // rule 6 (may pause sockets); the tags: a filtered socket counts only what matches
      guard?.check(key + '\x01', msg.full.length, msg.except, msg.tags ?? null);
      const sender = msg.except ? sockets.get(msg.except) : undefined;
      if (ch !== undefined) deliverStream(msg.app, ch, -1, msg.stream, msg.full, msg.deltas, msg.dropped, sender);
      if (cg !== undefined) deliverGroups(msg, cg, sender);
      if (sc !== undefined) deliverSerial(msg, sc, msg.serial!, sender);
    },
    inbound,
  };
}
