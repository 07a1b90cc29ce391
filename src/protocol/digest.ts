/**
 * SHA-256 (FIPS 180-4) and MD5 (RFC 1321) in plain JavaScript, for the short inputs of the
 * API's per-request checks (a ~150-byte string to sign, a body of a few hundred bytes).
 *
 * Why not node:crypto for those: each call into it costs about a microsecond of binding
 * work and a fresh native Buffer for the digest (malloc, backing-store registry, sweeper),
 * more than the hashing itself; a signed publish needs three digests. Here a digest is
 * written into a caller's Int32Array and nothing is allocated. HMAC keys are prepared
 * once: the states after the (K ⊕ ipad) and (K ⊕ opad) blocks, so an HMAC of a short
 * message costs the compression of its own blocks plus one (RFC 2104 §4 notes this),
 * less its first block when that repeats the key's previous message (HmacKey).
 * Long inputs go to node:crypto (hmac.ts picks; docs/performance.md has the numbers).
 *
 * Checked against node:crypto on random inputs of every length around block boundaries
 * (test/protocol/digest.test.ts). No branch or index depends on a secret or a digest.
 */

const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const SHA256_IV = new Int32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
const W = new Int32Array(64);

/** One SHA-256 compression of the 64 bytes at buf[off] into `st`. */
function sha256Block(st: Int32Array, buf: Uint8Array, off: number): void {
  for (let i = 0; i < 16; i++) {
    const j = off + (i << 2);
    W[i] = (buf[j] << 24) | (buf[j + 1] << 16) | (buf[j + 2] << 8) | buf[j + 3];
  }
  for (let i = 16; i < 64; i++) {
    const x = W[i - 15];
    const y = W[i - 2];
    const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
    const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
    W[i] = (W[i - 16] + s0 + W[i - 7] + s1) | 0;
  }
  let a = st[0], b = st[1], c = st[2], d = st[3], e = st[4], f = st[5], g = st[6], h = st[7];
  // Four rounds per pass, each writing the variable the next would have shifted in; after
  // four the names have moved by four places, which the swap at the end undoes.
  for (let i = 0; i < 64; i += 4) {
    h = (h + (((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7))) + (g ^ (e & (f ^ g))) + K[i] + W[i]) | 0;
    d = (d + h) | 0;
    h = (h + (((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10))) + ((a & b) | (c & (a | b)))) | 0;
    g = (g + (((d >>> 6) | (d << 26)) ^ ((d >>> 11) | (d << 21)) ^ ((d >>> 25) | (d << 7))) + (f ^ (d & (e ^ f))) + K[i + 1] + W[i + 1]) | 0;
    c = (c + g) | 0;
    g = (g + (((h >>> 2) | (h << 30)) ^ ((h >>> 13) | (h << 19)) ^ ((h >>> 22) | (h << 10))) + ((h & a) | (b & (h | a)))) | 0;
    f = (f + (((c >>> 6) | (c << 26)) ^ ((c >>> 11) | (c << 21)) ^ ((c >>> 25) | (c << 7))) + (e ^ (c & (d ^ e))) + K[i + 2] + W[i + 2]) | 0;
    b = (b + f) | 0;
    f = (f + (((g >>> 2) | (g << 30)) ^ ((g >>> 13) | (g << 19)) ^ ((g >>> 22) | (g << 10))) + ((g & h) | (a & (g | h)))) | 0;
    e = (e + (((b >>> 6) | (b << 26)) ^ ((b >>> 11) | (b << 21)) ^ ((b >>> 25) | (b << 7))) + (d ^ (b & (c ^ d))) + K[i + 3] + W[i + 3]) | 0;
    a = (a + e) | 0;
    e = (e + (((f >>> 2) | (f << 30)) ^ ((f >>> 13) | (f << 19)) ^ ((f >>> 22) | (f << 10))) + ((f & g) | (h & (f | g)))) | 0;
    const t0 = a, t1 = b, t2 = c, t3 = d;
    a = e; b = f; c = g; d = h; e = t0; f = t1; g = t2; h = t3;
  }
  st[0] = (st[0] + a) | 0; st[1] = (st[1] + b) | 0; st[2] = (st[2] + c) | 0; st[3] = (st[3] + d) | 0;
  st[4] = (st[4] + e) | 0; st[5] = (st[5] + f) | 0; st[6] = (st[6] + g) | 0; st[7] = (st[7] + h) | 0;
}

