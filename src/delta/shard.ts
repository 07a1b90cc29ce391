// The shard's part of delta compression: which of its sockets take deltas on which
// channel, and the fan-out of the sequencer's `delta` frames (delta/sequencer.ts).
//
//   uWS topics of a channel C (plain subscribers stay on `app C`, channels/topic.ts)
//     `app C\x01`          every delta socket of C: full messages, member events, counts
//     `app C\x01<id>f|x`   the sockets in step with stream <id> (fossil | xdelta3): the
//                          pusher:delta of a message, computed once by the sequencer,
//                          goes to them with one native publish
//
// Rules
//  1. A delta socket is in step with a stream when it holds the stream's latest message.
//     In-step sockets get the delta natively; the others (late joiners, sockets that
//     reported pusher:delta_sync_error, the socket a publish excluded) get the full
//     message, visited in JavaScript, and step in. In the steady state every socket is in
//     step and nothing is visited: the check is one size comparison.
//  2. A full message (no base, the interval, below min_message_size, not smaller) goes
//     natively to every delta socket of the channel and steps them all in.
//  3. A socket a publish excluded did not get that message: it steps out of the stream.
//  4. Frames that do not come through the sequencer (member events, subscription counts)
//     reach the delta sockets through the inbound stage: the same bytes on `app C\x01`.
//  5. The shard never computes a delta; it only knows stream ids, never seq numbers.
//  6. A slow consumer (ws/backpressure.ts) is paused: out of the channel's delta topics and
//     of every stream, skipped by rule 1, until the guard resumes it; then it is out of
//     step everywhere, so its next message of each stream goes full. The guard sees each
//     frame for the delta sockets (`check` on `app C\x01`) before it is published.
//  7. messages_sent_total / message_bytes_sent_total count what is handed to uWS, each
//     frame with its own event and size (a pusher:delta counts as pusher:delta, its bytes).

import type { Logger } from 'pino';
import type { ControlMsg, PublishFrame } from '../bus/messages';
import type { Fanout } from '../channels/fanout';
import type { InboundStage } from '../channels/publisher';
import type { Interest } from '../channels/interest';
import { topicOf } from '../channels/topic';
import type { AppConfig, Config } from '../config/types';
import { Ev } from '../protocol/events';
import { frame } from '../protocol/frames';
import { metersFor, sentLabelText } from '../metrics/meters';
import { noMetrics, type MetricsSink } from '../metrics/types';
import { sendFrame } from '../ws/send';
import type { Socket, SocketData } from '../ws/types';
import { ALGOS, ChannelSettings, parseSubscriptionDelta, resolveSubscription, wireAlgo, type Algo } from './settings';
import type { CacheStates } from './streams';

export type DeltaFrame = Extract<ControlMsg, { type: 'delta' }>;

/** Per-socket delta state (ws/types.ts SocketData.delta). */
export interface SocketDelta {
  /** The algorithm the socket opted into with pusher:enable_delta_compression, or null. */
  algo: Algo | null;
  /** Delta subscriptions of this socket: channel → algorithm. */
  channels: Map<string, Algo>;
}

interface StreamSubs {
  /** Topic per algorithm (ALGOS order). */
  topics: string[];
  inStep: Map<Socket, Algo>;
  lastUsed: number;
}

interface ChannelSubs {
  allTopic: string;
  topic: string;
  sockets: Map<Socket, Algo>;
  /** Slow consumers taken out of the channel's fan-out (rule 6). */
  paused: Map<Socket, Algo>;
  streams: Map<number, StreamSubs>;
}

/** The slow-consumer guard's check (ws/backpressure.ts), before a publish to a delta socket's topics. */
export interface DeltaGuard {
  check(topic: string, bytes: number, except: string): void;
}

export interface DeltaShardDeps {
  config: Config;
  uws: Fanout;
  sockets: ReadonlyMap<string, Socket>;
  /** This shard's bits of the delta interest tables (one per algorithm). */
  interest: Record<Algo, Interest>;
  /** Asks the sequencer for a channel's kept messages (delta_cache_sync). */
  states(app: string, channel: string): Promise<CacheStates & { conflation_key: string | null }>;
  out(canonical: string): string;
  log: Logger;
  metrics?: MetricsSink;
  guard?: DeltaGuard | null;
  now?: () => number;
}

