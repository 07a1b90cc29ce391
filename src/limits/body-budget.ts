// limits.http_body_bytes_in_flight: request-body bytes one shard holds at once, all API
// requests together. A request is admitted to read its body only when its bytes fit
// (Content-Length up front, or chunk by chunk when it has none); otherwise it is answered
// 503 and its body is read without being kept. One per shard thread: no sharing needed,
// a shard reads only its own sockets.

export interface BodyBudget {
  /** Takes `bytes`; false (nothing taken) when they do not fit. */
  take(bytes: number): boolean;
  give(bytes: number): void;
  /** Bytes taken now (tests, metrics). */
  readonly used: number;
  readonly max: number;
}

export function createBodyBudget(max: number): BodyBudget {
  let used = 0;
  return {
    take(bytes) {
      if (used + bytes > max) return false;
      used += bytes;
      return true;
    },
    give(bytes) {
      used -= bytes;
    },
    get used() {
      return used;
    },
    max,
  };
}
