// Slow consumers: sockets that read slower than they are sent to.
//
// uWS keeps a socket's output in user space once the kernel's send buffer is full, up to
// `maxBackpressure`; a send over that is skipped natively (and with closeOnBackpressureLimit
// the socket is shut). A native topic publish skips such a socket silently, so JavaScript
// cannot see the drop — and must not look at every subscriber per publish to find out.
// So this module watches only the sockets that are behind:
//
//   flag     a scan reads ws.getBufferedAmount() of every socket of the shard: a socket
//            with bytes queued in user space (its kernel buffer is full: it is behind by at
//            least that much) is *lagging*: registered under each of its channel topics.
//            Scans: the 1 s sweep, and whenever max_bytes / 2 of messages were published
//            on the shard since the last scan (at most one per 20 ms, and at most 2% of
//            the shard's time: 50 × the last scan's duration apart). A socket gets at most
//            what is published, so between two scans an unflagged socket grows by at most
//            max_bytes / 2 (+ one message), as long as the shard publishes less than
//            max_bytes / 2 per gap (25 × max_bytes per second with a 20 ms gap).
//   full     before each native publish to a topic, the lagging sockets of that topic (and
//            only those) are checked: queued + this message > limit → the socket is full.
//            limit = min(max_bytes, max_messages × average message size on this shard),
//            so max_messages counts queued messages as queued bytes / average size.
//            uWS's own cap (maxBackpressure) is 2 × max_bytes: the room a socket may need
//            between two scans, so uWS never skips a message a flagged socket was meant to
//            get, and every drop is counted here, exactly. It is also the hard memory bound.
//   drop     (on_backpressure: drop) the socket is *muted*: unsubscribed natively from its
//            channel topics, so uWS skips it at no cost; each publish to one of them counts
//            one dropped message. When its queue is down to half the limit (drain handler
//            or sweep) it is subscribed again: it misses a contiguous run of messages.
//   close    (on_backpressure: close) muted at once, then closed with 4100 ("back off,
//            then reconnect") on the next turn, outside the publish being delivered.
//
// Not counted: drops by uWS of a socket that received more than 2 × max_bytes between two
// scans (only at publish rates over 2 × max_bytes per gap on one shard: 100 × max_bytes
// per second with a 20 ms gap), and in close mode the native close of such a socket.
// The memory bound holds
// anyway: at most 2 × max_bytes (+ one message) queued per socket, enforced by uWS.
// Direct sends (protocol replies, pings) are not channel messages: uWS bounds them natively.

import { ErrorCode } from '../protocol/codes';
import { topicOf } from '../channels/topic';
import { metersFor } from '../metrics/meters';
import type { BoundCounter, MetricsSink } from '../metrics/types';
import type { Socket, SocketData } from './types';

export type BackpressureAction = 'drop' | 'close';

export interface BackpressureOptions {
  maxBytes: number;
  maxMessages: number;
  action: BackpressureAction;
  metrics: MetricsSink;
  /** The shard's open sockets (scanned). */
  sockets: ReadonlyMap<string, Socket>;
  /** Clock in ms for the scan gap (default performance.now; tests pass their own). */
  now?: () => number;
}

/** uWS maxBackpressure for websocket.max_bytes: the hard cap per socket (see top). */
export function nativeMaxBackpressure(maxBytes: number): number {
  return Math.min(2 * maxBytes, 2 ** 32 - 1);
}

interface Lagging {
  ws: Socket;
  d: SocketData;
  /** Topics this socket is registered under in byTopic. */
  topics: string[];
  muted: boolean;
  /** Dropped messages not yet added to the metric. */
  dropped: number;
}

/** Weight of one message in the average message size (EWMA). */
const AVG_WEIGHT = 1 / 64;
/** Least time between two publish-triggered scans (a scan reads every socket of the shard). */
const SCAN_MIN_MS = 20;
/** Share of the shard's time that publish-triggered scans may take (sets the gap above 20 ms). */
const SCAN_BUDGET = 0.02;

