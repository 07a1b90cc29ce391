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
//   where    what a channel subscription receives natively, and so how it is muted:
//              plain     the channel's topic `app C`: unsubscribed from it;
//              filtered  the filter stage's topics (channels/filtered.ts): paused there;
//                        registered under `app C` with its filter, so a publish counts
//                        as dropped for it only when its tags match (tags from the frame);
//              delta     the delta topics (delta/shard.ts, rule 6): paused there (out of
//                        every stream: it restarts in full); registered under `app C\x01`,
//                        which the delta shard checks before each frame for its sockets
//                        (with the frame's tags: a tag-filtered delta subscription, rule 8,
//                        is registered with its filter like a filtered one).
//
// Not counted: drops by uWS of a socket that received more than 2 × max_bytes between two
// scans (only at publish rates over 2 × max_bytes per gap on one shard: 100 × max_bytes
// per second with a 20 ms gap), and in close mode the native close of such a socket.
// The memory bound holds
// anyway: at most 2 × max_bytes (+ one message) queued per socket, enforced by uWS.
// Direct sends (protocol replies, pings) are not channel messages: uWS bounds them natively.

import { TAGS_ALL, type FrameTags } from '../bus/messages';
import { ErrorCode } from '../protocol/codes';
import type { FilteredSubscriptions } from '../channels/filtered';
import { serialTopicOf } from '../history/shard';
import { topicOf } from '../channels/topic';
import type { DeltaShard } from '../delta/shard';
import type { CompiledFilter } from '../filter/compile';
import { parseTags } from '../filter/tags';
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

/** The stages that hold filtered and delta subscriptions (null when off). */
export interface Receivers {
  filters: FilteredSubscriptions<Socket> | null;
  delta: DeltaShard<Socket> | null;
}

/** One channel subscription of a lagging socket: the byTopic key, and the filter of a filtered one. */
interface Reg {
  /** Where its publishes are checked (`app C`, `app C\x01`). */
  key: string;
  /** Where it receives natively when not `key`: a history subscription with positions, its serial topic (history/shard.ts). */
  native?: string;
  channel: string;
  kind: 'plain' | 'filtered' | 'delta';
  filter: CompiledFilter | null;
}

interface Lagging {
  ws: Socket;
  d: SocketData;
  /** Its channel subscriptions, each registered under its key in byTopic. */
  regs: Reg[];
  /** Filters by key of its filtered subscriptions (null: none). */
  filters: Map<string, CompiledFilter> | null;
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
  private receivers: Receivers = { filters: null, delta: null };

  constructor(private readonly o: BackpressureOptions) {
    const meters = metersFor(o.metrics);
    this.droppedTotal = meters.dropped;
    this.fullDrop = meters.bufferFullDrop;
    this.fullClose = o.metrics.counter('websocket_buffer_full_total', { action: 'close' });
    this.scanEvery = Math.max(1, Math.floor(o.maxBytes / 2));
    this.now = o.now ?? (() => performance.now());
  }

