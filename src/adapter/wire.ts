// What nodes send each other over the transport. Publishes are binary (the client frame
// travels as the bytes it was published as, like on the rings); the rest is small JSON.
//
//   publish:  [u8 1][u8 nodeLen][node ascii][u8 delta: 0 none, 1 true, 2 false][publish frame of bus/messages.ts]
//   control:  [u8 2][JSON NodeMsg]
//   signed:   [u8 3][16-byte tag][8-byte sender][f64 ms][f64 seq][frame]   (adapter.cluster_secret
//             set: every frame on the transport, the delta coordination's JSON too, travels
//             wrapped so; the tag is the first 16 bytes of HMAC-SHA256(secret, subject ‖ 0x00 ‖
//             sender ‖ ms ‖ seq ‖ frame); sender: random per process, ms: its clock when
//             sent, seq: its count of signed frames, so a receiver drops a stale or replayed
//             one, adapter/signed.ts. A build with another envelope sees bad signatures.)

import { createHmac, randomBytes, timingSafeEqual, type KeyObject } from 'node:crypto';
import { decodePublish, encodePublish, type PublishFrame } from '../bus/messages';
import { Force, forceOf } from '../bus/delta-input';

export const Kind = { Publish: 1, Control: 2, Signed: 3 } as const;

/**
 * The version of what nodes send each other, carried by every heartbeat (`v`). A node
 * ignores every message of a node whose heartbeat names another version, or none (builds
 * before it): the layouts differ (version 2 added the publish's delta byte), and a frame
 * read with the wrong layout could deliver garbage. Raise it with every change of a layout
 * or of what nodes decide from the messages (version 3: over NATS the oldest node sends
 * every presence and occupancy webhook, adapter/transitions.ts; a version-2 node would
 * send its own too).
 */
export const WIRE_VERSION = 3;

/** Node → every node (ctl subject) or node → one node (its own subject). */
export type NodeMsg =
  /** Alive; sent every heartbeat_interval_ms. `v`: WIRE_VERSION (absent from builds before it). */
  | { t: 'hb'; node: string; v?: number }
  /** Graceful stop: forget me now (not counted as a failure). */
  | { t: 'bye'; node: string }
  /** A question to every other node; each answers with `res` on the asker's subject. */
  | { t: 'req'; node: string; id: number; kind: string; body: unknown }
  | { t: 'res'; node: string; id: number; body: unknown; error?: string }
  /** A node-local presence transition of `node` (adapter/presence.ts). */
  | { t: 'member'; node: string; op: 'added' | 'removed'; app: string; channel: string; userId: unknown; userInfo: unknown }
  /**
   * `node`'s presence members and subscription counts of the channels its owner shard
   * `shard` (of `shards`) owns, for `to` that just joined, or for every node (`to` '*') when
   * `node`'s backend is reachable again; each node answers a '*' with its own, to `node`.
   * A part's whole state: the receiver forgets what it held of `node` in those channels and
   * is not listed. In parts of at most MEMBERS_PER_SYNC members / COUNTS_PER_SYNC counts
   * (`first`, `last`), sent one after the other. Older builds send
   * neither `shard`, `shards`, `first` nor `last`: adds only.
   */
  | {
    t: 'sync'; node: string; to: string; members: [app: string, channel: string, userId: unknown, userInfo: unknown][]; counts: ChannelCount[];
    shard?: number; shards?: number; first?: boolean; last?: boolean;
    /** Sent to a node seen again after the sender declared it failed: answer with your own state, to `node` (absent from older builds). */
    ask?: boolean;
  }
  /**
   * `node`'s subscription counts of the channels whose count changed (coalesced), and its
   * occupancy transitions since the last one, in order (absent from older builds).
   */
  | { t: 'counts'; node: string; counts: ChannelCount[]; occ?: Occupancy[] }
  /** A user's first signed-in connection on `node` (online) or its last one gone (offline) (adapter/watchlist.ts). */
  | { t: 'user'; node: string; op: 'online' | 'offline'; app: string; userId: string }
  /**
   * Every user online on `node` (its whole state: the receiver forgets what it held of
   * `node` and is not listed), for `to` that just joined, or for every node (`to` '*') when
   * `node`'s backend is reachable again; each node answers a '*' with its own, to `node`.
   * In parts of at most USERS_PER_MESSAGE users (`first`, `last`), sent one after the other.
   * `ask`: as in `sync`.
   */
  | { t: 'users'; node: string; to: string; users: [app: string, userId: string][]; first: boolean; last: boolean; ask?: boolean }
  /** `node`'s connections per app id (adapter/connections.ts); `ask`: as in `sync` (every node answers with its own). */
  | { t: 'conns'; node: string; counts: Record<string, number>; ask?: boolean }
  /** `node` changed the database app store (the app API, console/app-api.ts): read it again now (apps/sync.ts). Older builds ignore it. */
  | { t: 'apps'; node: string };

export type ChannelCount = [app: string, channel: string, total: number];
export type Occupancy = [op: 'occupied' | 'vacated', app: string, channel: string];

const enc = new TextEncoder();
const dec = new TextDecoder();

/** `delta`: the publish's `"delta": true|false` (undefined: the configuration decides). */
export function encodeNodePublish(node: string, f: PublishFrame, delta?: boolean): Uint8Array {
  // tags as published (a string or none: only subscription counts carry TAGS_ALL, never bridged)
  const body = encodePublish(f.app, f.channel, f.except, f.message, typeof f.tags === 'string' ? f.tags : null);
  const out = new Uint8Array(3 + node.length + body.length);
  out[0] = Kind.Publish;
  out[1] = node.length;
  for (let i = 0; i < node.length; i++) out[2 + i] = node.charCodeAt(i);
  out[2 + node.length] = forceOf(delta);
  out.set(body, 3 + node.length);
  return out;
}

