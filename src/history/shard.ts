// The shard side of history channels (PROTOCOL.md "History, rewind and recovery"):
//
//   out      the publish pipeline's stage: an API or client event on a history channel
//            goes to the channel's owner (hist_pub) instead of the bus; the owner numbers
//            it and sends it back as `hist` to every shard with subscribers (history/owner.ts).
//            Channels without history: one settings lookup, no hop, not one byte more.
//   deliver  a `hist` frame: the plain bytes through the pipeline's inbound side (as any
//            publish: cache, backpressure, filters, native topic), and, when this shard has
//            subscriptions with positions, `,"__serial":N` inserted before the final `}` on
//            the channel's serial topic.
//   attach   a subscription with a rewind or a `recover`: subscription_succeeded first, then
//            the owner's answer (recovery frame, replay), then the topic. Until the answer
//            the socket is on no topic; the answer travels the ring owner → this shard
//            behind every message numbered before it (≤ S, in the answer) and ahead of every
//            later one (> S, live): no gap, no duplicate.

import type { Logger } from 'pino';
import type { TemplatedApp } from 'uWebSockets.js';
import type { ControlMsg, HistSubReply } from '../bus/messages';
import type { OutboundStage, Outgoing, Publisher } from '../channels/publisher';
import { topicOf } from '../channels/topic';
import type { AppConfig } from '../config/types';
import { metersFor } from '../metrics/meters';
import type { MetricsSink } from '../metrics/types';
import { Ev } from '../protocol/events';
import { frame } from '../protocol/frames';
import type { HistFrame } from './owner';
import type { HistorySettings } from './settings';

/** What this file needs of a WebSocket (ws/types.ts Socket; history/ sits below ws/). */
export interface HistorySocket {
  getUserData(): { closed: boolean };
  isSubscribed(topic: string): boolean;
  publish(topic: string, message: string | Uint8Array, isBinary: boolean): boolean;
  send(message: string, isBinary: boolean): number;
  subscribe(topic: string): boolean;
  unsubscribe(topic: string): boolean;
  cork(cb: () => void): unknown;
}
type Socket = HistorySocket;
/** A socket's state and subscription record, as far as history needs them (ws/types.ts). */
type SocketData = { closed: boolean; channels: ReadonlyMap<string, unknown> };
type Subscription = { history?: { serial: boolean } };

/** A subscribe's `recover`, checked: absent, positions only, a resume position, or refused. */
export type Recover =
  | { kind: 'none' }
  | { kind: 'positions' }
  | { kind: 'resume'; epoch: string; serial: number }
  | { kind: 'invalid'; error: string };

const NONE: Recover = { kind: 'none' };
const MAX_EPOCH_LENGTH = 64;

export function parseRecover(v: unknown): Recover {
  if (v === undefined || v === null) return NONE;
  if (typeof v !== 'object' || Array.isArray(v)) return { kind: 'invalid', error: 'recover must be an object: {} or {"epoch":"…","serial":N}' };
  const r = v as { epoch?: unknown; serial?: unknown };
  if (r.epoch === undefined && r.serial === undefined) return { kind: 'positions' };
  if (typeof r.epoch !== 'string' || r.epoch.length === 0 || r.epoch.length > MAX_EPOCH_LENGTH) {
    return { kind: 'invalid', error: `recover.epoch must be a string of 1 to ${MAX_EPOCH_LENGTH} characters` };
  }
  if (typeof r.serial !== 'number' || !Number.isSafeInteger(r.serial) || r.serial < 0) {
    return { kind: 'invalid', error: 'recover.serial must be a non-negative integer' };
  }
  return { kind: 'resume', epoch: r.epoch, serial: r.serial };
}

/** The topic of a channel's subscriptions with positions (frames with __serial). */
export function serialTopicOf(app: string, channel: string): string {
  return topicOf(app, channel) + '\0s';
}

/** The frame with `,"__serial":N` inserted before its final `}`. */
export function withSerial(message: string, serial: number): string {
  return message.slice(0, -1) + ',"__serial":' + serial + '}';
}

export type HistPub = Extract<ControlMsg, { type: 'hist_pub' }>;
export interface HistQuestion { app: string; channel: string; rewind: number; recover: { epoch: string; serial: number } | null }

/** What subscribe.ts does with a subscription: nothing special, a no_history answer, or attach(). */
export type Plan = null | { kind: 'no_history' } | { kind: 'attach'; rewind: number; recover: Recover };

export interface HistoryShardDeps {
  settings: HistorySettings;
  uws: TemplatedApp;
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
  out(canonical: string): string;
  log: Logger;
  metrics: MetricsSink;
}

export interface HistoryShard {
  readonly settings: HistorySettings;
  readonly stage: OutboundStage;
  deliver(msg: HistFrame): void;
  plan(app: AppConfig, channel: string, recover: unknown): Plan;
  /** After subscription_succeeded, a `recover` on a channel without history. */
  noHistory(ws: Socket, app: AppConfig, channel: string): void;
  /** After subscription_succeeded: asks the owner, then replays and joins the topic. */
  attach(ws: Socket, d: SocketData, app: AppConfig, channel: string, sub: Subscription, plan: Extract<Plan, { kind: 'attach' }>): void;
  unsubscribe(ws: Socket, app: string, channel: string, sub: Subscription): void;
  sweep(): void;
}

