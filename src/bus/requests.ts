/*
 * Request/reply over the bus: the requests this thread sent and waits an answer for.
 *
 *   open(to, type) ──▶ req n, a promise ──▶ control frame {…, req: n, from: self} to `to`
 *   `to` answers reply(from, n, body) ──▶ control frame {type: 'reply', req: n, body}
 *   the reader delivers it ──▶ settle(n, body) resolves the promise
 *
 * Every request ends exactly once:
 *  - settle(n, body)      the answer arrived: resolved with body;
 *  - timeoutMs passed     rejected with BusTimeoutError (the HTTP API answers 503);
 *  - peerRestarted(peer)  the peer was replaced (Bus.rewire): rejected at once with
 *                         BusPeerRestartedError — the old thread will never answer;
 *  - closeAll()           the bus stopped: rejected with BusTimeoutError;
 *  - fail(n, err)         the request frame could not be written (BusFullError).
 * An answer after any of these finds nothing to settle and is dropped (settle → false).
 * Pure apart from timers, which can be passed in (tests use a fake clock).
 */
import { BusPeerRestartedError, BusTimeoutError } from './errors';

/** The timer functions Requests uses; the globals by default. */
export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

interface Pending {
  to: number;
  type: string;
  resolve(body: unknown): void;
  reject(err: Error): void;
  timer: unknown;
}

export class Requests {
  private readonly pending = new Map<number, Pending>();
  private nextReq = 1;

  constructor(
    private readonly timeoutMs: number,
    private readonly timers: Timers = realTimers,
  ) {
    if (!(timeoutMs > 0)) throw new RangeError(`request timeout must be > 0 ms, got ${timeoutMs}`);
  }

  /** Requests waiting for an answer. */
  get size(): number {
    return this.pending.size;
  }

  /** A new request to thread `to`: its number (to send) and the promise of its answer. */
  open<T>(to: number, type: string): { req: number; answer: Promise<T> } {
    const req = this.nextReq++;
    const answer = new Promise<T>((resolve, reject) => {
      const timer = this.timers.setTimeout(() => {
        this.pending.delete(req);
        reject(new BusTimeoutError(to, type));
      }, this.timeoutMs);
      this.pending.set(req, { to, type, resolve: resolve, reject, timer });
    });
    return { req, answer };
  }

  /** The answer to request `req` arrived: true when it settled one still waiting. */
  settle(req: number, body: unknown): boolean {
    const p = this.take(req);
    if (p === null) return false; // timed out, or its peer restarted, already
    p.resolve(body);
    return true;
  }

  /** The request could not be sent: rejects it with err. */
  fail(req: number, err: Error): void {
    this.take(req)?.reject(err);
  }

  /** Thread `peer` was replaced: its requests are rejected with BusPeerRestartedError. */
  peerRestarted(peer: number): void {
    for (const [req, p] of this.pending) {
      if (p.to !== peer) continue;
      this.take(req);
      p.reject(new BusPeerRestartedError(peer, p.type));
    }
  }

  /** The bus stopped: every request is rejected with BusTimeoutError (never answered: 503). */
  closeAll(): void {
    for (const req of [...this.pending.keys()]) {
      const p = this.take(req)!;
      p.reject(new BusTimeoutError(p.to, p.type));
    }
  }

  private take(req: number): Pending | null {
    const p = this.pending.get(req);
    if (p === undefined) return null;
    this.pending.delete(req);
    this.timers.clearTimeout(p.timer);
    return p;
  }
}
