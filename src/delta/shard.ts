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
//  8. Tag-filtered delta subscriptions (spec: filter, then delta): the sockets of a channel
//     with an equal filter (CompiledFilter.key) and algorithm form a group with topics of
//     its own, `app C\x02<a><filter>\x01` (full) and `…\x01<id>f|x` (in step), and share
//     the filter's streams, which the sequencer numbers and compresses once per message
//     (sequencer rule 4): the group follows rules 1–3 and 6 on those streams, so each
//     subscriber's deltas are against the messages it received. Member events and counts
//     reach them on `app C\x01*`. A group's first socket registers the filter with the
//     sequencer (`delta_filter`), its last one unregisters it. Until the sequencer's answer
//     (which it sends after every frame decided before the registration, and before any
//     decided after) the group is *pending*: each frame's tags are tested here against its
//     filter and a match goes to its sockets as the plain message (no `__` fields), so no
//     message is lost or doubled while it registers; from the answer on, only the
//     sequencer's filter streams reach it.

import type { Logger } from 'pino';
import type { ControlMsg, FilteredDelta, FrameTags, PublishFrame } from '../bus/messages';
import type { Fanout } from '../channels/fanout';
import type { FilteredSubscriptions } from '../channels/filtered';
import type { InboundStage } from '../channels/publisher';
import type { Interest } from '../channels/interest';
import { publishExcept } from '../channels/exclude';
import { topicOf } from '../channels/topic';
import type { AppConfig, Config } from '../config/types';
import type { CompiledFilter } from '../filter/compile';
import { parseTags } from '../filter/tags';
import { Ev } from '../protocol/events';
import { frame } from '../protocol/frames';
import { metersFor, sentLabelText } from '../metrics/meters';
import { noMetrics, type MetricsSink } from '../metrics/types';
import { sendFrame } from '../ws/send';
import type { Socket, SocketData } from '../ws/types';
import { ALGOS, ChannelSettings, parseSubscriptionDelta, resolveSubscription, wireAlgo, type Algo } from './settings';
import type { CacheStates } from './streams';
import { plainMessage } from './wire';

export type DeltaFrame = Extract<ControlMsg, { type: 'delta' }>;

/** Per-socket delta state (ws/types.ts SocketData.delta). */
export interface SocketDelta {
  /** The algorithm the socket opted into with pusher:enable_delta_compression, or null. */
  algo: Algo | null;
  /** Delta subscriptions of this socket: channel → algorithm. */
  channels: Map<string, Algo>;
  /** Its tag-filtered ones (rule 8): channel → the group it is in. */
  filtered: Map<string, FilterGroup>;
}

interface StreamSubs {
  /** Topic per algorithm (ALGOS order). */
  topics: string[];
  inStep: Map<Socket, Algo>;
  lastUsed: number;
}

interface ChannelSubs {
  /** Unfiltered sets: its sockets per algorithm (ALGOS order), registered with the sequencer (its rule 5). */
  counts?: number[];
  allTopic: string;
  topic: string;
  sockets: Map<Socket, Algo>;
  /** Slow consumers taken out of the channel's fan-out (rule 6). */
  paused: Map<Socket, Algo>;
  streams: Map<number, StreamSubs>;
}

/** Rule 8: the sockets of a channel with one filter and algorithm. */
interface FilterGroup extends ChannelSubs {
  filter: CompiledFilter;
  algo: Algo;
  /** Until the sequencer has the registration. */
  pending: boolean;
}

/** Rule 8: the filter groups of a channel. */
interface ChannelGroups {
  /** Group id (algorithm letter + filter key) → group. */
  groups: Map<string, FilterGroup>;
  /** `app C\x01*`: member events and counts for every socket of the groups. */
  internal: string;
  pending: number;
}

const ALGO_LETTER = ['f', 'x'] as const;
const groupId = (algo: Algo, filter: string) => ALGO_LETTER[ALGOS.indexOf(algo)] + filter;

/** The slow-consumer guard's check (ws/backpressure.ts), before a publish to a delta socket's topics. */
export interface DeltaGuard {
  check(topic: string, bytes: number, except: string, tags?: FrameTags): void;
}

/** Rule 8: how the shard tells the sequencer about its filters (a request answered in order). */
export type RegisterFilter = (op: 'add' | 'remove', app: string, channel: string, filter: string, algo: Algo) => Promise<unknown>;

