// The channel store port (history/): where a history channel's messages are numbered and
// kept. One interface, one file per backend (memory.ts), one factory (index.ts). The owner
// shard of a channel (channels/owner.ts) is the only caller for that channel, so a backend
// needs no locking; docs/history.md says why numbering happens there.

import type { ChannelHistorySetting } from '../config/types';

/** One stored message: the frame exactly as delivered to stock clients (no __serial). */
export interface StoredMessage {
  serial: number;
  message: string;
  timeMs: number;
  /** The event's tags (tag filtering: a filtered subscription's rewind and replay); every driver keeps them. */
  tags?: string;
}

/** A channel's numbering: serials of one epoch are 1, 2, 3, … with no gap. */
export interface Position {
  epoch: string;
  /** The last serial given (0: none yet in this epoch). */
  serial: number;
}

export interface PageQuery {
  limit: number;
  direction: 'backwards' | 'forwards';
  /** Only serials > after (0: no bound). */
  after: number;
  /** Only serials < before (Infinity: no bound). */
  before: number;
}

export interface HistoryStore {
  /** Numbers `message` with the channel's next serial and keeps it (within the setting's size and ttl). */
  append(app: string, channel: string, setting: ChannelHistorySetting, message: string, nowMs: number, tags?: string): Position;
  /** Undoes the last append (its message reached nobody): the serial is given again. */
  rollback(app: string, channel: string): void;
  /** The channel's numbering (derived, serial 0, and nothing stored, when it has none): keeps it for meta_ttl from now. */
  position(app: string, channel: string, nowMs: number): Position;
  /** The stored messages with serial > after, oldest first; null when after + 1 is no longer stored. */
  since(app: string, channel: string, after: number, nowMs: number): StoredMessage[] | null;
  /** The last ≤ n stored messages, oldest first. */
  last(app: string, channel: string, n: number, nowMs: number): StoredMessage[];
  /** One page of stored messages in the query's direction, and whether more match after it. */
  page(app: string, channel: string, q: PageQuery, nowMs: number): { items: StoredMessage[]; more: boolean };
  /** Drops expired messages, and the numbering of channels idle for meta_ttl without subscribers. */
  sweep(nowMs: number, hasSubscribers: (app: string, channel: string) => boolean): void;
  stats(): { channels: number; messages: number; bytes: number };
}

/** What a store reports (metrics). */
export interface StoreEvents {
  /** A channel's messages were dropped to stay within the memory budget. */
  evicted(app: string, messages: number, bytes: number): void;
  /** A channel's entry (messages and numbering) was dropped at the channel cap or the memory budget. */
  forgotten?(app: string): void;
}

/**
 * A history channel's message could not be numbered (history.driver redis / redis-cluster:
 * Redis unreachable): nothing was delivered or stored. The API answers 503, a client event
 * gets pusher:error (docs/history.md, "Redis drivers").
 */
export class HistoryUnavailableError extends Error {
  readonly code = 'RC_ERR_HISTORY_DOWN';
  constructor(message: string) {
    super(message);
    this.name = 'HistoryUnavailableError';
  }
}
