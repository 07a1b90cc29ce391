// The shard side of history channels (docs/protocol.md "History, rewind and recovery"):
//
//   out      the publish pipeline's stage: an API or client event on a history channel
//            goes to the channel's owner (hist_pub) instead of the bus; the owner numbers
//            it and sends it back as `hist` to every shard with subscribers (history/owner.ts).
//            Channels without history: one settings lookup, no hop, not one byte more.
//   deliver  a `hist` frame: the plain bytes through the pipeline's inbound side (as any
//            publish: cache, backpressure, filters, native topic), and, when this shard has
//            subscriptions with positions, `,"__serial":N` inserted before the final `}` on
//            the channel's serial topic.
//   inbound  the channel's frames that are not history messages (presence member events,
//            subscription counts: the TAGS_ALL frames of channels/publisher.ts) reach the
//            subscriptions with positions too, on the serial topic (plain ones) and through
//            the filter stage under it (tag-filtered ones): they receive what a stock
//            subscription receives, messages with `__serial` added. Delta ones get them in
//            their delta set (delta/shard.ts rule 4). Other frames: one comparison. And
//            every history subscription waiting for its answer (attach) gets them on the
//            channel's pending topic.
//   attach   a subscription with a rewind or a `recover`: subscription_succeeded first, then
//            the answer (recovery frame, replay in chunks: history/replay.ts), then the topic;
//            until then the socket is on the pending topic only (member events and counts).
//            An answer travels behind every message numbered before it (≤ S, in it) and
//            ahead of every later one (> S, live): no gap, no duplicate.

import type { Logger } from 'pino';
import { TAGS_ALL, type ControlMsg, type HistSubReply } from '../bus/messages';
import { publishExcept } from '../channels/exclude';
import type { Fanout } from '../channels/fanout';
import type { FilteredSocket, FilteredSubscriptions } from '../channels/filtered';
import type { InboundStage, OutboundStage, Outgoing, Publisher } from '../channels/publisher';
import { topicOf } from '../channels/topic';
import type { AppConfig } from '../config/types';
import { withSerial } from '../delta/wire';
import type { CompiledFilter } from '../filter/compile';
import { parseTags } from '../filter/tags';
import { metersFor, sendFrame } from '../metrics/meters';
import type { MetricsSink } from '../metrics/types';
import { Ev } from '../protocol/events';
import { frame } from '../protocol/frames';
import type { HistFrame } from './owner';
import { parseRecover, pendingTopicOf, serialTopicOf, type Recover } from './recover';
import type { HistorySettings } from './settings';
import { logLimited } from '../log';
import { hasMore, REPLAY_CHUNK_BYTES, REPLAY_MAX_ROUNDS, ReplayBudgets, whenPaced } from './replay';
import type { ConnSocket } from '../channels/conn';

/** What this file needs of a WebSocket (ws/types.ts Socket; history/ sits below ws/). */
export type HistorySocket = Omit<ConnSocket, 'end'>;
type Socket = HistorySocket;
/** A socket's state and subscription record, as far as history needs them (ws/types.ts). */
type SocketData = { closed: boolean; channels: ReadonlyMap<string, unknown> };
type Subscription = { history?: { serial: boolean; attached?: boolean } };
/** The epoch and serial of the last numbered message a shard sent on a serial topic. */
type Seen = { epoch: string; serial: number; app: string; channel: string };

/** How attach() joins a subscription that is not a plain one (ws/subscribe.ts). */
export interface AttachHow {
  /** What the subscription receives from once answered (instead of the channel's topic or serial topic). */
  join(): void;
  /** A delta subscription (held in its delta set): asked through the delta sequencer. */
  relay?: boolean;
  /** A tag-filtered subscription: its rewind and replay hold the messages that pass it only. */
  filter?: CompiledFilter;
}

/** What the filter stage (channels/filtered.ts) does for history: the frames with `__serial` to filtered subscriptions with positions, registered under the serial topic. */
export type HistoryFilters = Pick<FilteredSubscriptions<FilteredSocket>, 'deliver' | 'count'>;

