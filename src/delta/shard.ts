// The shard's part of delta compression: which of its sockets take deltas on which
// channel, and the fan-out of the sequencer's `delta` frames (delta/sequencer.ts). This
// file is its side facing the connection logic (opt-in, subscribe, unsubscribe, slow
// consumers, close); the subscriber sets and their stream stepping are in
// delta/subscribers.ts, the sets by channel and their registration with the sequencer in
// delta/registry.ts, the fan-out in delta/deliver.ts, and what it needs of a connection
// (ws/types.ts Socket, SocketData: ws/ sits above delta/) in delta/socket.ts.
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
//  9. History channels (docs/history.md, "With delta compression"; memory driver): their
//     frames come from the sequencer once the channel's owner numbered them, with the
//     serial. A subscription with positions (`recover`) is in the channel's set with
//     positions (delta/registry.ts `serials`), whose frames carry `__serial` / `"serial"`.
//     A subscription with a rewind or positions joins its set *held* (paused, rule 6, and
//     not resumed by the slow-consumer guard) until its history answer, which the owner
//     sends through the sequencer behind the frames of every message ≤ S; release() then
//     resumes it out of step, so its next message of each stream goes full (the client
//     has the replayed messages as plain ones, not as bases).

import type { Logger } from 'pino';
import type { Fanout } from '../channels/fanout';
import type { FilterHandle } from '../channels/filtered';
import type { InboundStage } from '../channels/publisher';
import type { Interest } from '../channels/interest';
import { topicOf } from '../channels/topic';
import type { AppConfig, Config } from '../config/types';
import type { CompiledFilter } from '../filter/compile';
import { Ev } from '../protocol/events';
import { frame } from '../protocol/frames';
import { metersFor } from '../metrics/meters';
import { noMetrics, type MetricsSink } from '../metrics/types';
import { createDeltaDelivery, type DeltaFrame, type DeltaGuard } from './deliver';
import { DeltaRegistry, type RegisterFilter } from './registry';
import { ChannelSettings, parseSubscriptionDelta, resolveSubscription, wireAlgo, type Algo } from './settings';
import type { DeltaSocket, DeltaSocketData, SendFrame, SocketDelta } from './socket';
import type { CacheStates } from './streams';
import { stepIn, stepOutAll, streamOf, type FilterGroup } from './subscribers';

/** S: the shard's connection type (delta/socket.ts). */
export interface DeltaShardDeps<S extends DeltaSocket> {
  config: Config;
  uws: Fanout;
  sockets: ReadonlyMap<string, S>;
  /** This shard's bits of the delta interest tables (one per algorithm). */
  interest: Record<Algo, Interest>;
  /** Asks the sequencer for a channel's kept messages (delta_cache_sync). */
  states(app: string, channel: string, filter?: string): Promise<CacheStates & { conflation_key: string | null }>;
  register: RegisterFilter;
  /** ws/send.ts sendFrame: pusher:delta_compression_enabled and delta_cache_sync. */
  sendFrame: SendFrame<S>;
  /** The filter stage (channels/filtered.ts): a filtered subscription made before the opt-in leaves it. */
  filters?: { remove(topic: string, ws: S, handle: FilterHandle): void } | null;
  out(canonical: string): string;
  log: Logger;
  metrics?: MetricsSink;
  guard?: DeltaGuard | null;
  now?: () => number;
}

export interface DeltaShard<S extends DeltaSocket> {
  /** pusher:enable_delta_compression. */
  enable(ws: S, d: DeltaSocketData<S>): void;
  /** The algorithm for this subscription, null for plain, or an error message for a bad `delta`. */
  resolve(d: DeltaSocketData<S>, app: AppConfig, channel: string, delta: unknown): Algo | null | { error: string };
  /**
   * Subscribes the socket to the channel's delta topic (instead of the plain one), or with a
   * tag filter to its group's (rule 8); `history`: rule 9 (`serial`: with positions, `held`:
   * until release()).
   */
  subscribe(ws: S, d: DeltaSocketData<S>, app: AppConfig, channel: string, algo: Algo, filter?: CompiledFilter | null, history?: { serial: boolean; held: boolean }): void;
  /** Rule 9: the history answer was sent; the held subscription receives from now on. */
  release(ws: S, d: DeltaSocketData<S>, channel: string): void;
  /** True when it was a delta subscription (its topics are left). */
  unsubscribe(ws: S, d: DeltaSocketData<S>, app: string, channel: string): boolean;
  /** The socket closed: forget it everywhere (uWS has left its topics). */
  dropAll(d: DeltaSocketData<S>, ws: S): void;
  /** pusher:delta_sync_error from the client: its streams of the channel restart in full. */
  syncError(ws: S, d: DeltaSocketData<S>, data: unknown): void;
  deliver(msg: DeltaFrame): void;
  /** Rule 6: the socket's delta subscription of `channel` stops / starts receiving. */
  pause(ws: S, d: DeltaSocketData<S>, channel: string): void;
  resume(ws: S, d: DeltaSocketData<S>, channel: string): void;
  /** Rule 4. */
  inbound: InboundStage;
  sweep(now: number): void;
}

