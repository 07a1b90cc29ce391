// The owner side of history channels: the shard that owns a channel (channels/owner.ts)
// numbers its messages, keeps them in the store and sends each one, numbered, to the
// shards with subscribers. Why here and not in a sequencer thread: docs/history.md.
//
//   any shard ──hist_pub──▶ owner: serial = store.append(…) ──hist──▶ shards with interest
//   subscribing shard ──hist_sub──▶ owner: position + rewind / replay ──reply──▶ (same ring)
//
// Order: every message of a history channel reaches a shard through the one ring owner →
// shard, in serial order, and the answer to a hist_sub travels the same ring; so a message
// numbered before the answer is in it (≤ S) and one numbered after reaches the shard after
// it (> S, the subscribing shard set its interest bit before asking). No thread, bus or
// socket here: test/history/owner.test.ts drives it directly.

import type { Logger } from 'pino';
import { BusFullError } from '../bus/errors';
import type { ControlMsg, HistPageReply, HistSubReply } from '../bus/messages';
import type { MetricsSink } from '../metrics/types';
import type { HistorySettings } from './settings';
import type { HistoryStore, Position, StoredMessage } from './types';

export type HistoryOwnerMsg = Extract<ControlMsg, { type: 'hist_pub' | 'hist_sub' | 'hist_page' }>;
export type HistFrame = Extract<ControlMsg, { type: 'hist' }>;

const OWNER_TYPES: ReadonlySet<string> = new Set<HistoryOwnerMsg['type']>(['hist_pub', 'hist_sub', 'hist_page']);

export function isHistoryOwnerMsg(msg: ControlMsg): msg is HistoryOwnerMsg {
  return OWNER_TYPES.has(msg.type);
}

export interface HistoryOwnerDeps {
  store: HistoryStore;
  settings: HistorySettings;
  /** history.max_recover */
  maxRecover: number;
  /** The shards with subscribers of the channel (channels/interest.ts). */
  targets(app: string, channel: string): number[];
  /** Writes `msg` to every target, all or nothing (BusFullError: written nowhere). */
  send(targets: number[], msg: HistFrame): void;
  /** A message of a channel that has no history any more (apps reloaded): the plain pipeline. */
  plain(msg: Extract<HistoryOwnerMsg, { type: 'hist_pub' }>): void;
  reply(to: number, req: number, body: unknown): void;
  /**
   * With delta compression (docs/history.md, "With delta compression"): a numbered message
   * to the delta sequencer when some shard has delta subscribers of the channel, and the
   * answer to a delta subscription's hist_sub through it (`relay`: the sequencer's thread),
   * so that the answer reaches the subscribing shard behind the deltas of every message
   * numbered before it. Absent: no delta sequencer.
   */
  delta?: {
    publish(m: Extract<HistoryOwnerMsg, { type: 'hist_pub' }>, serial: number, epoch: string): void;
    relay(via: number, to: number, req: number, body: unknown): void;
  };
  subscribed(app: string, channel: string): boolean;
  log: Logger;
  metrics: MetricsSink;
  now?: () => number;
}

export interface HistoryOwner {
  handle(msg: HistoryOwnerMsg, from: number): void;
  sweep(): void;
}

/** What a subscription's answer reads of a channel's stored messages (a store, or a snapshot read from Redis). */
export interface StoredView {
  /** The last ≤ n stored messages, oldest first. */
  last(n: number): StoredMessage[];
  /** The stored messages with serial > after, oldest first; null when after + 1 is no longer stored. */
  since(after: number): StoredMessage[] | null;
}

const itemOf = (x: StoredMessage): HistSubReply['items'][number] => (x.tags === undefined ? [x.serial, x.message] : [x.serial, x.message, x.tags]);

/**
 * The first messages of `items` within `cap` bytes of frames (one at least; all without a
 * cap): an answer's chunk (history/replay.ts). The rest, up to the position S, is asked for
 * in the next chunk.
 */
export function chunkOf(items: StoredMessage[], cap: number | undefined): StoredMessage[] {
  if (cap === undefined) return items;
  let bytes = 0;
  for (let i = 0; i < items.length; i++) {
    bytes += items[i].message.length;
    if (bytes > cap && i > 0) return items.slice(0, i);
  }
  return items;
}

