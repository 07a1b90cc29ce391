/**
 * Signatures: lowercase hex HMAC-SHA256 keyed with the app secret (Pusher's scheme).
 * Verified against Pusher's published vectors and the `pusher` SDK in test/protocol/hmac.test.ts.
 */
import crypto, { createHash } from 'node:crypto';
import { hexBytesMatch, hexMatches, hexMatchesBytes, hmacKey, hmacSha256Into, md5Into, wordsToHex, type HmacKey } from './digest';

/**
 * One-shot digests (crypto.hash, Node ≥ 20.12) allocate no Hash object; older Node 20
 * releases get createHash. Used for inputs too long for the JavaScript digests below.
 */
type OneShot = (algorithm: string, data: string | Buffer, encoding: 'hex' | 'buffer') => string | Buffer;
const oneShot: OneShot = typeof (crypto as { hash?: unknown }).hash === 'function'
  ? (crypto as unknown as { hash: OneShot }).hash
  : (algorithm, data, encoding) => {
    const h = createHash(algorithm).update(data);
    return encoding === 'hex' ? h.digest('hex') : h.digest();
  };

/**
 * Up to these many bytes of input the JavaScript digests (digest.ts) are cheaper than a
 * call into node:crypto, which costs ~0.7 µs of binding work and a native Buffer per
 * digest; past them OpenSSL's per-byte speed wins (SHA-256 uses the CPU's SHA
 * instructions). Measured on this project's bench machine: docs/performance.md.
 */
export const JS_HMAC_MAX = 256;
export const JS_MD5_MAX = 512;

/**
 * HMAC-SHA256 = H((K ⊕ opad) ‖ H((K ⊕ ipad) ‖ m)) (RFC 2104). Per secret, prepared once:
 * the padded keys (for node:crypto) and the hash states after them (for digest.ts).
 */
interface Prepared { ipad: Buffer; opad: Buffer; key: HmacKey }
const prepared = new Map<string, Prepared>();
/** Secrets are per app (config), so this stays small; a bound all the same. */
const MAX_PREPARED = 4096;
/** Reused for the message's bytes and `ipad ‖ m` (a thread runs one digest at a time). */
let scratch = Buffer.allocUnsafe(64 + 1024);
const outer = Buffer.allocUnsafe(64 + 32);
const sha = new Int32Array(8);
const md = new Int32Array(4);

function prepare(secret: string): Prepared {
  let p = prepared.get(secret);
  if (p === undefined) {
    let key = Buffer.from(secret, 'utf8');
    if (key.length > 64) key = createHash('sha256').update(key).digest();
    const ipad = Buffer.alloc(64, 0x36);
    const opad = Buffer.alloc(64, 0x5c);
    for (let i = 0; i < key.length; i++) {
      ipad[i] ^= key[i];
      opad[i] ^= key[i];
    }
    if (prepared.size >= MAX_PREPARED) prepared.clear();
    p = { ipad, opad, key: hmacKey(key) };
    prepared.set(secret, p);
  }
  return p;
}

/**
 * The HMAC of `data` (UTF-8): into `sha` (returns null) when short, else as a Buffer
 * from node:crypto. `data` is written after 64 free bytes, where the node path puts ipad.
 */
function hmac(secret: string, data: string): Buffer | null {
  const p = prepare(secret);
  // A UTF-16 code unit is at most 3 UTF-8 bytes.
  if (64 + 3 * data.length > scratch.length) scratch = Buffer.allocUnsafe(Math.max(64 + 3 * data.length, 2 * scratch.length));
  const n = scratch.write(data, 64, 'utf8');
  if (n <= JS_HMAC_MAX) {
    hmacSha256Into(p.key, scratch.subarray(64), n, sha);
    return null;
  }
  p.ipad.copy(scratch, 0);
  const inner = oneShot('sha256', scratch.subarray(0, 64 + n), 'buffer') as Buffer;
  p.opad.copy(outer, 0);
  inner.copy(outer, 64);
  return oneShot('sha256', outer, 'buffer') as Buffer;
}