export function createDeltaShard<S extends DeltaSocket>(deps: DeltaShardDeps<S>): DeltaShard<S> {
  const { config, log } = deps;
  const dc = config.delta_compression;
  const now = deps.now ?? Date.now;
  const settings = new ChannelSettings(config.apps);
  const sets = new DeltaRegistry<S>(deps.register, log);
  const defaultAlgo = wireAlgo(dc.algorithm);
  const maxAgeMs = dc.max_state_age_secs * 1000;
  const meters = metersFor(deps.metrics ?? noMetrics);
  const delivery = createDeltaDelivery({
    uws: deps.uws, sockets: deps.sockets, sets, meters, guard: deps.guard ?? null, now,
    epochChanged: (channel, epoch, serial) => frame(deps.out(Ev.Recovery), { epoch, serial, recovered: false, missed: 0, reason: 'epoch_changed' }, channel),
  });

  function socketDelta(d: DeltaSocketData<S>): SocketDelta<S> {
    d.delta ??= { algo: null, channels: new Map(), filtered: new Map() };
    return d.delta;
  }

  function cacheSync(ws: S, d: DeltaSocketData<S>, app: string, channel: string, algo: Algo, group: FilterGroup<S> | null): void {
    deps.states(app, channel, group?.filter.key).then((r) => {
      const ch = sets.of(d, channel);
      // a paused socket (rule 6) gets full messages once resumed
      if (d.closed || ch === undefined || !ch.sockets.has(ws) || d.delta?.channels.get(channel) !== algo || (group !== null && ch !== group)) return;
      ws.cork(() => {
        deps.sendFrame(meters, ws, app, Ev.DeltaCacheSync, frame(deps.out(Ev.DeltaCacheSync), JSON.stringify({ conflation_key: r.conflation_key, states: r.states }), channel));
        // the socket now holds every stream's latest message (sequencer rule 2)
        for (const id of r.streams) {
          const st = streamOf(ch, id, now());
          if (!st.inStep.has(ws)) stepIn(st, ws, algo);
        }
      });
    }, (err: Error) => log.warn({ err, channel }, 'delta_cache_sync: no answer from the sequencer; the client starts from full messages'));
  }

  return {
    enable(ws, d) {
      const on = dc.enabled;
      deps.sendFrame(meters, ws, d.app?.id ?? '', Ev.DeltaEnabled, frame(deps.out(Ev.DeltaEnabled), on ? { enabled: true, algorithm: defaultAlgo } : { enabled: false }));
      if (!on || !d.app) return;
      const sd = socketDelta(d);
      if (sd.algo !== null) return;
      sd.algo = defaultAlgo;
      // (a history subscription with a rewind or positions stays as it is: rule 9 applies
      // from its subscribe only, which the plug-in sends after the opt-in)
      // Subscriptions made before the opt-in take deltas from now on (pusher-js sends its
      // subscribes on connect, before a wrapper can send pusher:enable_delta_compression);
      // a tag-filtered one leaves the filter stage for its filter group (rule 8).
      for (const [channel, sub] of d.channels) {
        if (!sub.joined || sd.channels.has(channel) || sub.history !== undefined) continue;
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

    subscribe(ws, d, app, channel, algo, filter, history) {
      const sd = socketDelta(d);
      sd.channels.set(channel, algo);
      // interest before the subscription shows (channels/interest.ts, invariant 3)
      deps.interest[algo].add(app.id, channel);
      let group: FilterGroup<S> | null = null;
      if (history?.serial) (sd.serial ??= new Set()).add(channel);
      if (filter) group = sets.joinGroup(ws, d, app.id, channel, filter, algo);
      else sets.join(ws, app.id, channel, algo, history?.serial === true);
      if (history?.held) {
        this.pause(ws, d, channel);
        (sd.held ??= new Set()).add(channel);
      }
      if (settings.of(app.id, channel).conflationKey !== null) cacheSync(ws, d, app.id, channel, algo, group);
    },

    release(ws, d, channel) {
      if (!d.delta?.held?.delete(channel)) return;
      this.resume(ws, d, channel);
    },

    unsubscribe(ws, d, app, channel) {
      const algo = d.delta?.channels.get(channel);
      if (algo === undefined) return false;
      d.delta!.channels.delete(channel);
      d.delta!.held?.delete(channel);
      deps.interest[algo].remove(app, channel);
      sets.leave(ws, d, app, channel);
      return true;
    },

    dropAll(d, ws) {
      const sd = d.delta;
      if (!sd || !d.app) return;
      sd.held?.clear();
      for (const [channel, algo] of sd.channels) {
        deps.interest[algo].remove(d.app.id, channel);
        sets.leave(ws, d, d.app.id, channel);
      }
      sd.channels.clear();
    },

    syncError(ws, d, data) {
      const channel = typeof data === 'object' && data !== null ? (data as { channel?: unknown }).channel : undefined;
      if (typeof channel !== 'string' || !d.delta?.channels.has(channel)) return;
      const ch = sets.of(d, channel);
      if (ch !== undefined) stepOutAll(ch, ws);
    },

    deliver: delivery.deliver,

    pause(ws, d, channel) {
      const ch = sets.of(d, channel);
      const algo = ch?.sockets.get(ws);
      if (ch === undefined || algo === undefined) return; // not a delta subscription, or paused
      ch.sockets.delete(ws);
      ch.paused.set(ws, algo);
      ws.unsubscribe(ch.allTopic);
      const internal = sets.internalOf(ch, d.app!.id, channel);
      if (internal !== undefined) ws.unsubscribe(internal);
      stepOutAll(ch, ws);
    },

    resume(ws, d, channel) {
      if (d.delta?.held?.has(channel)) return; // rule 9: release() resumes it
      const ch = sets.of(d, channel);
      const algo = ch?.paused.get(ws);
      if (ch === undefined || algo === undefined) return;
      ch.paused.delete(ws);
      ch.sockets.set(ws, algo);
      ws.subscribe(ch.allTopic);
      const internal = sets.internalOf(ch, d.app!.id, channel);
      if (internal !== undefined) ws.subscribe(internal);
    },

    inbound: delivery.inbound,

    sweep(t) {
      sets.dropIdle(t, maxAgeMs);
    },
  };
}
