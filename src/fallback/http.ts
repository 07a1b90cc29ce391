// The uWS side of the fallback endpoints: a receiving request as a Receiver (status and
// headers on the first write, every write corked, nothing after the client aborted, not
// ready while uWS holds a write the client has not read), and the CORS headers of an
// app's allowed_origins.

import type { HttpResponse } from 'uWebSockets.js';
import type { AppRegistry } from '../apps/registry';
import { jsonError, statusLine, writeResponse } from '../http/request';
import { originAllowed } from '../protocol/origin';
import type { Receiver } from './session';

/** SockJS's headers for a receiving response; X-Accel-Buffering keeps nginx from holding a stream back. */
const RECEIVE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Type': 'application/javascript; charset=UTF-8',
  'Cache-Control': 'no-store, no-cache, no-transform, must-revalidate, max-age=0',
  'X-Accel-Buffering': 'no',
};

/**
 * CORS headers for a request from `origin` to app `key`: the origin echoed when the app's
 * allowed_origins admit it, none when they do not (the browser then hides the answer).
 * Credentials are never needed: pusher-js does not set withCredentials.
 */
export function corsFor(apps: AppRegistry, key: string, origin: string | null): Record<string, string> {
  if (origin === null) return {};
  const app = apps.byKey(key);
  if (app !== undefined && !originAllowed(origin, app.allowed_origins)) return { Vary: 'Origin' };
  return { 'Access-Control-Allow-Origin': origin, Vary: 'Origin' };
}

/** A receiving request held by this shard. */
export class HttpReceiver implements Receiver {
  private started = false;
  /** Ended by us, or aborted by the client: nothing more is written. */
  private done = false;
  /** When something was last written (relayed requests: a silent home shard is noticed). */
  lastOut: number;
  /** Characters written since uWS last reported backpressure (0: none; relayed requests are bounded by it). */
  backlog = 0;
  private drained: (() => void) | null = null;

  constructor(private readonly res: HttpResponse, readonly streaming: boolean, private readonly cors: Readonly<Record<string, string>>, onGone: () => void) {
    this.lastOut = Date.now();
    res.onAborted(() => {
      if (this.done) return;
      this.done = true;
      onGone();
    });
  }

  get open(): boolean {
    return !this.done;
  }

  write(text: string): void {
    if (this.done) return;
    this.lastOut = Date.now();
    let through = true;
    this.res.cork(() => {
      this.head();
      through = this.res.write(text);
    });
    if (through && this.backlog === 0) return;
    this.backlog += text.length;
    if (this.backlog !== text.length) return; // onWritable registered already
    this.res.onWritable(() => {
      this.backlog = 0;
      const cb = this.drained;
      this.drained = null;
      cb?.();
      return true;
    });
  }

  ready(): boolean {
    return this.backlog === 0;
  }

  whenReady(cb: () => void): void {
    this.drained = cb;
  }

  end(text: string): void {
    if (this.done) return;
    this.done = true;
    this.res.cork(() => {
      this.head();
      this.res.end(text);
    });
  }

  /** An error status instead of a session (only before anything was written). */
  fail(status: number, error: string): void {
    if (this.done) return;
    if (this.started) return this.end('');
    this.done = true;
    writeResponse(this.res, jsonError(status, error), this.cors);
  }

  private head(): void {
    if (this.started) return;
    this.started = true;
    this.res.writeStatus(statusLine(200));
    for (const k in RECEIVE_HEADERS) this.res.writeHeader(k, RECEIVE_HEADERS[k]);
    for (const k in this.cors) this.res.writeHeader(k, this.cors[k]);
  }
}
