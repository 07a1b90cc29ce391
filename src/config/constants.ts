// Config constants that code outside config/ uses at run time, kept apart from schema.ts
// so that importing them does not load the schema library.

/** Upper bound for `workers` (the default is capped to it). */
export const MAX_WORKERS = 256;

/** An HTTP header name (RFC 9110 token). */
export const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export const WEBHOOK_EVENT_TYPES = [
  'channel_occupied', 'channel_vacated', 'member_added', 'member_removed',
  'client_event', 'cache_miss', 'subscription_count',
] as const;
