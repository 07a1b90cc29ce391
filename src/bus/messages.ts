// Every cross-thread message, as a typed interface with a `type` tag.
// Publish frames are binary (see codec below) so that the serialised client message
// travels as bytes and is handed to uWS untouched; everything else is a JSON control frame.

/** Frame type bytes on the rings (values >= 250 are reserved by the ring itself). */
export const FrameType = {
  Publish: 1,
  Control: 2,
} as const;

/** The owner's answer to hist_sub: S = `serial`, then `items` ([serial, frame, tags?]) oldest first. */
export interface HistSubReply {
  epoch: string;
  serial: number;
  /** tags: the event's (memory driver), for a tag-filtered subscription (history/shard.ts). */
  items: [serial: number, message: string, tags?: string][];
  /** With a resume position: whether N+1 … S follow; null without one. */
  recovered: boolean | null;
  reason?: 'no_history' | 'epoch_changed' | 'too_old' | 'too_many' | 'invalid';
  error?: string;
}

/** The owner's answer to hist_page. */
export interface HistPageReply {
  epoch: string;
  items: { serial: number; message: string; timeMs: number }[];
  more: boolean;
}

/** A channel record's answer to "how is this channel?" */
export interface ChannelInfo {
  occupied: boolean;
  subscription_count: number;
  user_count: number | null;
}

export type PresenceJoinReply =
  | { ok: true; members: [unknown, unknown][] }
  | { ok: false; type: 'LimitReached'; error: string; status: number };

