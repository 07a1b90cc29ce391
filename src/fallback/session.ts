// An HTTP fallback session: a Socket (ws/types.ts) that the connection logic of ws/ drives
// exactly like a WebSocket. The SockJS model: the session owns the connection state and
// the outbound queue and outlives its receiving requests; each receiving request (a stream
// or a poll, on this shard or relayed from another: fallback/relay.ts) attaches, is
// written to, and detaches.
//
// Invariants:
//   1. `o` is written once per session, in the first receiving request's answer.
//   2. A frame is written to at most one receiving request and then forgotten: never twice.
//   3. A stream is written to until it holds more than CLIENT_STREAM_LIMIT characters, then
//      no more: pusher-js aborts it once it has read everything past that limit and reopens
//      in that same HTTP session, so whatever is queued after the limit waits for the new request
//      (a write after it could be in flight when the client aborts, and lost).
//   4. A poll is answered (ended) by the first write.
//   5. Without a receiving request, or while its response is under backpressure (the
//      client reads slower than it is sent to), the queue grows up to `maxQueueBytes`, as a
//      WebSocket's uWS buffer does up to maxBackpressure (ws/backpressure.ts watches both
//      alike); nothing more is written to a response until uWS says it is writable again.

import type { Fanout } from '../channels/fanout';
import type { RecognizedString } from 'uWebSockets.js';
import type { ConnectionHandlers } from '../ws/connection';
import type { Socket, SocketData } from '../ws/types';
import { CLIENT_STREAM_LIMIT, close, encodeFrame, HEARTBEAT, messages, OPEN } from './frames';

/** A receiving request: on this shard (a uWS response) or on another (relayed over the bus). */
/** The topics sessions are on, beside the native ones (fallback/hub.ts): a publish there reaches both. */
export interface SessionTopics extends Fanout {
  add(topic: string, s: Session): void;
  remove(topic: string, s: Session): void;
}

export interface Receiver {
  readonly streaming: boolean;
  /** Writes text and keeps the response open. */
  write(text: string): void;
  /** Writes text ('' for none) and ends the response. */
  end(text: string): void;
  /** False while the response's last write is not through (backpressure); absent: always ready. */
  ready?(): boolean;
  /** `cb` once the response is writable again (one at a time). */
  whenReady?(cb: () => void): void;
}

/** The client that opened a session: only its requests reach the session (fallback/service.ts). */
export interface Peer {
  /** Client address (limits/client-address.ts). */
  ip: string;
  /** User-Agent header, '' when absent. */
  ua: string;
}

export interface SessionEnv {
  handlers: Pick<ConnectionHandlers, 'open' | 'message' | 'close'>;
  topics: SessionTopics;
  /** Hard bound of the queue in bytes (2 × websocket.max_bytes, as uWS's maxBackpressure). */
  maxQueueBytes: number;
  /** websocket.on_backpressure close: a session over the bound is closed with 4100. */
  closeOnOverflow: boolean;
  /**
   * The session ended. `keep`: closed with a code by the server, the close frame answers
   * the next receiving request for a while; else (dropped) it is forgotten at once.
   */
  onClosed(s: Session, keep: boolean): void;
  now(): number;
}

const toText = (m: RecognizedString): string => (typeof m === 'string' ? m : Buffer.from(m as Uint8Array).toString());

export class Session implements Socket {
  private receiver: Receiver | null = null;
  private queue: string[] = [];
  private queuedBytes = 0;
  /** `o\n` until it is written (invariant 1). */
  private prefix = OPEN;
  /** Characters written to the current stream (invariant 3). */
  private written = 0;
  private flushQueued = false;
  private readonly topicSet = new Set<string>();
  /** When the last write went to the receiver (heartbeats). */
  lastWrite: number;
  /** When the session last had no receiving request (grace period), or -1 while it has one. */
  detachedAt: number;
  /** Set once the session ended: the text a later receiving request is answered with. */
  closing: string | null = null;
  /** The client aborted its receiving request (it left): the short grace applies (http_fallback.abort_delay_ms). */
  private left = false;

  constructor(readonly sessionId: string, readonly appKey: string, readonly peer: Peer, private readonly data: SocketData, private readonly env: SessionEnv) {
    this.lastWrite = env.now();
    this.detachedAt = this.lastWrite;
  }

  /** Whether a request of app `key` from `peer` comes from the client that opened the session. */
  owns(key: string, peer: Peer): boolean {
    return key === this.appKey && peer.ip === this.peer.ip && peer.ua === this.peer.ua;
  }

  get transport(): 'xhr_streaming' | 'xhr' | null {
    return this.receiver === null ? null : this.receiver.streaming ? 'xhr_streaming' : 'xhr';
  }

  /**
   * A receiving request for the HTTP session. A request already attached is ended with
   * c[2010] (for pusher-js it was aborted anyway: it reopens only after an abort).
   */
  attach(r: Receiver): void {
    if (this.closing !== null) return r.end(this.takePrefix() + this.closing);
    const old = this.receiver;
    if (old !== null) old.end(close(2010, 'Another connection still open'));
    this.receiver = r;
    this.written = 0;
    this.detachedAt = -1;
    this.left = false;
    this.lastWrite = this.env.now();
    this.scheduleFlush();
  }

