/**
 * Protocol event names. The canonical (internal) names are Pusher's `pusher:` /
 * `pusher_internal:` ones. Clients may also send the spec's neutral `proto:` /
 * `proto_internal:` spellings; those are normalised on the way in. On the way out
 * the configured prefix (`protocol.event_prefix`) decides which spelling is sent.
 */

export const Ev = {
  ConnectionEstablished: 'pusher:connection_established',
  Error: 'pusher:error',
  Ping: 'pusher:ping',
  Pong: 'pusher:pong',
  Subscribe: 'pusher:subscribe',
  Unsubscribe: 'pusher:unsubscribe',
  SubscriptionSucceeded: 'pusher_internal:subscription_succeeded',
  SubscriptionError: 'pusher:subscription_error',
  MemberAdded: 'pusher_internal:member_added',
  MemberRemoved: 'pusher_internal:member_removed',
  SubscriptionCount: 'pusher_internal:subscription_count',
  CacheMiss: 'pusher:cache_miss',
  Signin: 'pusher:signin',
  SigninSuccess: 'pusher:signin_success',
  WatchlistEvents: 'pusher_internal:watchlist_events',
  EnableDelta: 'pusher:enable_delta_compression',
  DeltaEnabled: 'pusher:delta_compression_enabled',
  Delta: 'pusher:delta',
  DeltaSyncError: 'pusher:delta_sync_error',
  DeltaCacheSync: 'pusher:delta_cache_sync',
  /** History (docs/protocol.md "History, rewind and recovery"): a subscription's position and replay result. */
  Recovery: 'pusher_internal:recovery',
} as const;
export type EvName = (typeof Ev)[keyof typeof Ev];

export type EventPrefix = 'pusher' | 'proto';

const PROTO = 'proto:';
const PROTO_INTERNAL = 'proto_internal:';
const PUSHER = 'pusher:';
const PUSHER_INTERNAL = 'pusher_internal:';

/** 'proto:x' → 'pusher:x', 'proto_internal:x' → 'pusher_internal:x'; anything else unchanged. */
export function normalizeIncomingEvent(name: string): string {
  // charCode pre-check: almost every frame is 'pusher:…' or 'client-…', skip the startsWith pair.
  if (name.charCodeAt(0) !== 112 /* p */ || name.charCodeAt(2) !== 111 /* o */) return name;
  if (name.startsWith(PROTO)) return PUSHER + name.slice(PROTO.length);
  if (name.startsWith(PROTO_INTERNAL)) return PUSHER_INTERNAL + name.slice(PROTO_INTERNAL.length);
  return name;
}

/**
 * Outgoing spelling of a canonical name: outName('pusher:pong', 'proto') === 'proto:pong',
 * 'pusher_internal:x' → 'proto_internal:x'. Names without a pusher prefix are unchanged.
 * For hot paths prefer the precomputed table from `outNames(prefix)`.
 */
export function outName(canonical: string, prefix: EventPrefix): string {
  if (prefix === 'pusher') return canonical;
  if (canonical.startsWith(PUSHER)) return PROTO + canonical.slice(PUSHER.length);
  if (canonical.startsWith(PUSHER_INTERNAL)) return PROTO_INTERNAL + canonical.slice(PUSHER_INTERNAL.length);
  return canonical;
}

export type OutNames = { readonly [K in keyof typeof Ev]: string };
const tables = new Map<EventPrefix, OutNames>();

/** Every `Ev` name in the outgoing spelling; built once per prefix (config time, not per message). */
export function outNames(prefix: EventPrefix): OutNames {
  let table = tables.get(prefix);
  if (table === undefined) {
    const built: Record<string, string> = {};
    for (const [k, v] of Object.entries(Ev)) built[k] = outName(v, prefix);
    table = Object.freeze(built) as OutNames;
    tables.set(prefix, table);
  }
  return table;
}

/** Client events are the ones named 'client-…'. */
export function isClientEvent(name: string): boolean {
  return name.startsWith('client-');
}