/** The last one or two blocks: buf[off, off+n) (n < 64), 0x80, zeros, the length in bits. */
const tail = new Uint8Array(128);

/**
 * Pads and compresses the final bytes. `total` is the whole message's length in bytes
 * (what came before included); `bigEndian` says how the bit length is written (SHA-256:
 * big-endian, MD5: little-endian).
 */
function finish(st: Int32Array, buf: Uint8Array, off: number, n: number, total: number, bigEndian: boolean,
  block: (st: Int32Array, buf: Uint8Array, off: number) => void): void {
  for (let i = 0; i < n; i++) tail[i] = buf[off + i];
  tail[n] = 0x80;
  tail.fill(0, n + 1);
  const end = n + 9 > 64 ? 128 : 64;
  const lo = (total * 8) >>> 0;
  const hi = Math.floor(total / 0x20000000) >>> 0; // total * 8 / 2^32
  for (let i = 0; i < 4; i++) {
    if (bigEndian) {
      tail[end - 1 - i] = lo >>> (8 * i);
      tail[end - 5 - i] = hi >>> (8 * i);
    } else {
      tail[end - 8 + i] = lo >>> (8 * i);
      tail[end - 4 + i] = hi >>> (8 * i);
    }
  }
  block(st, tail, 0);
  if (end === 128) block(st, tail, 64);
}

/**
 * SHA-256 of data[start, len) continued from `st` (IV or a prepared HMAC state), with
 * `prefix` + `start` bytes already in it.
 */
function sha256Continue(st: Int32Array, data: Uint8Array, start: number, len: number, prefix: number): void {
  const full = start + ((len - start) & ~63);
  for (let off = start; off < full; off += 64) sha256Block(st, data, off);
  finish(st, data, full, len - full, prefix + len, true, sha256Block);
}

/** SHA-256 of data[0, len) into `out` (8 words, big-endian digest order). */
export function sha256Into(data: Uint8Array, len: number, out: Int32Array): void {
  out.set(SHA256_IV);
  sha256Continue(out, data, 0, len, 0);
}

/**
 * A key prepared for HMAC-SHA256: the states after its inner and outer pad blocks, and
 * the inner state after the first 64 bytes of the last message it signed. A signed API
 * request's string to sign starts with the same 64 bytes for a given app and path
 * ("POST\n/apps/ID/events\nauth_key=KEY&auth_timestamp=" and the timestamp's leading
 * digits), so that block is usually hashed already: one SHA-256 block of four saved.
 */
export interface HmacKey {
  readonly inner: Int32Array;
  readonly outer: Int32Array;
  readonly lastBlock: Uint8Array;
  readonly lastState: Int32Array;
  lastValid: boolean;
}

/** `key` is the raw key; a key longer than 64 bytes must be hashed first (RFC 2104), by the caller. */
export function hmacKey(key: Uint8Array): HmacKey {
  if (key.length > 64) throw new RangeError('an HMAC-SHA256 key longer than 64 bytes must be hashed first');
  const ipad = new Uint8Array(64).fill(0x36);
  const opad = new Uint8Array(64).fill(0x5c);
  for (let i = 0; i < key.length; i++) {
    ipad[i] ^= key[i];
    opad[i] ^= key[i];
  }
  const inner = new Int32Array(SHA256_IV);
  const outer = new Int32Array(SHA256_IV);
  sha256Block(inner, ipad, 0);
  sha256Block(outer, opad, 0);
  return { inner, outer, lastBlock: new Uint8Array(64), lastState: new Int32Array(8), lastValid: false };
}

const innerDigest = new Uint8Array(32);

/** Whether data[0, 64) equals the key's remembered first block. */
function sameFirstBlock(key: HmacKey, data: Uint8Array): boolean {
  if (!key.lastValid) return false;
  const last = key.lastBlock;
  for (let i = 0; i < 64; i++) if (last[i] !== data[i]) return false;
  return true;
}