export interface DeltaShardDeps {
  config: Config;
  uws: Fanout;
  sockets: ReadonlyMap<string, Socket>;
  /** This shard's bits of the delta interest tables (one per algorithm). */
  interest: Record<Algo, Interest>;
  /** Asks the sequencer for a channel's kept messages (delta_cache_sync). */
  states(app: string, channel: string, filter?: string): Promise<CacheStates & { conflation_key: string | null }>;
  register: RegisterFilter;
  /** The filter stage (channels/filtered.ts): a filtered subscription made before the opt-in leaves it. */
  filters?: Pick<FilteredSubscriptions<Socket>, 'remove'> | null;
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
  /** Subscribes the socket to the channel's delta topic (instead of the plain one), or with a tag filter to its group's (rule 8). */
  subscribe(ws: Socket, d: SocketData, app: AppConfig, channel: string, algo: Algo, filter?: CompiledFilter | null): void;
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
  const filtered = new Map<string, ChannelGroups>();
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

  /** Native publish skipping `sender` (channels/exclude.ts); how many it reached (when counting). */
  function publishTo(topic: string, bytes: string | Uint8Array, sender: Socket | undefined): number {
    return publishExcept(uws, topic, bytes, sender, meters.enabled);
  }

  function socketDelta(d: SocketData): SocketDelta {
    d.delta ??= { algo: null, channels: new Map(), filtered: new Map() };
    return d.delta;
  }

  /** The socket leaves `ch`'s sets and streams; true when `ch` is empty now. */
  function leave(ch: ChannelSubs, ws: Socket): boolean {
    ch.sockets.delete(ws);
    ch.paused.delete(ws);
    for (const st of ch.streams.values()) {
      if (st.inStep.has(ws)) stepOut(st, ws);
    }
    if (ch.sockets.size > 0 || ch.paused.size > 0) return false;
    for (const id of [...ch.streams.keys()]) dropStream(ch, id);
    return true;
  }

  /** Sequencer rule 5: the shard's first / last unfiltered subscriber of (channel, algorithm). */
  function count(ch: ChannelSubs, app: string, channel: string, algo: Algo, by: 1 | -1): void {
    const counts = (ch.counts ??= ALGOS.map(() => 0));
    const i = ALGOS.indexOf(algo);
    counts[i] += by;
    if (counts[i] !== (by === 1 ? 1 : 0)) return;
    deps.register(by === 1 ? 'add' : 'remove', app, channel, '', algo)
      .catch((err: Error) => log.warn({ err, channel }, 'delta: the sequencer did not take a subscriber registration; its subscribers may get full messages'));
  }

  function forget(ch: ChannelSubs, key: string, ws: Socket, app: string, channel: string): void {
    const algo = ch.sockets.get(ws) ?? ch.paused.get(ws);
    if (algo !== undefined) count(ch, app, channel, algo, -1);
    if (leave(ch, ws)) channels.delete(key);
  }

  /** Rule 8: the group of (channel, filter, algorithm), registered with the sequencer when new. */
  function groupOf(app: string, channel: string, filter: CompiledFilter, algo: Algo): FilterGroup {
    const key = topicOf(app, channel);
    let cg = filtered.get(key);
    if (cg === undefined) filtered.set(key, (cg = { groups: new Map(), internal: key + '\x01*', pending: 0 }));
    const id = groupId(algo, filter.key);
    let g = cg.groups.get(id);
    if (g !== undefined) return g;
    const topic = key + '\x02' + id;
    const group: FilterGroup = { allTopic: topic + '\x01', topic, sockets: new Map(), paused: new Map(), streams: new Map(), filter, algo, pending: true };
    g = group;
    cg.groups.set(id, g);
    cg.pending++;
    const groups = cg;
    deps.register('add', app, channel, filter.key, algo).then(() => {
      if (groups.groups.get(id) !== group || !group.pending) return;
      group.pending = false;
      groups.pending--;
    }, (err: Error) => log.warn({ err, channel }, 'delta: the sequencer did not take a tag filter; its subscribers get full messages'));
    return g;
  }

