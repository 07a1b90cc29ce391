/**
 * Signatures: lowercase hex HMAC-SHA256 keyed with the app secret (Pusher's scheme), and
 * the body's MD5 (body_md5). Verified against Pusher's published vectors, RFC 4231 / RFC
 * 1321 known answers and the `pusher` SDK in test/protocol/hmac.test.ts.
 *
 * Digests come from node:crypto (OpenSSL) as one-shot `crypto.hash` calls with a string
 * output: no Hash or Hmac object and no Buffer per digest. A Buffer output costs a native
 * backing store per call (~0.45 µs more per digest than a string, measured on this
 * project's machine); 'binary' gives the digest as a latin1 string, one character per
 * byte, which hex.ts compares with the hex a request carries. HMAC is H((K ⊕ opad) ‖
 * H((K ⊕ ipad) ‖ m)) (RFC 2104) over pads made once per secret: two one-shots instead of
 * an Hmac object. This replaced hand-written JavaScript SHA-256/HMAC/MD5:
 * the same CPU per signed publish in process, within 10 % through the real server; an
 * Hmac object per digest and @noble/hashes cost 1.3–1.6× (docs/benchmarks.md, "Crypto
 * from a library"; bench/protocol/, bench/http/).
 */
import crypto, { createHash, type BinaryLike } from 'node:crypto';
import { hexBytesMatch, hexMatches } from './hex';

type Encoding = 'binary' | 'hex';
/** crypto.hash (Node ≥ 20.12, 21.7); createHash on older Node 20 releases. */
const oneShot: (algorithm: 'sha256' | 'md5', data: BinaryLike, encoding: Encoding) => string =
  typeof (crypto as { hash?: unknown }).hash === 'function'
    ? crypto.hash
    : (algorithm, data, encoding) => createHash(algorithm).update(data).digest(encoding);

/** Per secret, made once: the key padded to a block, XORed with ipad and with opad. */
interface Pads { ipad: Buffer; opad: Buffer }
const prepared = new Map<string, Pads>();
/** Secrets are per app (config), so this stays small; a bound all the same. */
const MAX_PREPARED = 4096;
/** `ipad ‖ m`: m is written after the first 64 bytes (a thread runs one digest at a time). */
let scratch = Buffer.allocUnsafe(64 + 1024);
/** `opad ‖ H(ipad ‖ m)` */
const outer = Buffer.allocUnsafe(64 + 32);

function pads(secret: string): Pads {
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
    p = { ipad, opad };
    prepared.set(secret, p);
  }
  return p;
}

/** Room for a message of `bytes` after the pad block. */
function reserve(bytes: number): Buffer {
  if (64 + bytes > scratch.length) scratch = Buffer.allocUnsafe(Math.max(64 + bytes, 2 * scratch.length));
  return scratch;
}

/** HMAC-SHA256 of the `len` bytes at scratch[64]. */
function hmacOfScratch(secret: string, len: number, encoding: Encoding): string {
  const p = pads(secret);
  scratch.set(p.ipad, 0);
  outer.set(p.opad, 0);
  outer.write(oneShot('sha256', scratch.subarray(0, 64 + len), 'binary'), 64, 'latin1');
  return oneShot('sha256', outer, encoding);
}

/** HMAC-SHA256 of `data` (UTF-8) in `encoding`. */
function hmac(secret: string, data: string, encoding: Encoding): string {
  // A UTF-16 code unit is at most 3 UTF-8 bytes.
  const n = reserve(3 * data.length).write(data, 64, 'utf8');
  return hmacOfScratch(secret, n, encoding);
}

export function hmacSha256Hex(secret: string, data: string): string {
  return hmac(secret, data, 'hex');
}

/** Whether `hex` (either case) is the HMAC-SHA256 of `data`, compared in constant time. */
export function hmacSha256Matches(secret: string, data: string, hex: string): boolean {
  return hexMatches(hex, hmac(secret, data, 'binary'));
}

/**
 * For inputs already in bytes (api-auth-fast.ts): whether the ASCII hex at hex[off,
 * off+hexLen) is the HMAC-SHA256 of data[0, len).
 */
export function hmacSha256BytesMatch(secret: string, data: Buffer, len: number, hex: Uint8Array, off: number, hexLen: number): boolean {
  data.copy(reserve(len), 64, 0, len);
  return hexBytesMatch(hex, off, hexLen, hmacOfScratch(secret, len, 'binary'));
}

/** Whether the ASCII hex at hex[off, off+hexLen) is the MD5 of `data`. */
export function md5BytesMatch(data: Uint8Array, hex: Uint8Array, off: number, hexLen: number): boolean {
  return hexBytesMatch(hex, off, hexLen, oneShot('md5', data, 'binary'));
}

export function md5Hex(data: string | Buffer): string {
  return oneShot('md5', data, 'hex');
}

/** Whether `hex` (either case) is the MD5 of `data`, compared in constant time. */
export function md5Matches(data: Buffer, hex: string): boolean {
  return hexMatches(hex, oneShot('md5', data, 'binary'));
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
