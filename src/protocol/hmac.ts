/**
 * Signatures: lowercase hex HMAC-SHA256 keyed with the app secret (Pusher's scheme).
 * Verified against Pusher's published vectors and the `pusher` SDK in test/protocol/hmac.test.ts.
 */
import crypto, { createHash, timingSafeEqual } from 'node:crypto';

/**
 * One-shot digests (crypto.hash, Node ≥ 20.12) allocate no Hash object: per API request
 * that saves the objects' weak handles and much of the young-generation garbage
 * (docs/performance.md). Older Node 20 releases get createHash.
 */
type OneShot = (algorithm: string, data: string | Buffer, encoding: 'hex' | 'buffer') => string | Buffer;
const oneShot: OneShot = typeof (crypto as { hash?: unknown }).hash === 'function'
  ? (crypto as unknown as { hash: OneShot }).hash
  : (algorithm, data, encoding) => {
    const h = createHash(algorithm).update(data);
    return encoding === 'hex' ? h.digest('hex') : h.digest();
  };

/**
 * HMAC-SHA256 = H((K ⊕ opad) ‖ H((K ⊕ ipad) ‖ m)) (RFC 2104), with the padded keys
 * prepared once per secret and two one-shot hashes per message: about half the cost of
 * createHmac, which prepares the key again on every call.
 */
interface Pads { ipad: Buffer; opad: Buffer }
const pads = new Map<string, Pads>();
/** Secrets are per app (config), so this stays small; a bound all the same. */
const MAX_PADS = 4096;
/** Reused for `ipad ‖ m` and `opad ‖ inner digest` (a thread runs one HMAC at a time). */
let scratch = Buffer.allocUnsafe(64 + 1024);
const outer = Buffer.allocUnsafe(64 + 32);

function padsOf(secret: string): Pads {
  let p = pads.get(secret);
  if (p === undefined) {
    let key = Buffer.from(secret, 'utf8');
    if (key.length > 64) key = createHash('sha256').update(key).digest();
    const ipad = Buffer.alloc(64, 0x36);
    const opad = Buffer.alloc(64, 0x5c);
    for (let i = 0; i < key.length; i++) {
      ipad[i] ^= key[i];
      opad[i] ^= key[i];
    }
    if (pads.size >= MAX_PADS) pads.clear();
    p = { ipad, opad };
    pads.set(secret, p);
  }
  return p;
}

export function hmacSha256Hex(secret: string, data: string): string {
  return hmacSha256(secret, data).toString('hex');
}

/** The HMAC-SHA256 digest as bytes (32). */
export function hmacSha256(secret: string, data: string): Buffer {
  const p = padsOf(secret);
  const need = 64 + Buffer.byteLength(data, 'utf8');
  if (need > scratch.length) scratch = Buffer.allocUnsafe(Math.max(need, 2 * scratch.length));
  p.ipad.copy(scratch, 0);
  const n = scratch.write(data, 64, 'utf8');
  const inner = oneShot('sha256', scratch.subarray(0, 64 + n), 'buffer') as Buffer;
  p.opad.copy(outer, 0);
  inner.copy(outer, 64);
  return oneShot('sha256', outer, 'buffer') as Buffer;
}

export function md5Hex(data: string | Buffer): string {
  return oneShot('md5', data, 'hex') as string;
}

/** The MD5 digest as bytes (16). */
export function md5(data: string | Buffer): Buffer {
  return oneShot('md5', data, 'buffer') as Buffer;
}

/**
 * Whether `hex` (either case) spells exactly `digest`, compared in constant time. Cheaper
 * than comparing hex strings: the given signature is usually a slice of the query string,
 * and reading such strings character by character is slow.
 */
export function hexEquals(hex: string, digest: Buffer): boolean {
  if (hex.length !== 2 * digest.length) return false;
  const given = Buffer.from(hex, 'hex'); // stops at the first pair that is not hex
  return given.length === digest.length && timingSafeEqual(given, digest);
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