/** HMAC-SHA256 of data[0, len) into `out` (8 words). */
export function hmacSha256Into(key: HmacKey, data: Uint8Array, len: number, out: Int32Array): void {
  let start = 0;
  if (len >= 64) {
    if (sameFirstBlock(key, data)) {
      out.set(key.lastState);
    } else {
      out.set(key.inner);
      sha256Block(out, data, 0);
      for (let i = 0; i < 64; i++) key.lastBlock[i] = data[i];
      key.lastState.set(out);
      key.lastValid = true;
    }
    start = 64;
  } else {
    out.set(key.inner);
  }
  sha256Continue(out, data, start, len, 64);
  for (let i = 0; i < 8; i++) {
    const w = out[i];
    innerDigest[4 * i] = w >>> 24;
    innerDigest[4 * i + 1] = w >>> 16;
    innerDigest[4 * i + 2] = w >>> 8;
    innerDigest[4 * i + 3] = w;
  }
  out.set(key.outer);
  finish(out, innerDigest, 0, 32, 64 + 32, true, sha256Block);
}

// MD5: the sine constants (RFC 1321 §3.4); the shifts are written out in md5Block.
const T = new Int32Array(64);
for (let i = 0; i < 64; i++) T[i] = Math.floor(Math.abs(Math.sin(i + 1)) * 0x100000000) | 0;
const MD5_IV = new Int32Array([0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476]);
const M = new Int32Array(16);

function md5Block(st: Int32Array, buf: Uint8Array, off: number): void {
  for (let i = 0; i < 16; i++) {
    const j = off + (i << 2);
    M[i] = buf[j] | (buf[j + 1] << 8) | (buf[j + 2] << 16) | (buf[j + 3] << 24);
  }
  let a = st[0], b = st[1], c = st[2], d = st[3], x = 0;
  // The four rounds of sixteen steps, four steps per pass with their shifts written out;
  // each step adds into one variable and the roles of a, b, c, d move on by one.
  for (let i = 0; i < 16; i += 4) {
    x = (a + (d ^ (b & (c ^ d))) + T[i] + M[i]) | 0; a = (b + ((x << 7) | (x >>> 25))) | 0;
    x = (d + (c ^ (a & (b ^ c))) + T[i + 1] + M[i + 1]) | 0; d = (a + ((x << 12) | (x >>> 20))) | 0;
    x = (c + (b ^ (d & (a ^ b))) + T[i + 2] + M[i + 2]) | 0; c = (d + ((x << 17) | (x >>> 15))) | 0;
    x = (b + (a ^ (c & (d ^ a))) + T[i + 3] + M[i + 3]) | 0; b = (c + ((x << 22) | (x >>> 10))) | 0;
  }
  for (let i = 16; i < 32; i += 4) {
    x = (a + (c ^ (d & (b ^ c))) + T[i] + M[(5 * i + 1) & 15]) | 0; a = (b + ((x << 5) | (x >>> 27))) | 0;
    x = (d + (b ^ (c & (a ^ b))) + T[i + 1] + M[(5 * i + 6) & 15]) | 0; d = (a + ((x << 9) | (x >>> 23))) | 0;
    x = (c + (a ^ (b & (d ^ a))) + T[i + 2] + M[(5 * i + 11) & 15]) | 0; c = (d + ((x << 14) | (x >>> 18))) | 0;
    x = (b + (d ^ (a & (c ^ d))) + T[i + 3] + M[(5 * i) & 15]) | 0; b = (c + ((x << 20) | (x >>> 12))) | 0;
  }
  for (let i = 32; i < 48; i += 4) {
    x = (a + (b ^ c ^ d) + T[i] + M[(3 * i + 5) & 15]) | 0; a = (b + ((x << 4) | (x >>> 28))) | 0;
    x = (d + (a ^ b ^ c) + T[i + 1] + M[(3 * i + 8) & 15]) | 0; d = (a + ((x << 11) | (x >>> 21))) | 0;
    x = (c + (d ^ a ^ b) + T[i + 2] + M[(3 * i + 11) & 15]) | 0; c = (d + ((x << 16) | (x >>> 16))) | 0;
    x = (b + (c ^ d ^ a) + T[i + 3] + M[(3 * i + 14) & 15]) | 0; b = (c + ((x << 23) | (x >>> 9))) | 0;
  }
  for (let i = 48; i < 64; i += 4) {
    x = (a + (c ^ (b | ~d)) + T[i] + M[(7 * i) & 15]) | 0; a = (b + ((x << 6) | (x >>> 26))) | 0;
    x = (d + (b ^ (a | ~c)) + T[i + 1] + M[(7 * i + 7) & 15]) | 0; d = (a + ((x << 10) | (x >>> 22))) | 0;
    x = (c + (a ^ (d | ~b)) + T[i + 2] + M[(7 * i + 14) & 15]) | 0; c = (d + ((x << 15) | (x >>> 17))) | 0;
    x = (b + (d ^ (c | ~a)) + T[i + 3] + M[(7 * i + 21) & 15]) | 0; b = (c + ((x << 21) | (x >>> 11))) | 0;
  }
  st[0] = (st[0] + a) | 0; st[1] = (st[1] + b) | 0; st[2] = (st[2] + c) | 0; st[3] = (st[3] + d) | 0;
}

