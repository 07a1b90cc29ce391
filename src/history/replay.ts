// A rewind or recovery travels in chunks (history/shard.ts attach): each answer carries the
// position S and at most REPLAY_CHUNK_BYTES of the messages from the first one asked for
// (history/owner.ts chunkOf, the same cap in Redis's READ script), so no answer holds a
// whole range: not a bus frame, not a Redis marker, not the socket's buffer.
//
//   answer with messages left (its last < S)
//     ─▶ sent; the subscription stays off the topic (member events only)
//     ─▶ paced: the socket's output queue under REPLAY_BUFFER_BOUND and the connection's replay
//        budget (history.replay_bytes_per_second) not overdrawn
//     ─▶ the next question: a resume from the last message sent, answered in stream order
//        like the first (behind every message ≤ its S', ahead of every later one)
//   answer with nothing left ─▶ sent, and the topic joined in that turn: no gap, no duplicate.
//
// Messages numbered while the replay runs are in a later chunk. A replay that makes no
// progress, or runs past REPLAY_MAX_ROUNDS chunks (a channel published to faster than the
// client reads), ends: its subscription joins live, and one with positions is told
// (recovered:false) so the plug-in reloads. An answer whose subscription is gone is
// dropped unread and the replay ends; its question stays counted until then
// (history.max_questions_per_connection).

import type { HistSubReply } from '../bus/messages';

/** A chunk: this many bytes of frames at most (one message at least). */
export const REPLAY_CHUNK_BYTES = 256 * 1024;
/** The next chunk is asked for only when the socket's output queue is under this. */
export const REPLAY_BUFFER_BOUND = 256 * 1024;
/** The most chunks one replay takes. */
export const REPLAY_MAX_ROUNDS = 1000;
/** How often a paced replay looks again (ms, doubling to the most). */
const RETRY_MS = 5;
const MAX_RETRY_MS = 250;

/** Whether an answer left messages up to its position for another chunk. */
export function hasMore(r: HistSubReply): boolean {
  const n = r.items.length;
  return r.recovered !== false && n > 0 && r.items[n - 1][0] < r.serial;
}

/**
 * Runs `next` once the socket may take another chunk: its output queue under the bound and
 * `budgetWaitMs()` 0; `gone()` ends the wait (the subscription went away, the socket closed).
 * Returns a function that looks again at once (an unsubscribe: the wait ends without a timer).
 */
export function whenPaced(ws: { getBufferedAmount(): number }, budgetWaitMs: () => number, gone: () => boolean, next: () => void): () => void {
  let delay = 0;
  let timer: NodeJS.Timeout | undefined;
  let over = false;
  const step = (): void => {
    if (over) return;
    clearTimeout(timer);
    if (gone()) return void (over = true);
    const budget = budgetWaitMs();
    if (budget === 0 && ws.getBufferedAmount() < REPLAY_BUFFER_BOUND) {
      over = true;
      return next();
    }
    delay = Math.min(MAX_RETRY_MS, delay === 0 ? RETRY_MS : delay * 2);
    timer = setTimeout(step, Math.max(delay, Math.min(budget, 1000)));
    timer.unref();
  };
  step();
  return step;
}

interface Budget {
  /** The channels with a question unanswered, or a replay under way. */
  channels: Set<string>;
  /** Bytes it may be sent in replays now (below zero: overdrawn). */
  balance: number;
  at: number;
  /** Replays waiting to send their next chunk, by channel: looks again at once (whenPaced). */
  paced: Map<string, () => void>;
}

/**
 * Per connection: its unanswered questions and replays under way, by channel (a subscribe
 * and unsubscribe churn cannot pile them up), and its replay budget: bytes it may be sent
 * in replays, refilled at history.replay_bytes_per_second up to one second's worth; a chunk
 * is charged when sent (the balance may go below zero), no chunk is sent and no question
 * asked while it is.
 */
export class ReplayBudgets {
  private readonly byConn = new WeakMap<object, Budget>();

  constructor(private readonly maxQuestions: number, private readonly rate: number, private readonly now: () => number) {}

  of(d: object): Budget {
    let b = this.byConn.get(d);
    const t = this.now();
    if (b === undefined) this.byConn.set(d, (b = { channels: new Set(), balance: this.rate, at: t, paced: new Map() }));
    b.balance = Math.min(this.rate, b.balance + ((t - b.at) * this.rate) / 1000);
    b.at = t;
    return b;
  }

  /** The connection's budget if it has one (no refill). */
  peek(d: object): Budget | undefined {
    return this.byConn.get(d);
  }

  /** ms until the connection's budget is no longer overdrawn (0: now). */
  waitMs(d: object): number {
    const b = this.of(d).balance;
    return b >= 0 ? 0 : Math.ceil((-b * 1000) / this.rate);
  }

  /** null when the connection may ask one more question now, else why not (history/shard.ts admit). */
  admit(d: object, channel: string): string | null {
    if (!this.byConn.has(d)) return null;
    const b = this.of(d);
    const q = b.channels;
    if (b.balance < 0) {
      return `this connection was sent more replayed history than history.replay_bytes_per_second allows; subscribe again in ${this.waitMs(d)} ms`;
    }
    if (q.has(channel)) return `the history of ${channel} is still being fetched for this connection's earlier subscription; subscribe again once it is answered`;
    if (q.size >= this.maxQuestions) return `this connection has ${q.size} history questions unanswered, the most allowed (history.max_questions_per_connection); subscribe again once they are answered`;
    return null;
  }
}