export interface DeltaShard {
  /** pusher:enable_delta_compression. */
  enable(ws: Socket, d: SocketData): void;
  /** The algorithm for this subscription, null for plain, or an error message for a bad `delta`. */
  resolve(d: SocketData, app: AppConfig, channel: string, delta: unknown): Algo | null | { error: string };
  /** Subscribes the socket to the channel's delta topic (instead of the plain one). */
  subscribe(ws: Socket, d: SocketData, app: AppConfig, channel: string, algo: Algo): void;
  /** True when it was a delta subscription (its topics are left). */
  unsubscribe(ws: Socket, d: SocketData, app: string, channel: string): boolean;
  /** The socket closed: forget it everywhere (uWS has left its topics). */
  dropAll(d: SocketData, ws: Socket): void;
  /** pusher:delta_sync_error from the client: its streams of the channel restart in full. */
  syncError(ws: Socket, d: SocketData, data: unknown): void;
  deliver(msg: DeltaFrame): void;
  /** Rule 6: the socket's delta subscription of `channel` stops / starts receiving. */
  pause(ws: Socket, d: SocketData, channel: string): void;
  resume(ws: Socket, d: SocketData, channel: string): void;
  /** Rule 4. */
  inbound: InboundStage;
  sweep(now: number): void;
}

const INTERNAL = ['{"event":"pusher_internal:', '{"event":"proto_internal:'];

