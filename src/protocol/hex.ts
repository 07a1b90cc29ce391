/**
 * Hex digests compared with a digest in constant time: the hex (either case) as a string
 * or as ASCII bytes where it lies in a request, the digest as a 'binary' (latin1) string,
 * one character per byte, which is how hmac.ts gets digests from node:crypto (why: there).
 * No branch or index depends on the digest or on which character differs.
 */

/** Hex digit values by byte; -1: not a hex digit (all bytes past ASCII too). */
const HEX_VALUE = new Int8Array(256).fill(-1);
for (let i = 0; i < 10; i++) HEX_VALUE[48 + i] = i;
for (let i = 0; i < 6; i++) HEX_VALUE[65 + i] = HEX_VALUE[97 + i] = 10 + i;

/** The digest of hexBytesMatch as bytes (digests here are at most 32 bytes). */
const digestBytes = Buffer.alloc(32);

/**
 * Whether src[off, off+len) is ASCII hex spelling `digest` (a 'binary' string). Every
 * byte is looked at whatever differs. The digest is first written out as bytes (one
 * native call): reading it with charCodeAt cost ~8 ns a character here, seven times the
 * byte loop (in-process bench, docs/benchmarks.md).
 */
export function hexBytesMatch(src: Uint8Array, off: number, len: number, digest: string): boolean {
  const n = digest.length;
  if (len !== 2 * n || n > digestBytes.length || off < 0 || off + len > src.length) return false;
  const d = digestBytes;
  d.write(digest, 0, n, 'latin1');
  let diff = 0;
  for (let i = 0; i < n; i++) {
    const hi = HEX_VALUE[src[off + 2 * i]];
    const lo = HEX_VALUE[src[off + 2 * i + 1]];
    diff |= (((hi << 4) | lo) ^ d[i]) | ((hi | lo) & 0x100); // a -1 has bit 8 set
  }
  return diff === 0;
}

const HEX_ONLY = /^[0-9A-Fa-f]*$/;
/** The hex of hexMatches as bytes (digests here are at most 32 bytes: 64 hex digits). */
const hexBytes = Buffer.alloc(64);

/**
 * Whether `hex` (either case) spells `digest` (a 'binary' string). The regular expression
 * looks at the characters (it stops at the first that is not a hex digit: that says
 * nothing about the digest), so the latin1 write that follows copies them exactly; both
 * run as native code. Reading the characters in JavaScript cost a megamorphic property
 * load per character, as the strings given (slices of a query) arrive in several
 * representations (docs/benchmarks.md).
 */
export function hexMatches(hex: string, digest: string): boolean {
  if (hex.length !== 2 * digest.length || hex.length > hexBytes.length || !HEX_ONLY.test(hex)) return false;
  hexBytes.write(hex, 0, 'latin1');
  return hexBytesMatch(hexBytes, 0, hex.length, digest);
}