  /** Rule 8: the socket leaves its group of `channel` (uWS has left its topics when it closed). */
  function leaveGroup(ws: Socket, d: SocketData, app: string, channel: string): void {
    const g = d.delta?.filtered.get(channel);
    if (g === undefined) return;
    d.delta!.filtered.delete(channel);
    const key = topicOf(app, channel);
    const cg = filtered.get(key);
    if (!d.closed) {
      ws.unsubscribe(g.allTopic);
      if (cg !== undefined) ws.unsubscribe(cg.internal);
    }
    if (!leave(g, ws) || cg === undefined) return;
    const id = groupId(g.algo, g.filter.key);
    if (cg.groups.get(id) !== g) return;
    cg.groups.delete(id);
    if (g.pending) cg.pending--;
    if (cg.groups.size === 0) filtered.delete(key);
    deps.register('remove', app, channel, g.filter.key, g.algo).catch((err: Error) => log.warn({ err, channel }, 'delta: a tag filter not unregistered from the sequencer'));
  }

  /** The socket's subscriber set of `channel`: its filter group, or the channel's. */
  function subsOf(d: SocketData, channel: string): ChannelSubs | undefined {
    if (!d.app) return undefined;
    return d.delta?.filtered.get(channel) ?? channels.get(topicOf(d.app.id, channel));
  }