export type ControlMsg =
  /** A shard's local subscriber count for a non-presence channel changed by delta. */
  | { type: 'sub'; app: string; channel: string; shard: number; delta: 1 | -1 }
  /** Presence join: the owner answers with the member snapshot (or a refusal). */
  | { type: 'presence_join'; req: number; from: number; app: string; channel: string; socketId: string; userId: unknown; userInfo: unknown }
  | { type: 'presence_leave'; app: string; channel: string; socketId: string; userKey: string; shard: number }
  | { type: 'channel_info'; req: number; from: number; app: string; channel: string }
  | { type: 'channels_list'; req: number; from: number; app: string; prefix: string }
  /** Presence members of a channel as [user_id, user_info] pairs. */
  | { type: 'members'; req: number; from: number; app: string; channel: string }
  /** Close every socket signed in as this user (API terminate_connections). */
  | { type: 'terminate_user'; app: string; userId: string }
  /**
   * Publisher → owner, before the publish frames: an API event on a cache channel. The
   * owner keeps `message` (the frame as published) for `ttl` seconds (channels/cache.ts).
   */
  | { type: 'cache_set'; app: string; channel: string; message: string; ttl: number; tags?: string }
  /** The owner's cached message of a cache channel: answers a CachedMessage or null. */
  | { type: 'cache_get'; req: number; from: number; app: string; channel: string }
  /**
   * Owner → every shard (or one shard, after a restart): a presence member event. Each
   * shard frames it, hands it to its local subscribers and updates its shadow member set
   * of the channel (channels/rebuild.ts). `except`: socket_id not to send it to, or ''.
   */
  | { type: 'member'; op: 'added' | 'removed'; app: string; channel: string; userId: unknown; userInfo: unknown; except: string }
  /**
   * Surviving shard → the replacement of a crashed shard: the local subscriptions of the
   * channels the new shard owns, in batches; `last` on the final one (see channels/rebuild.ts).
   */
  | { type: 'restore'; channels: RestoreChannel[]; last: boolean }
  /**
   * Every shard → each owner shard, every bus.owner_reconcile_interval_ms: its local truth
   * of every channel the owner owns where it has subscribers (channels/reconcile.ts); the
   * owner brings its records to it. `members`: the member events this shard has read from
   * the owner since the pair's rings were made (the owner compares `shadow`s only when it
   * has sent no more than that, i.e. none is on its way).
   */
  | { type: 'reconcile'; channels: ReconcileChannel[]; members: number; users?: ReconcileUser[] }
  /**
   * Delta sequencer → the shards with delta subscribers of the channel (delta/): one
   * message of stream `stream`, in full (with __delta_seq) and, unless it goes full to
   * everyone (`deltas` null), as a pusher:delta per algorithm (ALGOS order; null: none).
   * `dropped`: stream ids the shards may forget. `tags`: the event's (tag filtering);
   * `filtered`: the same message in the streams of the tag filters it matched that the
   * receiving shard registered (`delta_filter`), each numbered and delta-compressed on its own.
   * `serial`, `epoch`: a history channel's message, numbered by its owner (history/owner.ts);
   * the shard gives them to subscriptions with positions (`__serial`, `"serial"` in data).
   */
  | { type: 'delta'; app: string; channel: string; except: string; stream: number; full: string; deltas: (string | null)[] | null; dropped: number[]; tags?: string | null; filtered?: FilteredDelta[]; serial?: number; epoch?: string }
  /**
   * Shard → primary (delta_compression.cluster_coordination): a local event of a channel
   * deltas may apply to, for a cluster-wide stream position (delta/coord.ts).
   */
  | { type: 'delta_origin'; app: string; channel: string; except: string; force: number; message: string; tags?: string }
  /** Shard → delta sequencer: the kept messages of a channel with a conflation key (delta_cache_sync), of a filter's streams with `filter`. */
  | { type: 'delta_states'; req: number; from: number; app: string; channel: string; filter?: string }
  /**
   * Shard → delta sequencer: the shard's first (`add`) or last (`remove`) delta subscriber
   * of the channel with this tag filter (CompiledFilter.key) and algorithm. Answered once
   * the sequencer has it (delta/shard.ts rule 8).
   */
  | { type: 'delta_filter'; req: number; from: number; op: 'add' | 'remove'; app: string; channel: string; filter: string; algo: string }
  /**
   * Shard → primary: a question for every other node of the cluster (channels/
   * cluster-directory.ts); answered with { answers, complete }.
   */
  | { type: 'cluster_ask'; req: number; from: number; question: { kind: string } & Record<string, unknown> }
  /** Shard → primary: subscribe the node to this bucket (adapter/buckets.ts); answered once the backend acknowledged it. */
  | { type: 'cluster_bucket'; req: number; from: number; bucket: number }
  /** Owner shard → primary (in a cluster): a node-local presence transition, for the other nodes. */
  | { type: 'cluster_member'; op: 'added' | 'removed'; app: string; channel: string; userId: unknown; userInfo: unknown }
  /** Primary → owner shard: another node's presence transition (channels/remote-presence.ts). */
  | { type: 'remote_member'; op: 'added' | 'removed'; node: string; app: string; channel: string; userId: unknown; userInfo: unknown }
  /** Owner shard → primary (in a cluster): this node's subscription count of a channel. */
  | { type: 'cluster_count'; app: string; channel: string; total: number }
  /** Primary → owner shard: another node's subscription count of a channel. */
  | { type: 'remote_count'; node: string; app: string; channel: string; total: number }
  /** Primary → every shard: a node stopped or was declared failed; its members go. */
  | { type: 'remote_node_gone'; node: string }
  /** Primary → owner shard: its presence members and subscription counts ({ members, counts }), for a node that just joined. */
  | { type: 'local_presence'; req: number; from: number }
  /**
   * Watchlists (channels/users.ts), to the owner of the user (userOwnerOf): a signed-in
   * connection of an app with enable_watchlist_events was added (+1) or closed (-1) on `shard`.
   */
  | { type: 'user_conn'; app: string; userId: string; shard: number; delta: 1 | -1 }
  /** A watcher on the sending shard watches these users (all owned by the receiver): answers the ids online now. */
  | { type: 'watch'; req: number; from: number; app: string; userIds: string[] }
  /** A watcher on `shard` that was counted by `watch` went away. */
  | { type: 'unwatch'; app: string; userIds: string[]; shard: number }
  /** Owner of the users → a shard with watchers of them: they came online / went offline. */
  | { type: 'watchlist'; app: string; op: 'online' | 'offline'; userIds: string[] }
  /** Owner shard → primary (in a cluster): a user's first signed-in connection on this node (online) or its last one gone (offline). */
  | { type: 'cluster_user'; op: 'online' | 'offline'; app: string; userId: string }
  /** Replacement owner shard → primary, after its rebuild: the users it owns that are online on this node (the primary tells the other nodes what changed). */
  | { type: 'cluster_users'; shard: number; users: [app: string, userId: string][] }
  /** Primary → owner shard: a user came online / went offline on another node (adapter/watchlist.ts). */
  | { type: 'remote_user'; op: 'online' | 'offline'; node: string; app: string; userId: string }
  /** Surviving shard → the replacement of a crashed shard, before its last `restore`: its part of the users the replacement owns. */
  | { type: 'user_restore'; users: UserRestore[] }
  | { type: 'reply'; req: number; body: unknown }
  /**
   * History channels (history/): an API or client event, from the shard that got it to the
   * channel's owner, which numbers and keeps it and sends it on as `hist`.
   */
  | { type: 'hist_pub'; app: string; channel: string; except: string; message: string; tags?: string; delta?: boolean }
  /** Owner → every shard with subscribers of the channel: a numbered message of a history channel. */
  | { type: 'hist'; app: string; channel: string; except: string; epoch: string; serial: number; message: string; tags?: string }
  /** A new subscription: the channel's position and what to replay (answers a HistSubReply). */
  | { type: 'hist_sub'; req: number; from: number; app: string; channel: string; rewind: number; recover: { epoch: string; serial: number } | null; relay?: number; cap?: number }
  /**
   * Owner → delta sequencer: the answer to a hist_sub of a delta subscription (its `relay`),
   * which the sequencer sends on as the reply in its output order (delta/sequencer.ts rule 6).
   */
  | { type: 'hist_relay'; to: number; req: number; body: unknown }
  /** Idempotent publish (history/idempotency.ts), to the key's owner: answers an IdemReply. */
  | { type: 'idem_claim'; req: number; from: number; app: string; key: string; route?: 'events' | 'batch_events' }
  /** The publish with this key answered 2xx: later ones get this answer. */
  | { type: 'idem_done'; app: string; key: string; status: number; body: unknown; route?: 'events' | 'batch_events' }
  /** The publish with this key failed (nothing delivered): the key is free again. */
  | { type: 'idem_release'; app: string; key: string }
  /** REST history: one page (answers a HistPageReply). */
  | { type: 'hist_page'; req: number; from: number; app: string; channel: string; limit: number; direction: 'backwards' | 'forwards'; after: number; before: number | null }
  /**
   * Shard → primary: webhook events this shard decided (owner transitions) or saw (client
   * events, cache misses), as [app id, event] in the order they happened (webhooks/shard.ts).
   */
  | { type: 'webhook'; events: [string, WebhookEvent][] }
  /**
   * Replacement shard → primary, after its rebuild and before any later operation: every
   * channel (with presence members) it owns of the apps with webhooks, so the primary
   * re-decides their transitions (the crash rule, webhooks/ledger.ts).
   */
  | { type: 'webhook_sync'; shard: number; channels: SyncChannel[] }
  | FallbackMsg;

