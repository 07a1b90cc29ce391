// Reading an API request's body only once the request line and headers have been
// judged (router.ts): the app, the per-IP limit, the signature over the query (which
// commits to body_md5) and the app's bucket are decided first. Then the body is either
//   kept     within http.request_limit_in_mb and the shard's in-flight budget
//            (limits.http_body_bytes_in_flight; past it: 'busy', answered 503), or
//   drained  read to its end and thrown away, so that the refusal (401, 404, 429, 503)
//            reaches a client still uploading (answering mid-upload cuts the connection
//            and the client sees a reset instead).
// Past `drainLimit` bytes nothing more is read: onTooLarge answers 413 at once and the
// connection is closed. While the verdict is not known yet (a rate limiter that answers
// later), the socket is paused and what already arrived is held, counted in the budget.

import type { HttpResponse } from 'uWebSockets.js';
import type { BodyBudget } from '../limits/body-budget';
import { sharedBodyCopy } from './request';

export type BodyOutcome = Buffer | 'too_large' | 'busy';

export interface BodyReader {
  /** The verdict comes later: pause the upload, hold what already came. */
  hold(): void;
  /** Admitted: `done` gets the body (see sharedBodyCopy for a one-chunk body), or why not. */
  keep(done: (body: BodyOutcome) => void): void;
  /** Refused: read the rest without keeping it, then `done`. */
  drain(done: () => void): void;
  /** The client went away: give back what the request took. */
  abort(): void;
}

export interface BodyOptions {
  limit: number;
  drainLimit: number;
  contentLength: number | null;
  budget: BodyBudget;
  /** Past drainLimit: answer 413 now (the rest is not read). */
  onTooLarge: () => void;
}

export function openBody(res: HttpResponse, o: BodyOptions): BodyReader {
  let mode: 'undecided' | 'keep' | 'drain' = 'undecided';
  let chunks: Buffer[] = [];
  let size = 0;
  let reserved = 0;
  let finished = false;
  let paused = false;
  let outcome: 'too_large' | 'busy' | null = null;
  let shared: Buffer | null = null;
  let kept: ((body: BodyOutcome) => void) | null = null;
  let drained: (() => void) | null = null;

  function release() {
    o.budget.give(reserved);
    reserved = 0;
    chunks = [];
    shared = null;
  }

  function refuse(why: 'too_large' | 'busy') {
    outcome ??= why;
    release();
  }

  function deliver() {
    if (mode === 'drain') return drained!();
    if (mode !== 'keep') return;
    const body: BodyOutcome = outcome ?? shared ?? (chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
    try {
      kept!(body);
    } finally {
      release();
    }
  }

  res.onData((chunk, isLast) => {
    if (finished) return;
    size += chunk.byteLength;
    if (size > o.drainLimit) {
      finished = true;
      refuse('too_large');
      o.onTooLarge();
      if (mode !== 'undecided') deliver();
      return;
    }
    if (mode === 'drain' || outcome !== null) {
      // thrown away
    } else if (size > o.limit) {
      refuse('too_large');
    } else if (o.contentLength === null || mode === 'undecided' ? !take(chunk.byteLength) : false) {
      refuse('busy');
    } else if (isLast && chunks.length === 0 && mode === 'keep') {
      // The usual case: the whole body in one chunk, into the reused buffer.
      shared = sharedBodyCopy(chunk) ?? Buffer.from(new Uint8Array(chunk));
    } else {
      chunks.push(Buffer.from(new Uint8Array(chunk))); // valid during this callback only
    }
    if (isLast) {
      finished = true;
      deliver();
    }
  });

  /** Budget for bytes not covered by an up-front reservation. */
  function take(bytes: number): boolean {
    if (!o.budget.take(bytes)) return false;
    reserved += bytes;
    return true;
  }

  function resume() {
    if (!paused) return;
    paused = false;
    res.resume();
  }

  return {
    hold() {
      if (finished) return;
      paused = true;
      res.pause();
    },
    keep(done) {
      mode = 'keep';
      kept = done;
      const cl = o.contentLength;
      if (outcome === null && cl !== null) {
        // Reserve the whole declared body now (what already came is part of it).
        if (cl > o.limit) refuse('too_large');
        else if (!take(Math.max(0, cl - reserved))) refuse('busy');
      }
      if (finished) deliver();
      else resume();
    },
    drain(done) {
      mode = 'drain';
      drained = done;
      release();
      if (finished) done();
      else resume();
    },
    abort() {
      finished = true;
      release();
    },
  };
}