  function cacheSync(ws: Socket, d: SocketData, app: string, channel: string, algo: Algo, group: FilterGroup | null): void {
    deps.states(app, channel, group?.filter.key).then((r) => {
      const ch = subsOf(d, channel);
      // a paused socket (rule 6) gets full messages once resumed
      if (d.closed || ch === undefined || !ch.sockets.has(ws) || d.delta?.channels.get(channel) !== algo || (group !== null && ch !== group)) return;
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

  /**
   * One message of stream `id` to the sockets of `ch` (rules 1–3): `only` the algorithm at
   * that index (a filter group) or every one (-1).
   */
  function deliverStream(app: string, ch: ChannelSubs, only: number, id: number, full: string, deltas: (string | null)[] | null, dropped: number[], except: Socket | undefined): void {
    for (const gone of dropped) dropStream(ch, gone);
    const st = stream(ch, id);
    st.lastUsed = now();
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
        } else if (st.inStep.size > 0) {
          // no delta of this algorithm (not smaller): its in-step sockets get the full message
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

  /** Rule 8: a frame to the filter groups of its channel. */
  function deliverGroups(msg: DeltaFrame, cg: ChannelGroups, except: Socket | undefined): void {
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
      if (channels.size === 0 && filtered.size === 0) return false;
      const ch = channels.get(topic);
      const cg = filtered.get(topic);
      if (ch === undefined && cg === undefined) return false;
      const head = Buffer.from(f.message.buffer, f.message.byteOffset, Math.min(f.message.byteLength, 32)).toString('latin1');
      if (INTERNAL.some((p) => head.startsWith(p))) {
        guard?.check(topic + '\x01', f.message.length, f.except, f.tags);
        const sender = f.except ? sockets.get(f.except) : undefined;
        let n = 0;
        if (ch !== undefined) n += publishTo(ch.allTopic, f.message, sender);
        if (cg !== undefined) n += publishTo(cg.internal, f.message, sender);
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
      // subscribes on connect, before a wrapper can send pusher:enable_delta_compression);
      // a tag-filtered one leaves the filter stage for its filter group (rule 8).
      for (const [channel, sub] of d.channels) {
        if (!sub.joined || sd.channels.has(channel)) continue;
        const algo = this.resolve(d, d.app, channel, undefined);
        if (algo === null || typeof algo === 'object') continue;
        if (sub.filter !== undefined) {
          if (!deps.filters || !sub.tagFilter) continue;
          deps.filters.remove(topicOf(d.app.id, channel), ws, sub.filter);
          sub.filter = undefined;
        } else {
          ws.unsubscribe(topicOf(d.app.id, channel));
        }
        this.subscribe(ws, d, d.app, channel, algo, sub.tagFilter);
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

    subscribe(ws, d, app, channel, algo, filter) {
      const key = topicOf(app.id, channel);
      const sd = socketDelta(d);
      sd.channels.set(channel, algo);
      // interest before the subscription shows (channels/interest.ts, invariant 3)
      deps.interest[algo].add(app.id, channel);
      let group: FilterGroup | null = null;
      if (filter) {
        group = groupOf(app.id, channel, filter, algo);
        sd.filtered.set(channel, group);
        group.sockets.set(ws, algo);
        ws.subscribe(group.allTopic);
        ws.subscribe(filtered.get(key)!.internal);
      } else {
        let ch = channels.get(key);
        if (ch === undefined) {
          ch = { allTopic: key + '\x01', topic: key, sockets: new Map(), paused: new Map(), streams: new Map() };
          channels.set(key, ch);
        }
        if (!ch.sockets.has(ws) && !ch.paused.has(ws)) count(ch, app.id, channel, algo, 1);
        ch.sockets.set(ws, algo);
        ws.subscribe(ch.allTopic);
      }
      if (settings.of(app.id, channel).conflationKey !== null) cacheSync(ws, d, app.id, channel, algo, group);
    },

    unsubscribe(ws, d, app, channel) {
      const algo = d.delta?.channels.get(channel);
      if (algo === undefined) return false;
      d.delta!.channels.delete(channel);
      deps.interest[algo].remove(app, channel);
      if (d.delta!.filtered.has(channel)) {
        leaveGroup(ws, d, app, channel);
        return true;
      }
      const key = topicOf(app, channel);
      const ch = channels.get(key);
      if (ch !== undefined) {
        ws.unsubscribe(ch.allTopic);
        forget(ch, key, ws, app, channel);
      }
      return true;
    },

    dropAll(d, ws) {
      const sd = d.delta;
      if (!sd || !d.app) return;
      for (const [channel, algo] of sd.channels) {
        deps.interest[algo].remove(d.app.id, channel);
        if (sd.filtered.has(channel)) {
          leaveGroup(ws, d, d.app.id, channel);
          continue;
        }
        const key = topicOf(d.app.id, channel);
        const ch = channels.get(key);
        if (ch !== undefined) forget(ch, key, ws, d.app.id, channel);
      }
      sd.channels.clear();
    },

    syncError(ws, d, data) {
      const channel = typeof data === 'object' && data !== null ? (data as { channel?: unknown }).channel : undefined;
      if (typeof channel !== 'string' || !d.delta?.channels.has(channel)) return;
      const ch = subsOf(d, channel);
      if (ch === undefined) return;
      for (const st of ch.streams.values()) stepOut(st, ws);
    },

    deliver(msg) {
      const key = topicOf(msg.app, msg.channel);
      const ch = channels.get(key);
      const cg = filtered.get(key);
      if (ch === undefined && cg === undefined) return; // a shared interest slot, or everyone left
      // rule 6 (may pause sockets); the tags: a filtered socket counts only what matches
      guard?.check(key + '\x01', msg.full.length, msg.except, msg.tags ?? null);
      const sender = msg.except ? sockets.get(msg.except) : undefined;
      if (ch !== undefined) deliverStream(msg.app, ch, -1, msg.stream, msg.full, msg.deltas, msg.dropped, sender);
      if (cg !== undefined) deliverGroups(msg, cg, sender);
    },

    pause(ws, d, channel) {
      const ch = subsOf(d, channel);
      const algo = ch?.sockets.get(ws);
      if (ch === undefined || algo === undefined) return; // not a delta subscription, or paused
      ch.sockets.delete(ws);
      ch.paused.set(ws, algo);
      ws.unsubscribe(ch.allTopic);
      const cg = ch === channels.get(ch.topic) ? undefined : filtered.get(topicOf(d.app!.id, channel));
      if (cg !== undefined) ws.unsubscribe(cg.internal);
      for (const st of ch.streams.values()) stepOut(st, ws);
    },

    resume(ws, d, channel) {
      const ch = subsOf(d, channel);
      const algo = ch?.paused.get(ws);
      if (ch === undefined || algo === undefined) return;
      ch.paused.delete(ws);
      ch.sockets.set(ws, algo);
      ws.subscribe(ch.allTopic);
      const cg = ch === channels.get(ch.topic) ? undefined : filtered.get(topicOf(d.app!.id, channel));
      if (cg !== undefined) ws.subscribe(cg.internal);
    },

    inbound,

    sweep(t) {
      const idle = (ch: ChannelSubs) => {
        for (const [id, st] of ch.streams) if (t - st.lastUsed > maxAgeMs) dropStream(ch, id);
      };
      for (const ch of channels.values()) idle(ch);
      for (const cg of filtered.values()) for (const g of cg.groups.values()) idle(g);
    },
  };
}