/** Numbered messages of one channel a shard holds while it fetches what it missed; past it the fetch is given up (reported as a gap). */
const MAX_HELD = 10_000;

export { parseRecover, pendingTopicOf, serialTopicOf, type Recover } from './recover';

export type HistPub = Extract<ControlMsg, { type: 'hist_pub' }>;
/** `delta`: a delta subscription's question, answered through the delta sequencer (its answer follows the deltas of the messages ≤ S). */
export interface HistQuestion { app: string; channel: string; rewind: number; recover: { epoch: string; serial: number } | null; delta?: boolean; cap?: number }

/** What subscribe.ts does with a subscription: nothing special, a no_history answer, or attach(). */
export type Plan = null | { kind: 'no_history' } | { kind: 'attach'; rewind: number; recover: Recover };

export interface HistoryShardDeps {
  settings: HistorySettings;
  /** The shard's native publishes: its WebSockets and the HTTP fallback sessions on a topic (fallback/hub.ts). */
  fanout: Fanout;
  sockets: ReadonlyMap<string, Socket>;
  /**
   * Where a history channel's message goes to be numbered (the memory driver: its owner
   * shard; redis: the numbering script). May throw HistoryUnavailableError (not published).
   */
  number(msg: HistPub): void;
  /**
   * A subscription's question (position, rewind, resume). `answer` must run in the turn in
   * which the numbered messages ≤ S were handed to deliver() and none > S yet (the memory
   * driver: the owner → shard ring; redis: the marker in the numbered stream).
   */
  ask(q: HistQuestion, answer: (r: HistSubReply) => void, failed: (err: Error) => void): void;
  publisher: () => Pick<Publisher, 'deliver'>;
  /** History channels take delta compression (the memory driver, with a delta sequencer; docs/history.md). */
  deltas: boolean;
  /** history.max_questions_per_connection. */
  maxQuestionsPerConnection: number;
  /** history.replay_bytes_per_second. */
  replayBytesPerSecond: number;
  now?: () => number;
  /** Tag-filtered subscriptions get rewinds and positions (every driver keeps the tags; docs/history.md): the filter stage, or null. */
  filters: HistoryFilters | null;
  out(canonical: string): string;
  log: Logger;
  metrics: MetricsSink;
}

export interface HistoryShard {
  readonly settings: HistorySettings;
  /** History channels take delta compression (HistoryShardDeps.deltas). */
  readonly deltas: boolean;
  /** Tag-filtered subscriptions get rewinds and positions (HistoryShardDeps.filters). */
  readonly filtered: boolean;
  readonly stage: OutboundStage;
  /** The publish pipeline's inbound stage: member events and counts to the subscriptions with positions (see top). */
  readonly inbound: InboundStage;
  deliver(msg: HistFrame): void;
  plan(app: AppConfig, channel: string, recover: unknown): Plan;
  /**
   * Before a subscription that will attach() is answered: null when this connection may ask
   * one more question now, else why not (it has one for this channel, or
   * history.max_questions_per_connection of them, unanswered).
   */
  admit(d: SocketData, channel: string): string | null;
  /** After subscription_succeeded, a `recover` on a channel without history. */
  noHistory(ws: Socket, app: AppConfig, channel: string): void;
  /**
   * After subscription_succeeded: asks the owner, then replays and joins the topic; a delta
   * subscription (`how.relay`: it waits held in its delta set) asks through the sequencer
   * and is released instead, out of step: its next message of each stream goes full; a
   * tag-filtered one replays the matching messages only and joins the filter stage.
   */
  attach(ws: Socket, d: SocketData, app: AppConfig, channel: string, sub: Subscription, plan: Extract<Plan, { kind: 'attach' }>, how?: AttachHow): void;
  unsubscribe(ws: Socket, app: string, channel: string, sub: Subscription): void;
  /**
   * After a break in the numbered stream (history/redis.ts missed): fetches, for every serial
   * topic with subscribers here, the messages after the last one it sent, and sends them on.
   */
  catchUp(): void;
  /** Forgets the serial topics without subscribers (every few seconds). */
  sweep(): void;
}

