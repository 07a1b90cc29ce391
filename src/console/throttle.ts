// Failed-login throttling of the console, per client address: an address that fails
// `maxFailures` logins within `windowMs` of its first failure is refused (429,
// Retry-After) for the rest of that window, whatever it sends, a right token included.
// A successful login forgets the address's failures. The table holds at most
// `maxAddresses` entries: a new address past it first drops the entries whose window is
// over, then the one whose window started first (counted: an attacker with that many
// addresses could make the server forget one, never grow its memory).

export interface ThrottleEvents {
  /** A request refused with 429. */
  throttled(): void;
  /** An address forgotten to stay within maxAddresses. */
  evicted(): void;
}

export interface LoginThrottle {
  /** Seconds to wait when `addr` is blocked now, else 0. */
  blocked(addr: string, nowMs?: number): number;
  /** A failed login from `addr`; the seconds to wait when this one blocked it, else 0. */
  failed(addr: string, nowMs?: number): number;
  succeeded(addr: string): void;
  readonly size: number;
}

interface Entry { start: number; failures: number }

export function createLoginThrottle(o: { maxFailures: number; windowMs: number; maxAddresses: number; events: ThrottleEvents }): LoginThrottle {
  // Insertion order = order of window start (an entry whose window ended is replaced, moving it last).
  const table = new Map<string, Entry>();

  const retryAfter = (e: Entry, now: number): number => Math.max(1, Math.ceil((e.start + o.windowMs - now) / 1000));

  function live(addr: string, now: number): Entry | undefined {
    const e = table.get(addr);
    if (e !== undefined && now - e.start >= o.windowMs) {
      table.delete(addr);
      return undefined;
    }
    return e;
  }

  function makeRoom(now: number): void {
    for (const [addr, e] of table) {
      if (table.size < o.maxAddresses) return;
      if (now - e.start >= o.windowMs) table.delete(addr);
      else break; // in start order: the rest started later
    }
    while (table.size >= o.maxAddresses) {
      const oldest = table.keys().next().value as string;
      table.delete(oldest);
      o.events.evicted();
    }
  }

  return {
    blocked(addr, now = Date.now()) {
      const e = live(addr, now);
      if (e === undefined || e.failures < o.maxFailures) return 0;
      o.events.throttled();
      return retryAfter(e, now);
    },
    failed(addr, now = Date.now()) {
      let e = live(addr, now);
      if (e === undefined) {
        makeRoom(now);
        e = { start: now, failures: 0 };
        table.set(addr, e);
      }
      e.failures++;
      return e.failures >= o.maxFailures ? retryAfter(e, now) : 0;
    },
    succeeded(addr) {
      table.delete(addr);
    },
    get size() {
      return table.size;
    },
  };
}
