// Messages between the orchestrator (bench/run.ts) and its child processes: load
// generators (loadgen.ts) and the publisher (publisher.ts). IPC uses the 'advanced'
// (structured clone) serialisation.

import type { SparseHistogram } from './histogram';

export function cpuUs(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

/** Monotonic µs, the same clock in every process of the machine (CLOCK_MONOTONIC). */
export function nowUs(): number {
  const t = process.hrtime();
  return t[0] * 1e6 + Math.floor(t[1] / 1e3);
}

/**
 * Which channels connection g subscribes to: perConn channels
 * `${prefix}${j}-${mod > 0 ? g % mod : g}` for j < perConn.
 *   one channel for all:   { perConn: 1, mod: 1 }    → bench0-0
 *   spread over 100:       { perConn: 1, mod: 100 }  → bench0-(g % 100)
 *   own channels, two each:{ perConn: 2, mod: 0 }    → bench0-g, bench1-g
 */
export interface ChannelSpec {
  prefix: string;
  perConn: number;
  mod: number;
  /**
   * Tag filtering (bench/filters/): each subscribe carries {key, cmp: 'eq', val: String(g % values)};
   * shape 'and' wraps it as and(eq, ex key), which the server cannot serve natively (channels/filtered.ts).
   */
  filter?: { key: string; values: number; shape?: 'eq' | 'and' };
}

export function channelsOf(spec: ChannelSpec, g: number): string[] {
  const out: string[] = [];
  const k = spec.mod > 0 ? g % spec.mod : g;
  for (let j = 0; j < spec.perConn; j++) out.push(`${spec.prefix}${j}-${k}`);
  return out;
}

export interface GenInit {
  host: string;
  port: number;
  /** Request path of the upgrade, e.g. /app/app-key?protocol=7&client=js&version=8.4.0 */
  path: string;
  /** Local (source) addresses, round-robin by connection index; [] = the kernel's choice. */
  srcAddrs: string[];
  /** Upgrades in flight at once in this process. */
  concurrency: number;
  /** Read the timestamp of each message and record end-to-end latency. */
  latency: boolean;
  /** Subscribe as soon as connection_established arrives (else on the 'subscribe' command). */
  subscribeOnConnect: boolean;
  channels: ChannelSpec;
  /** Extra fields of every subscribe's data (e.g. `delta: 'fossil'`). */
  subscribeData?: Record<string, unknown>;
  /** Global index of this process's first connection, and how many it opens. */
  firstIndex: number;
  count: number;
}

export type GenCommand =
  | { id: number; type: 'init'; init: GenInit }
  | { id: number; type: 'connect'; timeoutMs: number }
  | { id: number; type: 'subscribe'; timeoutMs: number }
  | { id: number; type: 'snapshot'; latency: boolean; resetLatency: boolean }
  | { id: number; type: 'close' };

export interface SparseHist {
  buckets: SparseHistogram;
  max: number;
  min: number;
  sum: number;
}

export interface GenStats {
  established: number;
  failed: number;
  closedAfterOpen: number;
  subsConfirmed: number;
  subsFailed: number;
  subsSent: number;
  msgs: number;
  bytes: number;
  pusherPings: number;
  wsPings: number;
  errors: Record<string, number>;
  /** µs (nowUs) of the first subscribe sent, last confirmation, last connection_established. */
  tFirstSubSent: number;
  tLastSubConfirmed: number;
  tLastEstablished: number;
  /** CPU time (user + system, µs) this process has used. */
  cpuUs: number;
  /** µs when these stats were taken. */
  t: number;
}

export interface GenReply {
  id: number;
  type: 'ok' | 'done';
  timedOut?: boolean;
  stats: GenStats;
  latency?: SparseHist;
}

export interface PubInit {
  host: string;
  port: number;
  appId: string;
  key: string;
  secret: string;
  /** Keep-alive connections, and requests in flight on each (1 = no pipelining). */
  conns: number;
  pipeline: number;
  srcAddr?: string;
}

export interface PubRun {
  /** Publishes per second; 0 = as fast as the API answers (closed loop). */
  rate: number;
  /** Safety stop: the publisher ends by itself after this long. */
  maxDurationMs: number;
  /** Channel of publish i: `${channelPrefix}${i % channelCount}`. */
  channelPrefix: string;
  channelCount: number;
  /** Put the send time (µs, nowUs) in the payload for end-to-end latency. */
  timestamp: boolean;
  /** Length of the event's data string. */
  payloadBytes: number;
  event: string;
  /**
   * POST /batch_events instead: `size` events to the channel per request, event j tagged
   * {[tagKey]: String(j)} (no tags when tagKey is null). Not with timestamp.
   */
  batch?: { size: number; tagKey: string | null };
}

export type PubCommand =
  | { id: number; type: 'init'; init: PubInit }
  | { id: number; type: 'start'; run: PubRun }
  | { id: number; type: 'snapshot'; resetLatency: boolean }
  | { id: number; type: 'stop' };

export interface PubStats {
  sent: number;
  ok: number;
  /** Non-2xx answers by status, and socket-level failures. */
  status: Record<string, number>;
  errors: Record<string, number>;
  inFlight: number;
  /** Most scheduled publishes ever waiting for a free connection at once (rate mode). */
  lagging: number;
  cpuUs: number;
  t: number;
}

export interface PubReply {
  id: number;
  type: 'ok' | 'done';
  stats: PubStats;
  /** Request round-trip times in µs since the last reset. */
  latency?: SparseHist;
}

/**
 * Reads a WebSocket upgrade answer that may come in pieces (`c.hs`: what came so far).
 * null: not whole yet; else the HTTP status ("101" when upgraded) and the bytes after the
 * headers (frames the server sent at once), or null when none.
 */
export function readHandshake(c: { hs: Buffer | null }, chunk: Buffer): { status: string; rest: Buffer | null } | null {
  const buf = c.hs === null ? chunk : Buffer.concat([c.hs, chunk]);
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) {
    c.hs = buf;
    return null;
  }
  c.hs = null;
  // "HTTP/1.1 101 ..."
  return { status: buf.toString('latin1', 9, 12), rest: buf.length > end + 4 ? buf.subarray(end + 4) : null };
}
