// Reading an API request's body only once the request line and headers have been
// judged (router.ts): the app, the per-IP limit, the signature over the query (which
// commits to body_md5) and the app's bucket are decided first. Then the body is either
//   kept     within http.request_limit_in_mb and the shard's in-flight budget
//            (limits.http_body_bytes_in_flight; past it: 'busy', answered 503), or
//   refused  answered at once (401, 404, 429, 503, 413), while the client may still be
//            uploading. uWS goes on reading the rest of that request's body and hands it
//            to onData, where it is dropped, so the connection stays usable and the client
//            reads the answer (no reset): nothing of a refused body is kept. Except when
//            the client sent `Connection: close`: uWS closes the socket right after such an
//            answer, unread upload and all, and the client's kernel may then drop the
//            answer on the reset; so that one is answered once the rest is read (and
//            dropped): later, but still nothing kept.
// While the verdict is not known yet (a rate limiter that answers later), the socket is
// paused and what already arrived is held, counted in the budget.

import type { HttpResponse } from 'uWebSockets.js';
import type { BodyBudget } from '../limits/body-budget';
import { sharedBodyCopy } from './request';

export type BodyOutcome = Buffer | 'too_large' | 'busy';

export interface BodyReader {
  /** The verdict comes later: pause the upload, hold what already came. */
  hold(): void;
  /**
   * Admitted: `done` gets the body (a one-chunk body in the reused buffer, see
   * sharedBodyCopy), or why not, as soon as that is known.
   */
  keep(done: (body: BodyOutcome) => void): void;
  /** Refused: `done` (the answer) now; the rest of the body is dropped as it comes. */
  drain(done: () => void): void;
  /** The client went away: give back what the request took. */
  abort(): void;
}

export interface BodyOptions {
  limit: number;
  /** Refusals answered before the upload ends (false: the client asked `Connection: close`). */
  answerEarly: boolean;
  contentLength: number | null;
  budget: BodyBudget;
}

export function openBody(res: HttpResponse, o: BodyOptions): BodyReader {
  let mode: 'undecided' | 'keep' | 'done' = 'undecided';
  let chunks: Buffer[] = [];
  let size = 0;
  let reserved = 0;
  let ended = false;
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

  /** Budget for bytes not covered by an up-front reservation. */
  function take(bytes: number): boolean {
    if (!o.budget.take(bytes)) return false;
    reserved += bytes;
    return true;
  }

  function refuse(why: 'too_large' | 'busy') {
    outcome ??= why;
    release();
    if (mode === 'keep' && (o.answerEarly || ended)) deliver();
  }

  /** keep mode: the outcome is known (refused, or the whole body came). */
  function deliver() {
    mode = 'done';
    const body: BodyOutcome = outcome ?? shared ?? (chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
    try {
      kept!(body);
    } finally {
      release();
    }
  }

  res.onData((chunk, isLast) => {
    if (isLast) ended = true;
    if (mode === 'done' || outcome !== null) {
      // refused or answered: dropped; a refusal held for the end of the upload goes now
      if (isLast && drained !== null) drained();
      else if (isLast && mode === 'keep') deliver();
      return;
    }
    size += chunk.byteLength;
    if (size > o.limit) return refuse('too_large');
    if ((o.contentLength === null || mode === 'undecided') && !take(chunk.byteLength)) return refuse('busy');
    if (isLast && chunks.length === 0 && mode === 'keep') {
      // The usual case: the whole body in one chunk, into the reused buffer.
      shared = sharedBodyCopy(chunk) ?? Buffer.from(new Uint8Array(chunk));
    } else {
      chunks.push(Buffer.from(new Uint8Array(chunk))); // valid during this callback only
    }
    if (isLast && mode === 'keep') deliver();
  });

  function resume() {
    if (!paused) return;
    paused = false;
    res.resume();
  }

  return {
    hold() {
      if (ended) return;
      paused = true;
      res.pause();
    },
    keep(done) {
      mode = 'keep';
      kept = done;
      resume();
      const cl = o.contentLength;
      // Reserve the whole declared body now (what already came is part of it).
      if (outcome === null && cl !== null) {
        if (cl > o.limit) outcome = 'too_large';
        else if (!take(Math.max(0, cl - reserved))) outcome = 'busy';
      }
      if (ended || (outcome !== null && o.answerEarly)) deliver();
    },
    drain(done) {
      mode = 'done';
      release();
      resume();
      if (o.answerEarly || ended) return done();
      drained = () => {
        drained = null;
        done();
      };
    },
    abort() {
      mode = 'done';
      release();
    },
  };
}