/** The answer to a hist_sub (rewind, positions, resume) from the channel's position and stored messages; every driver's. `cap`: its chunk's bytes (chunkOf). */
export function answerSub(m: { rewind: number; recover: { epoch: string; serial: number } | null; cap?: number }, hasHistory: boolean, position: () => Position, view: StoredView, maxRecover: number): HistSubReply {
  if (!hasHistory) return { epoch: '', serial: 0, items: [], recovered: m.recover ? false : null, reason: 'no_history' };
  const pos = position();
  const fail = (reason: NonNullable<HistSubReply['reason']>, error?: string): HistSubReply =>
    ({ epoch: pos.epoch, serial: pos.serial, items: [], recovered: false, reason, ...(error ? { error } : {}) });
  const r = m.recover;
  if (r === null) {
    const items = m.rewind > 0 ? chunkOf(view.last(m.rewind), m.cap) : [];
    return { epoch: pos.epoch, serial: pos.serial, items: items.map(itemOf), recovered: null };
  }
  if (r.epoch !== pos.epoch) return fail('epoch_changed');
  if (r.serial > pos.serial) return fail('invalid', `recover.serial ${r.serial} is ahead of the channel (its last serial is ${pos.serial})`);
  if (pos.serial - r.serial > maxRecover) return fail('too_many');
  const items = view.since(r.serial);
  if (items === null) return fail('too_old');
  return { epoch: pos.epoch, serial: pos.serial, items: chunkOf(items, m.cap).map(itemOf), recovered: true };
}

export function createHistoryOwner(deps: HistoryOwnerDeps): HistoryOwner {
  const { store, settings, log } = deps;
  const now = deps.now ?? Date.now;

  function publish(m: Extract<HistoryOwnerMsg, { type: 'hist_pub' }>): void {
    const s = settings.of(m.app, m.channel);
    if (s === null) return deps.plain(m);
    const pos = store.append(m.app, m.channel, s, m.message, now(), m.tags);
    const targets = deps.targets(m.app, m.channel);
    if (targets.length === 0) return;
    const frame: HistFrame = { type: 'hist', app: m.app, channel: m.channel, except: m.except, epoch: pos.epoch, serial: pos.serial, message: m.message };
    if (m.tags !== undefined) frame.tags = m.tags;
    try {
      deps.send(targets, frame);
    } catch (err) {
      // reached nobody: the serial is given again, so the sequence has no gap
      store.rollback(m.app, m.channel);
      if (err instanceof BusFullError) deps.metrics.inc('bus_full_total', { source: 'history' });
      log.error({ err, channel: m.channel }, 'history channel message not delivered: internal queue full');
      return;
    }
    deps.delta?.publish(m, pos.serial, pos.epoch);
  }

  function subscribe(m: Extract<HistoryOwnerMsg, { type: 'hist_sub' }>): HistSubReply {
    const t = now();
    return answerSub(m, settings.of(m.app, m.channel) !== null, () => store.position(m.app, m.channel, t), {
      last: (n) => store.last(m.app, m.channel, n, t),
      since: (after) => store.since(m.app, m.channel, after, t),
    }, deps.maxRecover);
  }

  function page(m: Extract<HistoryOwnerMsg, { type: 'hist_page' }>): HistPageReply {
    const t = now();
    const pos = store.position(m.app, m.channel, t);
    const p = store.page(m.app, m.channel, { limit: m.limit, direction: m.direction, after: m.after, before: m.before ?? Infinity }, t);
    return { epoch: pos.epoch, items: p.items, more: p.more };
  }

  return {
    handle(msg, from) {
      switch (msg.type) {
        case 'hist_pub':
          return publish(msg);
        case 'hist_sub':
          if (msg.relay !== undefined && deps.delta) return deps.delta.relay(msg.relay, from, msg.req, subscribe(msg));
          return deps.reply(from, msg.req, subscribe(msg));
        case 'hist_page':
          return deps.reply(from, msg.req, page(msg));
      }
    },
    sweep() {
      store.sweep(now(), (app, channel) => deps.subscribed(app, channel));
      const st = store.stats();
      deps.metrics.set('history_messages', undefined, st.messages);
      deps.metrics.set('history_bytes', undefined, st.bytes);
    },
  };
}