/**
 * HTTP fallback sessions (fallback/relay.ts): a session lives on its home shard (hashed from
 * its id); a request for it that another shard accepted is relayed there.
 */
export type FallbackMsg =
  /** A receiving request (stream or poll) held by shard `from` as `rid`. */
  | { type: 'fb_recv'; from: number; rid: number; key: string; session: string; streaming: boolean; origin: string; ip: string; ua: string }
  /** Home shard → the shard holding request `rid`: status (first write only), text, and whether it ends. */
  | { type: 'fb_out'; rid: number; session: string; status: number; text: string; end: boolean }
  /** The shard holding request `rid` → home shard: the request ended (client abort, shutdown). */
  | { type: 'fb_gone'; session: string; rid: number; from: number }
  /** An xhr_send's frames: answered { status, error }. */
  | { type: 'fb_send'; req: number; from: number; key: string; session: string; frames: string[]; ip: string; ua: string };

/** A webhook event as sent to receivers (the fields of docs/webhooks.md; src/webhooks/events.ts). */
export type WebhookEvent =
  | { name: 'channel_occupied' | 'channel_vacated' | 'cache_miss'; channel: string }
  | { name: 'member_added' | 'member_removed'; channel: string; user_id: unknown }
  | { name: 'client_event'; channel: string; event: string; data: string; socket_id: string; user_id?: unknown }
  | { name: 'subscription_count'; channel: string; subscription_count: number };