  /** The filter and delta stages, once the shard has made them (they are made after this). */
  attach(receivers: Receivers): void {
    this.receivers = receivers;
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
  beforePublish(topic: string, bytes: number, except: string, tags?: FrameTags): void {
    this.avgBytes = this.avgBytes === 0 ? bytes : this.avgBytes + (bytes - this.avgBytes) * AVG_WEIGHT;
    this.sinceScan += bytes;
    if (this.sinceScan >= this.scanEvery) this.scan(false);
    this.check(topic, bytes, except, tags);
  }

  /**
   * The lagging sockets registered under `topic` (a channel topic, or a delta one from
   * delta/shard.ts): full ones are muted, muted ones count this message as dropped. A
   * filtered subscription only when the frame's tags match its filter.
   */
  check(topic: string, bytes: number, except: string, tags?: FrameTags): void {
    if (this.bySocket.size === 0) return;
    const set = this.byTopic.get(topic);
    if (set === undefined) return;
    const limit = this.limit();
    let parsed: Record<string, string> | null | undefined;
    for (const lag of set) {
      if (lag.d.id === except) continue;
      const filter = lag.filters?.get(topic);
      if (filter !== undefined) {
        // untagged frames reach no filtered socket; TAGS_ALL ones every one (channels/filtered.ts)
        if (tags === undefined || tags === null) continue;
        if (tags !== TAGS_ALL) {
          parsed ??= parseTags(tags).tags;
          if (!filter.test(parsed)) continue;
        }
      }
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
    const lag: Lagging = { ws, d, regs: [], filters: null, muted: false, dropped: 0 };
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

  /** The socket's channel subscriptions that receive (presence: once joined), and where (see top). */
  private channelRegs(d: SocketData): Reg[] {
    const out: Reg[] = [];
    if (d.app === null) return out;
    for (const [channel, sub] of d.channels) {
      if (!sub.joined) continue;
      // a history subscription waiting for its answer is on no topic yet (a delta one is held: delta/shard.ts rule 9)
      if (sub.history && !sub.history.attached) continue;
      const topic = topicOf(d.app.id, channel);
      // with positions, its frames come on the serial topic (history/shard.ts); checked with the channel's plain frames
      const native = sub.history?.serial ? serialTopicOf(d.app.id, channel) : undefined;
      if (sub.filter) out.push({ key: topic, native, channel, kind: 'filtered', filter: sub.tagFilter ?? null });
      else if (d.delta?.channels.has(channel)) out.push({ key: topic + '\x01', channel, kind: 'delta', filter: sub.tagFilter ?? null });
      else out.push({ key: topic, native, channel, kind: 'plain', filter: null });
    }
    return out;
  }

  /** Stops (on false: restarts) what the subscription receives natively. Idempotent. */
  private receive(lag: Lagging, r: Reg, on: boolean): void {
    const { ws, d } = lag;
    if (r.kind === 'plain') {
      if (on) ws.subscribe(r.native ?? r.key);
      else ws.unsubscribe(r.native ?? r.key);
    } else if (r.kind === 'filtered') {
      const handle = d.channels.get(r.channel)?.filter;
      if (handle && this.receivers.filters) this.receivers.filters.pause(r.native ?? r.key, ws, handle, !on);
    } else if (this.receivers.delta) {
      if (on) this.receivers.delta.resume(ws, d, r.channel);
      else this.receivers.delta.pause(ws, d, r.channel);
    }
  }

  private mute(lag: Lagging): void {
    lag.muted = true;
    for (const r of this.channelRegs(lag.d)) this.receive(lag, r, false);
  }

  private unmute(lag: Lagging): void {
    lag.muted = false;
    for (const r of this.channelRegs(lag.d)) this.receive(lag, r, true);
    this.flush(lag);
  }

  /**
   * Registers the socket under its current channel topics (it may have subscribed or
   * unsubscribed since); a muted socket is unsubscribed natively from new ones too.
   */
  private resync(lag: Lagging): void {
    const regs = this.channelRegs(lag.d);
    if (lag.muted) for (const r of regs) this.receive(lag, r, false);
    this.unregister(lag);
    lag.regs = regs;
    for (const r of regs) {
      let set = this.byTopic.get(r.key);
      if (set === undefined) {
        set = new Set();
        this.byTopic.set(r.key, set);
      }
      set.add(lag);
      if (r.filter !== null) (lag.filters ??= new Map()).set(r.key, r.filter);
    }
  }

  private unregister(lag: Lagging): void {
    for (const r of lag.regs) {
      const set = this.byTopic.get(r.key);
      if (set === undefined) continue;
      set.delete(lag);
      if (set.size === 0) this.byTopic.delete(r.key);
    }
    lag.regs = [];
    lag.filters = null;
  }

  private flush(lag: Lagging): void {
    if (lag.dropped === 0) return;
    this.droppedTotal.inc(lag.dropped);
    lag.dropped = 0;
  }
}
