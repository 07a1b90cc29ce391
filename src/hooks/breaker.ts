// A circuit breaker per hook endpoint (per shard). Closed: calls go through; after
// `failures` consecutive failed calls it opens: calls are answered by the hook's failure
// policy without calling (counted as skipped) for `openMs`; then it is half-open: one
// call goes through as a probe (the others are still skipped), and its result closes the
// breaker or opens it again for another `openMs`. A denial is an answer, not a failure.

export type BreakerState = 'closed' | 'open' | 'half_open';

export class Breaker {
  private fails = 0;
  private openedAt = 0;
  private probing = false;
  state: BreakerState = 'closed';

  constructor(private readonly failures: number, private readonly openMs: number, private readonly onChange: (s: BreakerState) => void) {}

  /** Whether a call may go out now (a true in half-open state claims the probe). */
  admit(now: number): boolean {
    if (this.state === 'closed') return true;
    if (this.state === 'open') {
      if (now - this.openedAt < this.openMs) return false;
      this.set('half_open');
    }
    if (this.probing) return false;
    this.probing = true;
    return true;
  }

  success(): void {
    this.fails = 0;
    this.probing = false;
    if (this.state !== 'closed') this.set('closed');
  }

  failure(now: number): void {
    this.probing = false;
    if (this.state === 'half_open' || ++this.fails >= this.failures) {
      this.openedAt = now;
      this.fails = 0;
      if (this.state !== 'open') this.set('open');
    }
  }

  /** A call admitted but never finished (cancelled): frees the probe. */
  release(): void {
    this.probing = false;
  }

  private set(s: BreakerState): void {
    this.state = s;
    this.onChange(s);
  }
}