export function createHistoryShard(deps: HistoryShardDeps): HistoryShard {
  const { settings, uws, log } = deps;
  const meters = metersFor(deps.metrics);
  /**
   * Serial topic → the epoch and serial of the last message this shard delivered on it
   * (epoch_changed, and a gap: messages that never reached this shard, e.g. while its Redis
   * subscription was down); only topics with subscribers.
   */
  const seen = new Map<string, { epoch: string; serial: number }>();

  function recoveryFrame(channel: string, data: { epoch: string; serial: number; recovered: boolean; missed: number; reason?: string; error?: string }): string {
    return frame(deps.out(Ev.Recovery), data, channel);
  }

  /** ws/send.ts sendFrame: counted as sent. */
  function sendFrame(_m: unknown, ws: Socket, appId: string, event: string, text: string): void {
    const status = ws.send(text, false);
    if (meters.enabled) meters.sent(appId, event, status, Buffer.byteLength(text));
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
      deps.number(msg);
      return true;
    },
  };

  function deliver(h: HistFrame): void {
    deps.publisher().deliver({ app: h.app, channel: h.channel, except: h.except, message: Buffer.from(h.message), tags: h.tags ?? null });
    const st = serialTopicOf(h.app, h.channel);
    if (uws.numSubscribers(st) === 0) return;
    const known = seen.get(st);
    if (known === undefined || known.epoch !== h.epoch) {
      // the numbering was lost (the owner restarted, Redis lost it): positions of the old epoch are void
      if (known !== undefined) {
        uws.publish(st, recoveryFrame(h.channel, { epoch: h.epoch, serial: h.serial - 1, recovered: false, missed: 0, reason: 'epoch_changed' }), false);
      }
      seen.set(st, { epoch: h.epoch, serial: h.serial });
    } else {
      if (h.serial <= known.serial) return; // already delivered: never twice
      if (h.serial > known.serial + 1) {
        // messages of this epoch that never reached this shard: the positions cannot go on exactly
        uws.publish(st, recoveryFrame(h.channel, {
          epoch: h.epoch, serial: h.serial - 1, recovered: false, missed: 0, reason: 'unavailable',
          error: `messages ${known.serial + 1} to ${h.serial - 1} did not reach this server (its connection to the history store was down)`,
        }), false);
      }
      known.serial = h.serial;
    }
    const bytes = withSerial(h.message, h.serial);
    const sender = h.except ? deps.sockets.get(h.except) : undefined;
    if (sender && !sender.getUserData().closed && sender.isSubscribed(st)) sender.publish(st, bytes, false);
    else uws.publish(st, bytes, false);
  }

  return {
    settings,
    stage,
    deliver,
    plan(app, channel, raw) {
      const recover = parseRecover(raw);
      const s = settings.of(app.id, channel);
      if (s === null) return recover.kind === 'none' ? null : { kind: 'no_history' };
      if (recover.kind === 'none' && s.rewind === 0) return null;
      return { kind: 'attach', rewind: s.rewind, recover };
    },
    noHistory(ws, app, channel) {
      result(app.id, 'no_history');
      sendFrame(meters, ws, app.id, Ev.Recovery, recoveryFrame(channel, { epoch: '', serial: 0, recovered: false, missed: 0, reason: 'no_history' }));
    },
    attach(ws, d, app, channel, sub, plan) {
      const { recover } = plan;
      const serial = recover.kind !== 'none';
      const resume = recover.kind === 'resume' ? { epoch: recover.epoch, serial: recover.serial } : null;
      // a refused position gets no rewind either: live messages only (PROTOCOL.md)
      const rewind = recover.kind === 'invalid' ? 0 : plan.rewind;
      const topic = serial ? serialTopicOf(app.id, channel) : topicOf(app.id, channel);
      const current = () => !d.closed && d.channels.get(channel) === sub;
      deps.ask({ app: app.id, channel, rewind, recover: resume }, (r) => {
        if (!current()) return;
        let reply = r;
        if (recover.kind === 'invalid') reply = { ...r, items: [], recovered: false, reason: 'invalid', error: recover.error };
        ws.cork(() => {
          if (serial) {
            const data: Parameters<typeof recoveryFrame>[1] = { epoch: reply.epoch, serial: reply.serial, recovered: reply.recovered === true, missed: reply.items.length };
            if (reply.reason) data.reason = reply.reason;
            if (reply.error) data.error = reply.error;
            sendFrame(meters, ws, app.id, Ev.Recovery, recoveryFrame(channel, data));
          }
          for (const [n, message] of reply.items) sendFrame(meters, ws, app.id, 'api-event', serial ? withSerial(message, n) : message);
          ws.subscribe(topic);
        });
        if (serial) {
          seen.set(topic, { epoch: reply.epoch, serial: reply.serial });
          if (resume !== null || recover.kind === 'invalid') result(app.id, reply.recovered ? 'recovered' : reply.reason ?? 'unknown');
        }
        if (resume === null && reply.items.length > 0 && meters.enabled) deps.metrics.inc('history_rewinds_total', { app_id: app.id });
      }, (err: Error) => {
        log.warn({ err, channel }, 'history: no answer from the channel\'s numbering; live messages only');
        if (!current()) return;
        ws.cork(() => {
          if (serial) sendFrame(meters, ws, app.id, Ev.Recovery, recoveryFrame(channel, { epoch: '', serial: 0, recovered: false, missed: 0, reason: 'unavailable', error: 'the channel\'s numbering did not answer' }));
          ws.subscribe(topic);
        });
        if (resume !== null) result(app.id, 'unavailable');
      });
    },
    unsubscribe(ws, app, channel, sub) {
      if (sub.history?.serial) ws.unsubscribe(serialTopicOf(app, channel));
    },
    sweep() {
      for (const st of seen.keys()) if (uws.numSubscribers(st) === 0) seen.delete(st);
    },
  };
}