export class Backpressure {
  private readonly byTopic = new Map<string, Set<Lagging>>();
  private readonly bySocket = new Map<string, Lagging>();
  private avgBytes = 0;
  /** Bytes published on this shard since the last scan, and when that scan was. */
  private sinceScan = 0;
  private lastScan = -Infinity;
  private scanGap = SCAN_MIN_MS;
  private readonly scanEvery: number;
  private readonly droppedTotal: BoundCounter;
  private readonly fullDrop: BoundCounter;
  private readonly fullClose: BoundCounter;
  private closing: Lagging[] = [];
  private closeTimer: NodeJS.Immediate | null = null;
  private readonly now: () => number;

  constructor(private readonly o: BackpressureOptions) {
    const meters = metersFor(o.metrics);
    this.droppedTotal = meters.dropped;
    this.fullDrop = meters.bufferFullDrop;
    this.fullClose = o.metrics.counter('websocket_buffer_full_total', { action: 'close' });
    this.scanEvery = Math.max(1, Math.floor(o.maxBytes / 2));
    this.now = o.now ?? (() => performance.now());
  }

  /** Queued bytes past which a socket is full (see top). */
  limit(): number {
    return this.avgBytes > 0 ? Math.min(this.o.maxBytes, this.o.maxMessages * this.avgBytes) : this.o.maxBytes;
  }

  /** Sockets currently lagging / muted (tests, gauges). */
  stats(): { lagging: number; muted: number } {
    let muted = 0;
    for (const l of this.bySocket.values()) if (l.muted) muted++;
    return { lagging: this.bySocket.size, muted };
  }

  /**
   * Called by the shard right before uWS publishes `bytes` to `topic` (except the socket
   * `except`). Cost when no socket lags: one EWMA step and a Map size check.
   */
  beforePublish(topic: string, bytes: number, except: string): void {
    this.avgBytes = this.avgBytes === 0 ? bytes : this.avgBytes + (bytes - this.avgBytes) * AVG_WEIGHT;
    this.sinceScan += bytes;
    if (this.sinceScan >= this.scanEvery) this.scan(false);
    if (this.bySocket.size === 0) return;
    const set = this.byTopic.get(topic);
    if (set === undefined) return;
    const limit = this.limit();
    for (const lag of set) {
      if (lag.d.id === except) continue;
      if (lag.muted) {
        lag.dropped++;
      } else if (lag.ws.getBufferedAmount() + bytes > limit) {
        this.full(lag);
        lag.dropped++; // this message: the socket is unsubscribed before uWS publishes it
      }
    }
  }

  /**
   * Flags every socket with bytes queued that is not flagged yet. Cost: one native call
   * per socket of the shard; `force` false: skipped within SCAN_MIN_MS of the last scan.
   */
  scan(force: boolean): void {
    const now = this.now();
    if (!force && now - this.lastScan < this.scanGap) return;
    this.lastScan = now;
    this.sinceScan = 0;
    for (const ws of this.o.sockets.values()) {
      const d = ws.getUserData();
      if (d.closed) continue;
      const queued = ws.getBufferedAmount(); // ~20–50 ns (measured, uWS 20.30)
      if (queued === 0 || this.bySocket.has(d.id)) continue;
      const lag = this.flag(ws, d);
      if (queued > this.limit()) this.full(lag);
    }
    // at most SCAN_BUDGET of a core: 100,000 sockets take a few ms
    this.scanGap = Math.max(SCAN_MIN_MS, (this.now() - now) / SCAN_BUDGET);
  }

  /** Per socket, from the shard's 1 s sweep. */
  sweep(ws: Socket, d: SocketData): void {
    const queued = ws.getBufferedAmount();
    const lag = this.bySocket.get(d.id);
    if (lag === undefined) {
      if (queued === 0) return;
      const l = this.flag(ws, d);
      if (queued > this.limit()) this.full(l);
      return;
    }
    if (this.settle(lag, queued)) return;
    if (!lag.muted && queued > this.limit()) this.full(lag);
    this.resync(lag);
    this.flush(lag);
  }