/** A channel in a `webhook_sync`: app, channel, the members' user_ids of a presence channel or null. */
export type SyncChannel = [app: string, channel: string, members: unknown[] | null];

/** A `reconcile` report's user (watchlists): the sending shard's signed-in connections of a user the owner owns. */
export type ReconcileUser = [app: string, userId: string, conns: number];

/** One user in a `user_restore` message: what the sending shard holds of it. */
export interface UserRestore {
  app: string;
  userId: string;
  /** Signed-in connections of the user on the sending shard. */
  conns: number;
  /** Watchers of the user on the sending shard that the dead owner had counted. */
  watchers: number;
  /** Whether the sending shard's watchers were last told the user is online (null: never told). */
  known: boolean | null;
}

/** One channel in a `restore` message: what the sending shard holds of it. */
/** A presence member as a shard holds it: [user_id, user_info, connections there, their socket_ids]. */
export type RestoreMember = [userId: unknown, userInfo: unknown, conns: number, socketIds: string[]];

/**
 * A channel in a `reconcile` report: what the sending shard holds now (a RestoreChannel),
 * plus, for presence, the sockets whose join was sent and not answered yet (`pending`).
 */
export interface ReconcileChannel extends RestoreChannel {
  pending: string[] | null;
}

export interface RestoreChannel {
  app: string;
  channel: string;
  /** Subscriptions on the sending shard (for presence: joined sockets). */
  subs: number;
  /** Presence: per local member, its connections on the sending shard and their socket_ids; null otherwise. */
  members: RestoreMember[] | null;
  /** Presence: the member ids the sending shard's clients know (its shadow set); null otherwise. */
  shadow: unknown[] | null;
}

/** One tag filter's stream in a sequencer `delta` frame (fields as the frame's own). */
export interface FilteredDelta {
  /** The filter (CompiledFilter.key). */
  key: string;
  stream: number;
  full: string;
  deltas: (string | null)[] | null;
  dropped: number[];
}

export type RequestMsg = Extract<ControlMsg, { req: number; from: number }>;
/** A request without the routing fields the bus fills in. */
export type RequestBody = RequestMsg extends infer M ? (M extends RequestMsg ? Omit<M, 'req' | 'from'> : never) : never;

/**
 * Every frame payload starts with a u32 order stamp, left zero by the encoders and filled
 * in by the bus when it writes the frame (see Bus: cross-ring order).
 */
export const STAMP_BYTES = 4;

// ── Publish frame codec ──────────────────────────────────────────────────────
// [u32 stamp][u16 appLen][app utf8][u16 channelLen][channel utf8][u8 exceptLen][except ascii]
// ([u8 traceLen][traceparent ascii] when exceptLen has TRACED set) [u16 tagsLen][tags utf8][message bytes]
// The tag section (tag filtering, filter/) is the event's tags as sorted JSON, so a shard
// filters without parsing the message; tagsLen 0 = untagged (the usual frame: two bytes
// more, no other work), TAGS_ALL_LEN = a protocol message every subscriber gets, filtered
// or not (subscription_count). The trace section (tracing/) is the W3C traceparent of the
// publish's sampled span, written only while tracing is on: the usual frame pays nothing.

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Tags of a protocol message that filtered subscribers get too (member events, subscription_count). */
export const TAGS_ALL: unique symbol = Symbol('every subscriber');
/** A publish frame's tags: none (untagged), the sorted tags JSON, or every subscriber. */
export type FrameTags = null | string | typeof TAGS_ALL;
const TAGS_ALL_LEN = 0xffff;
/** The bit of the except length byte that says a trace section follows (socket_ids are at most 64 bytes). */
const TRACED = 0x80;