export function encodeNodeMsg(msg: NodeMsg): Uint8Array {
  const json = enc.encode(JSON.stringify(msg));
  const out = new Uint8Array(1 + json.length);
  out[0] = Kind.Control;
  out.set(json, 1);
  return out;
}

export type Decoded =
  | { kind: typeof Kind.Publish; node: string; frame: PublishFrame; delta: boolean | undefined }
  | { kind: typeof Kind.Control; msg: NodeMsg };

/** Throws on a frame that is not ours (the caller counts it as an adapter error). */
/** Whether `buf` is a publish frame sent by `node` (ASCII id): read without decoding anything. */
export function isPublishFrom(buf: Uint8Array, node: string): boolean {
  const n = node.length;
  if (buf[0] !== Kind.Publish || buf[1] !== n || buf.length < 2 + n) return false;
  for (let i = 0; i < n; i++) if (buf[2 + i] !== node.charCodeAt(i)) return false;
  return true;
}

/** The sending node of a publish frame (read before the rest, which depends on its version); null for other kinds. */
export function publishSender(buf: Uint8Array): string | null {
  if (buf[0] !== Kind.Publish || buf.length < 2) return null;
  return String.fromCharCode(...buf.subarray(2, 2 + buf[1]));
}

export function decodeNode(buf: Uint8Array): Decoded {
  if (buf[0] === Kind.Publish) {
    const n = buf[1];
    const node = String.fromCharCode(...buf.subarray(2, 2 + n));
    const force = buf[2 + n];
    if (force !== Force.None && force !== Force.Delta && force !== Force.Full) throw new Error(`unknown delta flag ${force}`);
    const delta = force === Force.Delta ? true : force === Force.Full ? false : undefined;
    return { kind: Kind.Publish, node, frame: decodePublish(buf.subarray(3 + n)), delta };
  }
  if (buf[0] === Kind.Control) {
    const msg = JSON.parse(dec.decode(buf.subarray(1))) as NodeMsg;
    if (typeof msg !== 'object' || msg === null || typeof msg.t !== 'string' || typeof msg.node !== 'string') {
      throw new Error('malformed control message');
    }
    return { kind: Kind.Control, msg };
  }
  throw new Error(`unknown frame kind ${buf[0]}`);
}

/** Bytes of a signed frame's tag: HMAC-SHA256 truncated to 128 bits (as RFC 4868 does). */
export const TAG_BYTES = 16;
/** Bytes of a signed frame's stamp: sender (8), ms (f64), seq (f64). */
const STAMP_BYTES = 24;
const SIGNED_HEAD = 1 + TAG_BYTES + STAMP_BYTES;
const SUBJECT_END = new Uint8Array([0]);

/** Who signed a frame (8 random bytes per process, hex), when (its clock, ms) and its count of signed frames. */
export interface Stamp { sender: string; ms: number; seq: number }

/** The stamps of one sender: a new random id, then seq 1, 2, … with the clock at each. */
export function stamper(now: () => number = Date.now): () => Stamp {
  const sender = randomBytes(8).toString('hex');
  let seq = 0;
  return () => ({ sender, ms: now(), seq: ++seq });
}

const ownStamp = stamper();

/** The tag of `stamped` (stamp ‖ frame) on `subject`: binds the subject, so a frame signed for one subject is refused on another. */
function tagOf(key: KeyObject, subject: string, stamped: Uint8Array): Buffer {
  return createHmac('sha256', key).update(subject).update(SUBJECT_END).update(stamped).digest();
}

/** `frame` wrapped as a signed frame for `subject` with `stamp` (one copy of the frame). */
export function signFrame(key: KeyObject, subject: string, frame: Uint8Array, stamp: Stamp = ownStamp()): Uint8Array {
  const out = Buffer.allocUnsafe(SIGNED_HEAD + frame.length);
  out[0] = Kind.Signed;
  const at = 1 + TAG_BYTES;
  out.write(stamp.sender, at, 8, 'hex');
  out.writeDoubleBE(stamp.ms, at + 8);
  out.writeDoubleBE(stamp.seq, at + 16);
  out.set(frame, SIGNED_HEAD);
  tagOf(key, subject, out.subarray(at)).copy(out, 1, 0, TAG_BYTES);
  return out;
}

/** Why a frame received on a node with a secret is refused (the `reason` label of adapter_frames_rejected_total). */
export type Rejected = 'unsigned' | 'bad_signature';

/** The frame inside a signed frame, unchecked (its first bytes say whose publish it is). */
export function signedBody(buf: Uint8Array): Uint8Array {
  return buf.subarray(SIGNED_HEAD);
}

/** The frame inside a signed frame whose tag is right for `subject`, with its stamp; or why it is refused. */
export function openFrame(key: KeyObject, subject: string, buf: Uint8Array): { frame: Uint8Array; stamp: Stamp } | Rejected {
  if (buf.length < SIGNED_HEAD || buf[0] !== Kind.Signed) return 'unsigned';
  const at = 1 + TAG_BYTES;
  const tag = tagOf(key, subject, buf.subarray(at));
  if (!timingSafeEqual(tag.subarray(0, TAG_BYTES), buf.subarray(1, at))) return 'bad_signature';
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.length);
  return { frame: signedBody(buf), stamp: { sender: b.toString('hex', at, at + 8), ms: b.readDoubleBE(at + 8), seq: b.readDoubleBE(at + 16) } };
}

/** Whether `buf` is a signed frame (a node without a secret refuses it: it cannot be read). */
export function isSigned(buf: Uint8Array): boolean {
  return buf.length >= SIGNED_HEAD && buf[0] === Kind.Signed;
}
