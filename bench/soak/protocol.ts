// Messages between the soak harness (soak.ts) and its client processes (gen.ts), and the
// clock they share.

/** CLOCK_MONOTONIC in ms (process.hrtime): the same clock in every process of the machine. */
export function nowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

export interface GenStart {
  type: 'start';
  port: number;
  appKey: string;
  /** Connection slots of this process; each one connects, subscribes, stays, leaves, again. */
  conns: number;
  channels: number;
  /** A subscription lasts uniformly between these (ms). */
  stayMs: [number, number];
  /** Subscriptions per connection before it disconnects: uniformly 1..maxSessions. */
  maxSessions: number;
  /** Slots open their first connection spread over this (ms). */
  rampMs: number;
  seed: number;
}

export type GenCommand = GenStart | { type: 'stop' };

/** One subscription of one client, from subscription_succeeded to leaving. */
export interface Session {
  ch: number;
  /** When subscription_succeeded arrived (nowMs). */
  s: number;
  /** When the client unsubscribed or closed (nowMs); the stop time for those open at the end. */
  u: number;
  /** Seqs received on this channel during the session: first, last, how many. -1: none. */
  first: number;
  last: number;
  count: number;
  /** Seqs missing between two received ones. */
  gaps: number[];
  /** Received out of order or twice. */
  disorder: number;
  /** Highest publish → receive latency seen (ms). */
  maxLatency: number;
}

export interface GenStats {
  /** WebSocket handshakes completed. */
  opened: number;
  /** Connections open now (pusher:connection_established received, not closed). */
  open: number;
  /** Closes the client did not ask for, by code. */
  unexpectedCloses: Record<string, number>;
  /** Connections that failed before opening, socket errors, subscription errors. */
  errors: Record<string, number>;
  messages: number;
}

export type GenReply =
  | { type: 'sessions'; list: Session[]; stats: GenStats }
  | { type: 'stopped'; list: Session[]; stats: GenStats };
