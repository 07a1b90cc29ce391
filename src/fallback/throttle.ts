// Unknown-session answers per client address: an HTTP session id is a credential, so the
// answer to a request naming a session that does not exist (or is another client's) must not
// be a free oracle. Each address gets UNKNOWN_PER_WINDOW such answers per window on a shard;
// past them every fallback request from it is answered 429 until the window ends.
// The table holds at most MAX_ADDRESSES entries per shard (the oldest window goes first).

export const UNKNOWN_PER_WINDOW = 60;
export const UNKNOWN_WINDOW_MS = 60_000;
export const MAX_ADDRESSES = 10_000;

export interface UnknownThrottle {
  /** Seconds the address must wait (0: not throttled). */
  blocked(ip: string, now: number): number;
  /** The address was given an unknown-session answer. */
  missed(ip: string, now: number): void;
  readonly size: number;
}

export function createUnknownThrottle(max = UNKNOWN_PER_WINDOW, windowMs = UNKNOWN_WINDOW_MS, maxAddresses = MAX_ADDRESSES): UnknownThrottle {
  /** Address → [window start, answers in it], in order of window start (a new window re-inserts). */
  const table = new Map<string, { start: number; count: number }>();

  const current = (ip: string, now: number) => {
    const e = table.get(ip);
    if (e === undefined) return undefined;
    if (now - e.start < windowMs) return e;
    table.delete(ip);
    return undefined;
  };

  return {
    blocked(ip, now) {
      const e = current(ip, now);
      if (e === undefined || e.count < max) return 0;
      return Math.max(1, Math.ceil((e.start + windowMs - now) / 1000));
    },
    missed(ip, now) {
      const e = current(ip, now);
      if (e !== undefined) {
        e.count++;
        return;
      }
      while (table.size >= maxAddresses) table.delete(table.keys().next().value as string);
      table.set(ip, { start: now, count: 1 });
    },
    get size() {
      return table.size;
    },
  };
}