  /** uWS `drain`: the socket wrote some of its queue. */
  drained(ws: Socket): void {
    if (this.bySocket.size === 0) return;
    const lag = this.bySocket.get(ws.getUserData().id);
    if (lag !== undefined) this.settle(lag, ws.getBufferedAmount());
  }

  /** uWS `close` (the socket must not be touched any more). */
  closed(d: SocketData): void {
    const lag = this.bySocket.get(d.id);
    if (lag === undefined) return;
    this.unregister(lag);
    this.bySocket.delete(d.id);
    this.flush(lag);
  }

  /** Unmutes below half the limit and forgets a socket whose queue is empty; true when forgotten. */
  private settle(lag: Lagging, queued: number): boolean {
    if (lag.muted && this.o.action === 'drop' && queued <= this.limit() / 2) this.unmute(lag);
    if (lag.muted || queued > 0) return false;
    this.unregister(lag);
    this.bySocket.delete(lag.d.id);
    this.flush(lag);
    return true;
  }

  private flag(ws: Socket, d: SocketData): Lagging {
    const lag: Lagging = { ws, d, topics: [], muted: false, dropped: 0 };
    this.bySocket.set(d.id, lag);
    this.resync(lag);
    return lag;
  }

  private full(lag: Lagging): void {
    this.mute(lag);
    if (this.o.action === 'drop') {
      this.fullDrop.inc();
      return;
    }
    this.fullClose.inc();
    this.closing.push(lag);
    this.closeTimer ??= setImmediate(() => this.closeFull());
  }

  /**
   * Close mode: closed on the next turn, not inside the publish being delivered (the close
   * handler tells the channel owners, whose member_removed must follow that publish).
   */
  private closeFull(): void {
    this.closeTimer = null;
    const list = this.closing;
    this.closing = [];
    for (const lag of list) {
      if (!lag.d.closed) lag.ws.end(ErrorCode.OverCapacity, 'Slow consumer: send buffer full');
    }
  }

  /** Channel topics the socket receives natively (presence: once joined; filtered ones never). */
  private channelTopics(d: SocketData): string[] {
    const out: string[] = [];
    if (d.app === null) return out;
    for (const [channel, sub] of d.channels) if (sub.joined && !sub.filter) out.push(topicOf(d.app.id, channel));
    return out;
  }

  private mute(lag: Lagging): void {
    lag.muted = true;
    for (const t of this.channelTopics(lag.d)) lag.ws.unsubscribe(t);
  }

  private unmute(lag: Lagging): void {
    lag.muted = false;
    for (const t of this.channelTopics(lag.d)) lag.ws.subscribe(t);
    this.flush(lag);
  }

  /**
   * Registers the socket under its current channel topics (it may have subscribed or
   * unsubscribed since); a muted socket is unsubscribed natively from new ones too.
   */
  private resync(lag: Lagging): void {
    const topics = this.channelTopics(lag.d);
    if (lag.muted) for (const t of topics) lag.ws.unsubscribe(t);
    this.unregister(lag);
    lag.topics = topics;
    for (const t of topics) {
      let set = this.byTopic.get(t);
      if (set === undefined) {
        set = new Set();
        this.byTopic.set(t, set);
      }
      set.add(lag);
    }
  }

  private unregister(lag: Lagging): void {
    for (const t of lag.topics) {
      const set = this.byTopic.get(t);
      if (set === undefined) continue;
      set.delete(lag);
      if (set.size === 0) this.byTopic.delete(t);
    }
    lag.topics = [];
  }

  private flush(lag: Lagging): void {
    if (lag.dropped === 0) return;
    this.droppedTotal.inc(lag.dropped);
    lag.dropped = 0;
  }
}