/** MD5 of data[0, len) into `out` (4 words; the digest's bytes are each word little-endian). */
export function md5Into(data: Uint8Array, len: number, out: Int32Array): void {
  out.set(MD5_IV);
  const full = len & ~63;
  for (let off = 0; off < full; off += 64) md5Block(out, data, off);
  finish(out, data, full, len - full, len, false, md5Block);
}

const HEX_ONLY = /^[0-9A-Fa-f]*$/;
/** Hex given as a string, as bytes (digests are at most 32 bytes: 64 hex digits). */
const hexBytes = Buffer.alloc(64);

/**
 * Whether `hex` (either case) spells the digest in `words` exactly; the digest is compared
 * in constant time. `bigEndian`: SHA-256's byte order; MD5's is little-endian. The regular
 * expression looks at the characters (it stops at the first that is not a hex digit: that
 * says nothing about the digest), so the latin1 write that follows copies them exactly;
 * both run as native code. Reading the characters in JavaScript cost a megamorphic
 * property load per character, as the strings given arrive in several representations.
 */
export function hexMatches(hex: string, words: Int32Array, bigEndian: boolean): boolean {
  if (hex.length !== 8 * words.length || hex.length > hexBytes.length || !HEX_ONLY.test(hex)) return false;
  hexBytes.write(hex, 0, 'latin1');
  return hexBytesMatch(hexBytes, 0, hex.length, words, bigEndian);
}

/**
 * hexMatches for a digest given as bytes. Not Buffer.from(hex, 'hex') alone, which reads
 * only the low byte of each character and stops quietly at a bad pair.
 */
export function hexMatchesBytes(hex: string, digest: Uint8Array): boolean {
  if (hex.length !== 2 * digest.length || hex.length > hexBytes.length || !HEX_ONLY.test(hex)) return false;
  hexBytes.write(hex, 0, digest.length, 'hex');
  let diff = 0;
  for (let i = 0; i < digest.length; i++) diff |= hexBytes[i] ^ digest[i];
  return diff === 0;
}

/** Hex digit values by byte; -1: not a hex digit (all bytes past ASCII too). */
const HEX_VALUE = new Int8Array(256).fill(-1);
for (let i = 0; i < 10; i++) HEX_VALUE[48 + i] = i;
for (let i = 0; i < 6; i++) HEX_VALUE[65 + i] = HEX_VALUE[97 + i] = 10 + i;

/**
 * hexMatches for hex given as bytes: src[off, off+len) (ASCII hex digits, either case).
 * Every byte is looked at whatever differs (constant time for a given length).
 */
export function hexBytesMatch(src: Uint8Array, off: number, len: number, words: Int32Array, bigEndian: boolean): boolean {
  if (len !== 8 * words.length || off + len > src.length) return false;
  let diff = 0;
  for (let i = 0; i < words.length; i++) {
    const w = words[i];
    for (let j = 0; j < 4; j++) {
      const byte = (bigEndian ? w >>> (24 - 8 * j) : w >>> (8 * j)) & 0xff;
      const p = off + 8 * i + 2 * j;
      const hi = HEX_VALUE[src[p]];
      const lo = HEX_VALUE[src[p + 1]];
      diff |= (((hi << 4) | lo) ^ byte) | ((hi | lo) & 0x100); // a -1 has bit 8 set
    }
  }
  return diff === 0;
}

const HEX_BYTE: string[] = [];
for (let i = 0; i < 256; i++) HEX_BYTE.push((i < 16 ? '0' : '') + i.toString(16));

/** Lowercase hex of the digest in `words`. */
export function wordsToHex(words: Int32Array, bigEndian: boolean): string {
  let s = '';
  for (let i = 0; i < words.length; i++) {
    const w = words[i];
    for (let j = 0; j < 4; j++) s += HEX_BYTE[(bigEndian ? w >>> (24 - 8 * j) : w >>> (8 * j)) & 0xff];
  }
  return s;
}