export interface PublishFrame {
  app: string;
  channel: string;
  /** socket_id that must not receive the message, or '' */
  except: string;
  message: Uint8Array;
  /** The tag section; absent = null (untagged). */
  tags?: FrameTags;
  /** The `traceparent` of the publish (tracing on and sampled); absent = none. */
  trace?: string | null;
}

/** The tag section's bytes of `tags` (a JSON object string, or TAGS_ALL). */
function tagBytes(tags: FrameTags): Uint8Array | null {
  if (tags === null || tags === TAGS_ALL) return null;
  const t = enc.encode(tags);
  if (t.length >= TAGS_ALL_LEN) throw new RangeError('publish tags too long');
  return t;
}

export function encodePublish(app: string, channel: string, except: string, message: Uint8Array, tags: FrameTags = null, trace: string | null = null): Uint8Array {
  const a = enc.encode(app);
  const c = enc.encode(channel);
  const x = enc.encode(except);
  if (a.length > 0xffff || c.length > 0xffff || x.length >= TRACED) throw new RangeError('publish header field too long');
  const t = tags === null ? null : tagBytes(tags);
  const tl = t === null ? 0 : t.length;
  const p = trace === null ? null : enc.encode(trace);
  if (p !== null && p.length > 0xff) throw new RangeError('publish trace context too long');
  const out = new Uint8Array(STAMP_BYTES + 2 + a.length + 2 + c.length + 1 + x.length + (p === null ? 0 : 1 + p.length) + 2 + tl + message.length);
  const dv = new DataView(out.buffer);
  let o = STAMP_BYTES;
  dv.setUint16(o, a.length); o += 2; out.set(a, o); o += a.length;
  dv.setUint16(o, c.length); o += 2; out.set(c, o); o += c.length;
  out[o++] = p === null ? x.length : x.length | TRACED; out.set(x, o); o += x.length;
  if (p !== null) { out[o++] = p.length; out.set(p, o); o += p.length; }
  dv.setUint16(o, tags === TAGS_ALL ? TAGS_ALL_LEN : tl); o += 2;
  if (t !== null) { out.set(t, o); o += tl; }
  out.set(message, o);
  return out;
}

export function decodePublish(buf: Uint8Array): PublishFrame {
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let o = STAMP_BYTES;
  const al = dv.getUint16(o); o += 2;
  const app = dec.decode(buf.subarray(o, o + al)); o += al;
  const cl = dv.getUint16(o); o += 2;
  const channel = dec.decode(buf.subarray(o, o + cl)); o += cl;
  const xb = buf[o++];
  const xl = xb & ~TRACED;
  const except = dec.decode(buf.subarray(o, o + xl)); o += xl;
  let trace: string | null = null;
  if (xb !== xl) { const pl = buf[o++]; trace = dec.decode(buf.subarray(o, o + pl)); o += pl; }
  const tl = dv.getUint16(o); o += 2;
  let tags: FrameTags = null;
  if (tl === TAGS_ALL_LEN) tags = TAGS_ALL;
  else if (tl > 0) { tags = dec.decode(buf.subarray(o, o + tl)); o += tl; }
  return trace === null ? { app, channel, except, message: buf.subarray(o), tags } : { app, channel, except, message: buf.subarray(o), tags, trace };
}

/** [u32 stamp][JSON utf8] */
export function encodeControl(msg: ControlMsg): Uint8Array {
  const json = JSON.stringify(msg);
  const out = new Uint8Array(STAMP_BYTES + json.length * 3);
  const { written } = enc.encodeInto(json, out.subarray(STAMP_BYTES));
  return out.subarray(0, STAMP_BYTES + written);
}

export function decodeControl(buf: Uint8Array): ControlMsg {
  return JSON.parse(dec.decode(buf.subarray(STAMP_BYTES))) as ControlMsg;
}