export function createHistoryShard(deps: HistoryShardDeps): HistoryShard {
  const { settings, fanout, log } = deps;
  const filters = deps.filters;
  const meters = metersFor(deps.metrics);
  const budgets = new ReplayBudgets(deps.maxQuestionsPerConnection, deps.replayBytesPerSecond, deps.now ?? Date.now);
  /**
   * Serial topic → the epoch and serial of the last message this shard delivered on it
   * (epoch_changed, and a gap: messages that never reached this shard, e.g. while its Redis
   * subscription was down); only topics with subscribers.
   */
  const seen = new Map<string, Seen>();
  /** A serial topic with a subscription left: on the topic, or in the filter stage under it. */
  const held = (st: string): boolean => fanout.numSubscribers(st) > 0 || (filters !== null && filters.count(st) > 0);

  function recoveryFrame(channel: string, data: { epoch: string; serial: number; recovered: boolean; missed: number; reason?: string; error?: string }): string {
    return frame(deps.out(Ev.Recovery), data, channel);
  }

  function result(app: string, r: string): void {
    if (meters.enabled) deps.metrics.inc('history_recoveries_total', { app_id: app, result: r });
  }

  const stage: OutboundStage = {
    out(m: Outgoing): boolean {
      if (m.kind !== 'api' && m.kind !== 'client') return false;
      if (settings.of(m.app, m.channel) === null) return false;
      const msg: HistPub = { type: 'hist_pub', app: m.app, channel: m.channel, except: m.except, message: m.message };
      if (m.tags) msg.tags = m.tags;
      if (m.delta !== undefined) msg.delta = m.delta;
      deps.number(msg);
      return true;
    },
  };

  /** Serial topic → its catch-up: the numbered messages held while it is asked, and its end (catchUp below). */
  const catching = new Map<string, { buffer: HistFrame[]; done(r: HistSubReply | null): void }>();
  /** Serial topic → the questions of subscriptions answered during its catch-up, asked again after it. */
  const deferred = new Map<string, (() => void)[]>();

  function deliver(h: HistFrame): void {
    deps.publisher().deliver({ app: h.app, channel: h.channel, except: h.except, message: Buffer.from(h.message), tags: h.tags ?? null });
    const st = serialTopicOf(h.app, h.channel);
    if (!held(st)) return;
    const waiting = catching.size === 0 ? undefined : catching.get(st);
    if (waiting === undefined) return place(st, h, true);
    waiting.buffer.push(h);
    // a busy channel does not hold more than this while its answer is late: given up, reported
    if (waiting.buffer.length >= MAX_HELD) waiting.done(null);
  }

  /** What the subscriptions with positions on a serial topic get (plain ones on it, tag-filtered ones in the filter stage under it). */
  function notice(st: string, app: string, channel: string, data: Parameters<typeof recoveryFrame>[1]): void {
    const text = recoveryFrame(channel, data);
    if (fanout.numSubscribers(st) > 0) fanout.publish(st, text, false);
    if (filters !== null && filters.count(st) > 0) filters.deliver({ app, channel, except: '', message: Buffer.from(text), tags: TAGS_ALL }, st);
  }

  function emit(st: string, app: string, channel: string, except: string, serial: number, message: string, tags: string | undefined): void {
    const bytes = withSerial(message, serial);
    if (tags !== undefined && filters !== null && filters.count(st) > 0) filters.deliver({ app, channel, except, message: Buffer.from(bytes), tags }, st);
    if (fanout.numSubscribers(st) === 0) return;
    publishExcept(fanout, st, bytes, except ? deps.sockets.get(except) : undefined, false);
  }

  /**
   * A numbered message to the subscriptions with positions: in order, never twice. Messages
   * that never reached this shard (its Redis subscription was down; the numbering restarted
   * past 1) are fetched again (`fetch`: catchUp) or, when they cannot be, reported.
   */
  function place(st: string, h: HistFrame, fetch: boolean): void {
    let known = seen.get(st);
    if (known === undefined) {
      known = { epoch: h.epoch, serial: h.serial - 1, app: h.app, channel: h.channel };
      seen.set(st, known);
    } else if (known.epoch !== h.epoch) {
      // the numbering was lost (the owner restarted, Redis lost it): positions of the old epoch are void
      notice(st, h.app, h.channel, { epoch: h.epoch, serial: 0, recovered: false, missed: 0, reason: 'epoch_changed' });
      known.epoch = h.epoch;
      known.serial = 0;
    }
    if (h.serial <= known.serial) return; // already delivered: never twice
    if (h.serial > known.serial + 1) {
      if (fetch) return catchUp(st, known, [h]);
      // messages of this epoch that never reached this shard: the positions cannot go on exactly
      notice(st, h.app, h.channel, {
        epoch: h.epoch, serial: h.serial - 1, recovered: false, missed: 0, reason: 'unavailable',
        error: `messages ${known.serial + 1} to ${h.serial - 1} did not reach this server (its connection to the history store was down)`,
      });
    }
    known.serial = h.serial;
    emit(st, h.app, h.channel, h.except, h.serial, h.message, h.tags);
  }

  /**
   * Fetches the messages after `known` from the channel's numbering (a resume question,
   * answered in stream order: behind every message ≤ S, ahead of every later one) and sends
   * them on; the topic's numbered messages meanwhile wait in `buffer` (all ≤ S). An epoch
   * changed meanwhile: told, and the new epoch fetched from its start (twice at most). What
   * cannot be fetched (too old, too many, the store down) is reported as before.
   */
  function catchUp(st: string, known: Seen, buffer: HistFrame[], depth = 0): void {
    const { app, channel } = known;
    const from = { epoch: known.epoch, serial: known.serial };
    const entry = { buffer, done: (r: HistSubReply | null): void => {
      if (catching.get(st) !== entry) return; // given up meanwhile (MAX_HELD), or answered
      catching.delete(st);
      settle(r);
      // the subscriptions whose answer came meanwhile ask again (attach): now in step
      if (!catching.has(st)) for (const again of deferred.get(st)?.splice(0) ?? []) again();
      if (!catching.has(st)) deferred.delete(st);
    } };
    catching.set(st, entry);
    const settle = (r: HistSubReply | null): void => {
      if (!held(st) || seen.get(st) !== known) return; // nobody left to tell
      if (r !== null && r.recovered === true) {
        for (const [n, message, tags] of r.items) emit(st, app, channel, '', n, message, tags);
        known.serial = Math.max(known.serial, r.serial);
        if (meters.enabled) deps.metrics.inc('history_catchups_total', { app_id: app, result: 'fetched' });
      } else if (r !== null && r.reason === 'epoch_changed' && r.epoch !== '' && depth < 2) {
        notice(st, app, channel, { epoch: r.epoch, serial: 0, recovered: false, missed: 0, reason: 'epoch_changed' });
        known.epoch = r.epoch;
        known.serial = 0;
        if (r.serial > 0) return catchUp(st, known, buffer, depth + 1);
      } else {
        if (meters.enabled) deps.metrics.inc('history_catchups_total', { app_id: app, result: r === null ? 'unavailable' : r.reason ?? 'unknown' });
        for (const h of buffer) place(st, h, false);
        if (r !== null && r.epoch === known.epoch && r.serial > known.serial) {
          notice(st, app, channel, {
            epoch: r.epoch, serial: r.serial, recovered: false, missed: 0, reason: 'unavailable',
            error: `messages ${known.serial + 1} to ${r.serial} did not reach this server (its connection to the history store was down)`,
          });
          known.serial = r.serial;
        }
        return;
      }
      for (const h of buffer) place(st, h, true);
    };
    deps.ask({ app, channel, rewind: 0, recover: from }, entry.done, (err) => {
      logLimited(log, 'warn', { err: err.message, channel }, 'history: the messages this server missed could not be fetched again; reported to the subscriptions with positions');
      entry.done(null);
    });
  }

  const inbound: InboundStage = {
    deliver(f) {
      // history messages come through deliver() above, with the serial; these are the others
      if (f.tags !== TAGS_ALL || settings.of(f.app, f.channel) === null) return false;
      const st = serialTopicOf(f.app, f.channel);
      if (filters !== null && filters.count(st) > 0) filters.deliver(f, st);
      const sender = f.except ? deps.sockets.get(f.except) : undefined;
      publishTo(st, f.app, f.message, sender);
      publishTo(pendingTopicOf(f.app, f.channel), f.app, f.message, sender);
      return false;
    },
  };
  function publishTo(topic: string, app: string, message: Uint8Array, sender: Socket | undefined): void {
    if (fanout.numSubscribers(topic) === 0) return;
    const n = publishExcept(fanout, topic, message, sender, meters.enabled);
    if (meters.enabled) meters.delivered(app, message, n);
  }

  return {
    settings,
    deltas: deps.deltas,
    filtered: filters !== null,
    stage,
    inbound,
    deliver,
    plan(app, channel, raw) {
      const recover = parseRecover(raw);
      const s = settings.of(app.id, channel);
      if (s === null) return recover.kind === 'none' ? null : { kind: 'no_history' };
      if (recover.kind === 'none' && s.rewind === 0) return null;
      return { kind: 'attach', rewind: s.rewind, recover };
    },
    admit: (d, channel) => budgets.admit(d, channel),
    noHistory(ws, app, channel) {
      result(app.id, 'no_history');
      sendFrame(meters, ws, app.id, Ev.Recovery, recoveryFrame(channel, { epoch: '', serial: 0, recovered: false, missed: 0, reason: 'no_history' }));
    },
    attach(ws, d, app, channel, sub, plan, how) {
      const { recover } = plan;
      const serial = recover.kind !== 'none';
      const resume = recover.kind === 'resume' ? { epoch: recover.epoch, serial: recover.serial } : null;
      // a refused position gets no rewind either: live messages only (docs/protocol.md)
      const rewind = recover.kind === 'invalid' ? 0 : plan.rewind;
      const topic = serial ? serialTopicOf(app.id, channel) : topicOf(app.id, channel);
      const current = () => !d.closed && d.channels.get(channel) === sub;
      // until the answer: the channel's member events and counts (see top), and no message
      const pending = pendingTopicOf(app.id, channel);
      ws.subscribe(pending);
      const join = (): void => {
        ws.unsubscribe(pending);
        if (sub.history) sub.history.attached = true;
        if (how) how.join();
        else ws.subscribe(topic);
      };
      // a delta subscription's answer comes whole, through the sequencer; the others in chunks (history/replay.ts)
      const chunked = !how?.relay;
      const question: HistQuestion = { app: app.id, channel, rewind, recover: resume, ...(chunked ? { cap: REPLAY_CHUNK_BYTES } : { delta: true }) };
      const mine = budgets.of(d).channels;
      mine.add(channel);
      /** The replay's chunks so far, and the last serial sent. */
      let rounds = 0;
      let last = 0;
      const answered = (): void => void mine.delete(channel);
      const ask = (q: HistQuestion): void => deps.ask(q, (r) => onAnswer(q, r), (err: Error) => {
        answered();
        logLimited(log, 'warn', { err: err.message, channel }, 'history: no answer from the channel\'s numbering; live messages only');
        if (!current()) return;
        ws.cork(() => {
          if (serial) sendFrame(meters, ws, app.id, Ev.Recovery, recoveryFrame(channel, { epoch: '', serial: 0, recovered: false, missed: 0, reason: 'unavailable', error: 'the channel\'s numbering did not answer' }));
          join();
        });
        if (resume !== null && rounds === 0) result(app.id, 'unavailable');
      });
      const onAnswer = (q: HistQuestion, r: HistSubReply): void => {
        // an answer whose subscription is gone is dropped unread
        if (!current()) return answered();
        // answered while this shard fetches the topic's missed messages again: its position
        // and the topic's would differ; asked again once the topic is in step (catchUp)
        if (serial && chunked && catching.has(topic)) {
          const later = deferred.get(topic) ?? [];
          later.push(() => ask(q));
          deferred.set(topic, later);
          return;
        }
        const first = rounds === 0;
        let reply = r;
        if (first && recover.kind === 'invalid') reply = { ...r, items: [], recovered: false, reason: 'invalid', error: recover.error };
        // a filtered subscription: the rewound or replayed messages that pass its filter (untagged ones never do)
        else if (how?.filter) reply = { ...r, items: r.items.filter((x) => x[2] !== undefined && how.filter!.test(parseTags(x[2]).tags)) };
        const more = chunked && reply.recovered !== false && hasMore(r);
        const upto = r.items.length > 0 ? r.items[r.items.length - 1][0] : last;
        // a replay that does not advance, or outruns its rounds, ends here (told below)
        const stuck = more && (upto <= last || rounds + 1 >= REPLAY_MAX_ROUNDS);
        ws.cork(() => {
          if (serial && (first || reply.recovered === false || stuck)) {
            const data: Parameters<typeof recoveryFrame>[1] = { epoch: reply.epoch, serial: reply.serial, recovered: reply.recovered === true && !stuck, missed: more ? reply.serial - (first ? (r.items[0]?.[0] ?? 1) - 1 : last) : reply.items.length };
            if (stuck) Object.assign(data, { reason: 'unavailable', error: 'the replay did not keep up with the channel; reload its history' });
            Object.assign(data, reply.reason ? { reason: reply.reason } : {}, reply.error ? { error: reply.error } : {});
            if (first || !data.recovered) sendFrame(meters, ws, app.id, Ev.Recovery, recoveryFrame(channel, data));
          }
          let bytes = 0;
          for (const [n, message] of reply.items) {
            if (!first && n <= last) continue;
            const text = serial ? withSerial(message, n) : message;
            bytes += text.length;
            sendFrame(meters, ws, app.id, 'api-event', text);
          }
          budgets.of(d).balance -= bytes;
          if (!more || stuck) join();
        });
        if (first && serial && (resume !== null || recover.kind === 'invalid')) result(app.id, reply.recovered ? 'recovered' : reply.reason ?? 'unknown');
        if (first && resume === null && reply.items.length > 0 && meters.enabled) deps.metrics.inc('history_rewinds_total', { app_id: app.id });
        rounds++;
        if (more && !stuck) {
          last = upto;
          const next: HistQuestion = { app: app.id, channel, rewind: 0, recover: { epoch: r.epoch, serial: last }, cap: REPLAY_CHUNK_BYTES };
          const paced = budgets.of(d).paced;
          const gone = (): boolean => {
            if (current()) return false;
            paced.delete(channel);
            answered();
            return true;
          };
          paced.set(channel, whenPaced(ws, () => budgets.waitMs(d), gone, () => { paced.delete(channel); ask(next); }));
          return;
        }
        answered();
        // (a delta subscription's messages and notices come from the sequencer: delta/deliver.ts)
        if (serial && chunked) seen.set(topic, { epoch: reply.epoch, serial: reply.serial, app: app.id, channel });
      };
      ask(question);
    },
    unsubscribe(ws, app, channel, sub) {
      // a replay waiting to send its next chunk ends now (its question is answered)
      budgets.peek(ws.getUserData())?.paced.get(channel)?.();
      if (sub.history && !sub.history.attached) ws.unsubscribe(pendingTopicOf(app, channel));
      if (sub.history?.serial) ws.unsubscribe(serialTopicOf(app, channel));
    },
    catchUp() {
      for (const [st, known] of seen) if (held(st) && !catching.has(st)) catchUp(st, known, []);
    },
    sweep() {
      for (const st of seen.keys()) if (!held(st)) seen.delete(st);
    },
  };
}
