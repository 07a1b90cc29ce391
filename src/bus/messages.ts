// Every cross-thread message, as a typed interface with a `type` tag.
// Publish frames are binary (see codec below) so that the serialised client message
// travels as bytes and is handed to uWS untouched; everything else is a JSON control frame.

/** Frame type bytes on the rings (values >= 250 are reserved by the ring itself). */
export const FrameType = {
  Publish: 1,
  Control: 2,
} as const;

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
  | { type: 'cache_set'; app: string; channel: string; message: string; ttl: number }
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
   * Delta sequencer → the shards with delta subscribers of the channel (delta/): one
   * message of stream `stream`, in full (with __delta_seq) and, unless it goes full to
   * everyone (`deltas` null), as a pusher:delta per algorithm (ALGOS order; null: none).
   * `dropped`: stream ids the shards may forget.
   */
  | { type: 'delta'; app: string; channel: string; except: string; stream: number; full: string; deltas: (string | null)[] | null; dropped: number[] }
  /** Shard → delta sequencer: the kept messages of a channel with a conflation key (delta_cache_sync). */
  | { type: 'delta_states'; req: number; from: number; app: string; channel: string }
  | { type: 'reply'; req: number; body: unknown };

/** One channel in a `restore` message: what the sending shard holds of it. */
export interface RestoreChannel {
  app: string;
  channel: string;
  /** Subscriptions on the sending shard (for presence: joined sockets). */
  subs: number;
  /** Presence: [user_id, user_info, connections on the sending shard] per local member; null otherwise. */
  members: [unknown, unknown, number][] | null;
  /** Presence: the member ids the sending shard's clients know (its shadow set); null otherwise. */
  shadow: unknown[] | null;
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
// [u32 stamp][u16 appLen][app utf8][u16 channelLen][channel utf8][u8 exceptLen][except ascii][message bytes]

const enc = new TextEncoder();
const dec = new TextDecoder();

export interface PublishFrame {
  app: string;
  channel: string;
  /** socket_id that must not receive the message, or '' */
  except: string;
  message: Uint8Array;
}

export function encodePublish(app: string, channel: string, except: string, message: Uint8Array): Uint8Array {
  const a = enc.encode(app);
  const c = enc.encode(channel);
  const x = enc.encode(except);
  if (a.length > 0xffff || c.length > 0xffff || x.length > 0xff) throw new RangeError('publish header field too long');
  const out = new Uint8Array(STAMP_BYTES + 2 + a.length + 2 + c.length + 1 + x.length + message.length);
  const dv = new DataView(out.buffer);
  let o = STAMP_BYTES;
  dv.setUint16(o, a.length); o += 2; out.set(a, o); o += a.length;
  dv.setUint16(o, c.length); o += 2; out.set(c, o); o += c.length;
  out[o++] = x.length; out.set(x, o); o += x.length;
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
  const xl = buf[o++];
  const except = dec.decode(buf.subarray(o, o + xl)); o += xl;
  return { app, channel, except, message: buf.subarray(o) };
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