export function createDeltaShard(deps: DeltaShardDeps): DeltaShard {
  const { config, uws, sockets, log } = deps;
  const dc = config.delta_compression;
  const now = deps.now ?? Date.now;
  const settings = new ChannelSettings(config.apps);
  const channels = new Map<string, ChannelSubs>();
  const defaultAlgo = wireAlgo(dc.algorithm);
  const maxAgeMs = dc.max_state_age_secs * 1000;
  const meters = metersFor(deps.metrics ?? noMetrics);
  const guard = deps.guard ?? null;

  function stream(ch: ChannelSubs, id: number): StreamSubs {
    let st = ch.streams.get(id);
    if (st === undefined) {
      const base = ch.topic + '\x01' + id;
      st = { topics: [base + 'f', base + 'x'], inStep: new Map(), lastUsed: now() };
      ch.streams.set(id, st);
    }
    return st;
  }

  function stepIn(st: StreamSubs, ws: Socket, algo: Algo): void {
    st.inStep.set(ws, algo);
    ws.subscribe(st.topics[ALGOS.indexOf(algo)]);
  }

  function stepOut(st: StreamSubs, ws: Socket): void {
    const algo = st.inStep.get(ws);
    if (algo === undefined) return;
    st.inStep.delete(ws);
    if (!ws.getUserData().closed) ws.unsubscribe(st.topics[ALGOS.indexOf(algo)]);
  }

  function dropStream(ch: ChannelSubs, id: number): void {
    const st = ch.streams.get(id);
    if (st === undefined) return;
    for (const ws of [...st.inStep.keys()]) stepOut(st, ws);
    ch.streams.delete(id);
  }

  /** Native publish, skipping `sender` natively when it is on the topic; how many it reached (when counting). */
  function publishTo(topic: string, bytes: string | Uint8Array, sender: Socket | undefined): number {
    if (sender !== undefined && sender.isSubscribed(topic)) {
      uws.publishFrom(sender, topic, bytes);
      return meters.enabled ? uws.numSubscribers(topic) - 1 : 0;
    }
    uws.publish(topic, bytes, false);
    return meters.enabled ? uws.numSubscribers(topic) : 0;
  }

  function socketDelta(d: SocketData): SocketDelta {
    d.delta ??= { algo: null, channels: new Map() };
    return d.delta;
  }

  function forget(ch: ChannelSubs, key: string, ws: Socket): void {
    ch.sockets.delete(ws);
    ch.paused.delete(ws);
    for (const st of ch.streams.values()) {
      if (st.inStep.has(ws)) stepOut(st, ws);
    }
    if (ch.sockets.size === 0 && ch.paused.size === 0) {
      for (const id of [...ch.streams.keys()]) dropStream(ch, id);
      channels.delete(key);
    }
  }

  function cacheSync(ws: Socket, d: SocketData, app: string, channel: string, algo: Algo): void {
    deps.states(app, channel).then((r) => {
      const key = topicOf(app, channel);
      const ch = channels.get(key);
      // a paused socket (rule 6) gets full messages once resumed
      if (d.closed || ch === undefined || !ch.sockets.has(ws) || d.delta?.channels.get(channel) !== algo) return;
      ws.cork(() => {
        sendFrame(meters, ws, app, Ev.DeltaCacheSync, frame(deps.out(Ev.DeltaCacheSync), JSON.stringify({ conflation_key: r.conflation_key, states: r.states }), channel));
        // the socket now holds every stream's latest message (sequencer rule 2)
        for (const id of r.streams) {
          const st = stream(ch, id);
          if (!st.inStep.has(ws)) stepIn(st, ws, algo);
        }
      });
    }, (err: Error) => log.warn({ err, channel }, 'delta_cache_sync: no answer from the sequencer; the client starts from full messages'));
  }

  const inbound: InboundStage = {
    deliver(f: PublishFrame, topic: string): boolean {
      if (channels.size === 0) return false;
      const ch = channels.get(topic);
      if (ch === undefined) return false;
      const head = Buffer.from(f.message.buffer, f.message.byteOffset, Math.min(f.message.byteLength, 32)).toString('latin1');
      if (INTERNAL.some((p) => head.startsWith(p))) {
        guard?.check(ch.allTopic, f.message.length, f.except);
        const n = publishTo(ch.allTopic, f.message, f.except ? sockets.get(f.except) : undefined);
        if (n > 0) meters.delivered(f.app, f.message, n);
      }
      return false; // plain subscribers get it natively as well
    },
  };

  return {
    enable(ws, d) {
      const on = dc.enabled;
      sendFrame(meters, ws, d.app?.id ?? '', Ev.DeltaEnabled, frame(deps.out(Ev.DeltaEnabled), on ? { enabled: true, algorithm: defaultAlgo } : { enabled: false }));
      if (!on || !d.app) return;
      const sd = socketDelta(d);
      if (sd.algo !== null) return;
      sd.algo = defaultAlgo;
      // Subscriptions made before the opt-in take deltas from now on (pusher-js sends its
      // subscribes on connect, before a wrapper can send pusher:enable_delta_compression).
      // A tag-filtered one stays in the filter index: it gets full messages (ws/subscribe.ts).
      for (const [channel, sub] of d.channels) {
        if (!sub.joined || sub.filter !== undefined || sd.channels.has(channel)) continue;
        const algo = this.resolve(d, d.app, channel, undefined);
        if (algo === null || typeof algo === 'object') continue;
        ws.unsubscribe(topicOf(d.app.id, channel));
        this.subscribe(ws, d, d.app, channel, algo);
      }
    },

    resolve(d, app, channel, delta) {
      const sub = parseSubscriptionDelta(delta);
      if (typeof sub === 'string') return { error: sub };
      const algo = resolveSubscription(config, settings.of(app.id, channel), channel, sub, d.delta?.algo ?? null);
      if (algo === null) return null;
      // max_channel_states_per_socket: further channels of this socket stay plain
      if ((d.delta?.channels.size ?? 0) >= dc.max_channel_states_per_socket) return null;
      return algo;
    },

    subscribe(ws, d, app, channel, algo) {
      const key = topicOf(app.id, channel);
      let ch = channels.get(key);
      if (ch === undefined) {
        ch = { allTopic: key + '\x01', topic: key, sockets: new Map(), paused: new Map(), streams: new Map() };
        channels.set(key, ch);
      }
      socketDelta(d).channels.set(channel, algo);
      // interest before the subscription shows (channels/interest.ts, invariant 3)
      deps.interest[algo].add(app.id, channel);
      ch.sockets.set(ws, algo);
      ws.subscribe(ch.allTopic);
      if (settings.of(app.id, channel).conflationKey !== null) cacheSync(ws, d, app.id, channel, algo);
    },

    unsubscribe(ws, d, app, channel) {
      const algo = d.delta?.channels.get(channel);
      if (algo === undefined) return false;
      d.delta!.channels.delete(channel);
      deps.interest[algo].remove(app, channel);
      const key = topicOf(app, channel);
      const ch = channels.get(key);
      if (ch !== undefined) {
        ws.unsubscribe(ch.allTopic);
        forget(ch, key, ws);
      }
      return true;
    },

    dropAll(d, ws) {
      const sd = d.delta;
      if (!sd || !d.app) return;
      for (const [channel, algo] of sd.channels) {
        deps.interest[algo].remove(d.app.id, channel);
        const key = topicOf(d.app.id, channel);
        const ch = channels.get(key);
        if (ch !== undefined) forget(ch, key, ws);
      }
      sd.channels.clear();
    },

    syncError(ws, d, data) {
      const channel = typeof data === 'object' && data !== null ? (data as { channel?: unknown }).channel : undefined;
      if (typeof channel !== 'string' || !d.app || !d.delta?.channels.has(channel)) return;
      const ch = channels.get(topicOf(d.app.id, channel));
      if (ch === undefined) return;
      for (const st of ch.streams.values()) stepOut(st, ws);
    },

    deliver(msg) {
      const ch = channels.get(topicOf(msg.app, msg.channel));
      if (ch === undefined) return; // a shared interest slot, or everyone left
      const full = msg.full;
      guard?.check(ch.allTopic, full.length, msg.except); // rule 6 (may pause sockets of ch)
      for (const id of msg.dropped) dropStream(ch, id);
      const st = stream(ch, msg.stream);
      st.lastUsed = now();
      let sender = msg.except ? sockets.get(msg.except) : undefined;
      if (sender !== undefined && !ch.sockets.has(sender)) sender = undefined;
      // rule 7: the full message's label and size, only when counting
      const fullLabel = meters.enabled ? sentLabelText(full) : '';
      const fullBytes = meters.enabled ? Buffer.byteLength(full) : 0;
      if (msg.deltas === null) {
        meters.deliveredText(msg.app, fullLabel, fullBytes, publishTo(ch.allTopic, full, sender)); // rule 2
      } else {
        for (let i = 0; i < ALGOS.length; i++) {
          const delta = msg.deltas[i];
          if (delta !== null) {
            const n = publishTo(st.topics[i], delta, sender);
            if (n > 0) meters.deliveredText(msg.app, Ev.Delta, Buffer.byteLength(delta), n);
          } else if (st.inStep.size > 0) {
            // no delta of this algorithm (not smaller): its in-step sockets get the full message
            for (const [ws, algo] of st.inStep) {
              if (algo === ALGOS[i] && ws !== sender) meters.sent(msg.app, fullLabel, ws.send(full, false), fullBytes);
            }
          }
        }
      }
      // rule 1: the sockets not in step get the full message and step in
      if (st.inStep.size !== ch.sockets.size) {
        for (const [ws, algo] of ch.sockets) {
          if (ws === sender || st.inStep.has(ws)) continue;
          if (msg.deltas !== null) ws.cork(() => meters.sent(msg.app, fullLabel, ws.send(full, false), fullBytes));
          stepIn(st, ws, algo);
        }
      }
      if (sender !== undefined) stepOut(st, sender); // rule 3
    },

    pause(ws, d, channel) {
      const ch = d.app ? channels.get(topicOf(d.app.id, channel)) : undefined;
      const algo = ch?.sockets.get(ws);
      if (ch === undefined || algo === undefined) return; // not a delta subscription, or paused
      ch.sockets.delete(ws);
      ch.paused.set(ws, algo);
      ws.unsubscribe(ch.allTopic);
      for (const st of ch.streams.values()) stepOut(st, ws);
    },

    resume(ws, d, channel) {
      const ch = d.app ? channels.get(topicOf(d.app.id, channel)) : undefined;
      const algo = ch?.paused.get(ws);
      if (ch === undefined || algo === undefined) return;
      ch.paused.delete(ws);
      ch.sockets.set(ws, algo);
      ws.subscribe(ch.allTopic);
    },

    inbound,

    sweep(t) {
      for (const ch of channels.values()) {
        for (const [id, st] of ch.streams) if (t - st.lastUsed > maxAgeMs) dropStream(ch, id);
      }
    },
  };
}
