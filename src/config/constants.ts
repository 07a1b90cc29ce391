// Config constants that code outside config/ uses at run time, kept apart from schema.ts
// so that importing them does not load the schema library, and the bounds that both the
// global and the per-app schema use.

/** Upper bound for `workers` (the default is capped to it). */
export const MAX_WORKERS = 256;

/** An HTTP header name (RFC 9110 token). */
export const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export const WEBHOOK_EVENT_TYPES = [
  'channel_occupied', 'channel_vacated', 'member_added', 'member_removed',
  'client_event', 'cache_miss', 'subscription_count',
] as const;

/** A channel's `channel_history` size upper bound: a replay or REST page reads at most this many from one channel. */
export const MAX_HISTORY_SIZE = 100_000;

/** The delta algorithms (delta_compression.algorithm, and per channel). */
export const DELTA_ALGORITHMS = ['Fossil', 'Xdelta3'] as const;
export type DeltaAlgorithm = typeof DELTA_ALGORITHMS[number];
