// What one webhook attempt came to, whatever carried it (an HTTP POST, send.ts, or a
// Lambda invoke, lambda.ts), classified for the retry policy of the spec.

export type Outcome =
  | { ok: true; status: number }
  | { ok: false; retry: boolean; reason: 'status' | 'network' | 'timeout' | 'config'; status?: number; error?: string };

/** 429/500/502/503/504 are retried; every other answer is final. */
export const RETRY_STATUSES: ReadonlySet<number> = new Set([429, 500, 502, 503, 504]);