  /**
   * The receiving request `r` ended (client abort, network): the grace period starts.
   * `aborted`: the client aborted it. Unless it is pusher-js's own reopen of a stream past
   * CLIENT_STREAM_LIMIT (invariant 3), the client left, and the short grace applies;
   * returns whether it does.
   */
  detach(r: Receiver, aborted = false): boolean {
    if (this.receiver !== r) return false;
    this.receiver = null;
    this.detachedAt = this.env.now();
    this.left = aborted && !(r.streaming && this.written > CLIENT_STREAM_LIMIT);
    return this.left;
  }

  /** The client's frames from one xhr_send, in order ([] is a heartbeat). */
  receive(frames: readonly string[]): void {
    if (this.closing !== null) return;
    if (frames.length === 0) {
      // liveness: pusher-js answers every `h`, and pings, with []
      if (this.data.counted >= 0) this.data.lastSeen = this.env.now();
      return;
    }
    for (const f of frames) {
      if (this.closing !== null) return;
      this.env.handlers.message(this, Buffer.from(f), false);
    }
  }

  /**
   * Writes `h` after `intervalMs` without a write (a poll is answered with it); drops a
   * session past its grace (`leftMs` when the client aborted its request, else `graceMs`).
   */
  tick(now: number, intervalMs: number, graceMs: number, leftMs = graceMs): void {
    if (this.receiver === null) {
      if (this.closing === null && now - this.detachedAt >= (this.left ? Math.min(leftMs, graceMs) : graceMs)) this.close();
      return;
    }
    if (now - this.lastWrite < intervalMs) return;
    if (this.receiver.streaming && this.written > CLIENT_STREAM_LIMIT) return; // waiting for the reopen
    if (this.receiver.ready?.() === false) return; // what is in flight keeps it alive
    this.writeOut(HEARTBEAT);
  }

  // ---- Socket ----

  send(message: RecognizedString): number {
    return this.enqueue(encodeFrame(toText(message)));
  }

  /** A frame already encoded as an `a` element (fallback/hub.ts encodes once per publish). */
  enqueue(encoded: string): number {
    if (this.closing !== null) return 2;
    if (this.queuedBytes + encoded.length > this.env.maxQueueBytes) {
      if (this.env.closeOnOverflow) setImmediate(() => this.end(4100, 'Slow consumer: send buffer full'));
      return 2;
    }
    this.queue.push(encoded);
    this.queuedBytes += encoded.length;
    this.scheduleFlush();
    return this.receiver === null ? 0 : 1;
  }

  end(code = 1000, shortMessage: RecognizedString = ''): void {
    if (this.closing !== null) return;
    const c = close(code, toText(shortMessage));
    this.finish(this.takePrefix() + this.takeQueue() + c, c, true);
  }

  close(): void {
    if (this.closing !== null) return;
    this.finish('', close(1006, 'Connection closed'), false);
  }

  cork(cb: () => void): unknown {
    cb();
    return this;
  }

  subscribe(topic: RecognizedString): boolean {
    const t = toText(topic);
    if (this.topicSet.has(t)) return true;
    this.topicSet.add(t);
    this.env.topics.add(t, this);
    return true;
  }

  unsubscribe(topic: RecognizedString): boolean {
    const t = toText(topic);
    if (!this.topicSet.delete(t)) return false;
    this.env.topics.remove(t, this);
    return true;
  }

  isSubscribed(topic: RecognizedString): boolean {
    return this.topicSet.has(toText(topic));
  }

  publish(topic: RecognizedString, message: RecognizedString): boolean {
    this.env.topics.publishFrom(this, toText(topic), message);
    return true;
  }

  getBufferedAmount(): number {
    return this.queuedBytes;
  }

  getUserData(): SocketData {
    return this.data;
  }

  // ---- internals ----

  private finish(last: string, closing: string, keep: boolean): void {
    // without a receiving request, what was due (the queue, the c line) waits for the next one
    this.closing = this.receiver === null && last !== '' ? last : closing;
    for (const t of this.topicSet) this.env.topics.remove(t, this);
    this.topicSet.clear();
    const r = this.receiver;
    this.receiver = null;
    this.detachedAt = this.env.now();
    if (r !== null) r.end(last);
    this.env.handlers.close(this);
    this.env.onClosed(this, keep);
  }

  private takePrefix(): string {
    const p = this.prefix;
    this.prefix = '';
    return p;
  }

  private takeQueue(): string {
    if (this.queue.length === 0) return '';
    const text = messages(this.queue);
    this.queue = [];
    this.queuedBytes = 0;
    return text;
  }

  private scheduleFlush(): void {
    if (this.flushQueued || this.receiver === null) return;
    this.flushQueued = true;
    // after the current turn's frames (a bus drain, a publish to many): one `a` line for all
    queueMicrotask(() => {
      this.flushQueued = false;
      this.flush();
    });
  }

  private flush(): void {
    const r = this.receiver;
    if (r === null || this.closing !== null) return;
    if (r.streaming && this.written > CLIENT_STREAM_LIMIT) return; // invariant 3
    if (r.ready?.() === false) return r.whenReady!(() => this.scheduleFlush()); // invariant 5
    const text = this.takePrefix() + this.takeQueue();
    if (text.length > 0) this.writeOut(text);
  }

  private writeOut(text: string): void {
    const r = this.receiver!;
    this.lastWrite = this.env.now();
    if (r.streaming) {
      this.written += text.length;
      r.write(text);
      return;
    }
    this.receiver = null; // invariant 4
    this.detachedAt = this.lastWrite;
    r.end(text);
  }
}