export function hmacSha256Hex(secret: string, data: string): string {
  const long = hmac(secret, data);
  return long === null ? wordsToHex(sha, true) : long.toString('hex');
}

/** Whether `hex` (either case) is the HMAC-SHA256 of `data`, compared in constant time. */
export function hmacSha256Matches(secret: string, data: string, hex: string): boolean {
  const long = hmac(secret, data);
  return long === null ? hexMatches(hex, sha, true) : hexMatchesBytes(hex, long);
}

/**
 * For inputs already in bytes (api-auth-fast.ts): whether the ASCII hex at hex[off,
 * off+hexLen) is the HMAC-SHA256 of data[0, len). Only for len ≤ JS_HMAC_MAX.
 */
export function hmacSha256BytesMatch(secret: string, data: Uint8Array, len: number, hex: Uint8Array, off: number, hexLen: number): boolean {
  if (len > JS_HMAC_MAX) throw new RangeError(`hmacSha256BytesMatch: ${len} bytes, more than ${JS_HMAC_MAX}`);
  hmacSha256Into(prepare(secret).key, data, len, sha);
  return hexBytesMatch(hex, off, hexLen, sha, true);
}

/** Whether the ASCII hex at hex[off, off+hexLen) is the MD5 of `data` (at most JS_MD5_MAX bytes). */
export function md5BytesMatch(data: Uint8Array, hex: Uint8Array, off: number, hexLen: number): boolean {
  if (data.length > JS_MD5_MAX) throw new RangeError(`md5BytesMatch: ${data.length} bytes, more than ${JS_MD5_MAX}`);
  md5Into(data, data.length, md);
  return hexBytesMatch(hex, off, hexLen, md, false);
}

export function md5Hex(data: string | Buffer): string {
  return oneShot('md5', data, 'hex') as string;
}

/** Whether `hex` (either case) is the MD5 of `data`, compared in constant time. */
export function md5Matches(data: Buffer, hex: string): boolean {
  if (data.length > JS_MD5_MAX) return hexMatchesBytes(hex, oneShot('md5', data, 'buffer') as Buffer);
  md5Into(data, data.length, md);
  return hexMatches(hex, md, false);
}

/**
 * Constant-time string compare: every code unit is looked at, whatever differs (leaks
 * only whether the lengths differ). Signatures are hex, so code units are bytes.
 */
export function safeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/** Channel auth value `${key}:${hmac(secret, socketId:channel[:channelData])}`. */
export function channelAuth(key: string, secret: string, socketId: string, channel: string, channelData?: string): string {
  const data = channelData === undefined ? `${socketId}:${channel}` : `${socketId}:${channel}:${channelData}`;
  return `${key}:${hmacSha256Hex(secret, data)}`;
}

/** Compares the whole `key:signature` in constant time; non-strings are refused. */
export function verifyChannelAuth(auth: unknown, key: string, secret: string, socketId: string, channel: string, channelData?: string): boolean {
  if (typeof auth !== 'string') return false;
  return safeEqual(auth, channelAuth(key, secret, socketId, channel, channelData));
}

/** pusher:signin auth value: `${key}:${hmac(secret, socketId::user::userData)}`. */
export function userAuth(key: string, secret: string, socketId: string, userData: string): string {
  return `${key}:${hmacSha256Hex(secret, `${socketId}::user::${userData}`)}`;
}

export function verifyUserAuth(auth: unknown, key: string, secret: string, socketId: string, userData: string): boolean {
  if (typeof auth !== 'string') return false;
  return safeEqual(auth, userAuth(key, secret, socketId, userData));
}

/** Webhook `X-Pusher-Signature`: hex HMAC-SHA256 of the raw body. */
export function webhookSignature(secret: string, body: string): string {
  return hmacSha256Hex(secret, body);
}
