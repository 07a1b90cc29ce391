/**
 * The signed-request check for the query layout every Pusher SDK sends, done on bytes:
 *
 *   auth_key=K&auth_timestamp=T&auth_version=1.0[&body_md5=M][&other=v...]&auth_signature=S
 *
 * keys lowercase, sorted, each once, nothing percent-encoded, auth_signature last. The
 * string to sign is then METHOD\nPATH\n followed by the query up to "&auth_signature" as
 * it came. So METHOD\nPATH\n and the query are written once into one buffer; the query's
 * fields are read from those bytes, the HMAC runs over a prefix of them, and both digests
 * are compared with the hex where it lies. No string is sliced or built per parameter
 * (each cost a megamorphic property load or two; docs/benchmarks.md has the numbers).
 *
 * An accelerator, not a second rule set: it answers "valid, signed with this key" or null
 * ("not decided here"), and on null the general check (api-auth.ts) decides and words the
 * error. It declines anything unusual — another layout, a bad or missing field, a long
 * input (a request line over 4,096 characters), a signature that does not match — and
 * must never accept a request the general check refuses: the differential fuzz test
 * (test/fuzz/api-auth.fuzz.test.ts) sends random layouts and mutations of SDK requests
 * through both and fails if it does. Kept with that test because it pays: without it the
 * routes spend 1.23× the CPU per signed publish (in-process bench, 8.9 vs 6.7 µs;
 * docs/benchmarks.md, "Crypto from a library").
 */
import { hmacSha256BytesMatch, md5BytesMatch } from './hmac';

export interface FastVerified {
  authKey: string;
  /** The parameters other than auth_* and body_md5. */
  params: ReadonlyMap<string, string>;
  /** With no body given (checked before it is read): the query's body_md5, undefined when absent. */
  bodyMd5?: string;
}

const NO_PARAMS: ReadonlyMap<string, string> = new Map();
/** METHOD\nPATH\nQUERY as UTF-8 (one request at a time per thread). */
let buf = Buffer.allocUnsafe(1024);
/** Longest METHOD\nPATH\nQUERY taken here, in UTF-16 code units (≤ 3 bytes each). */
const MAX_CHARS = 4096;

const AMP = 0x26;
const EQ = 0x3d;
const key = (s: string) => Buffer.from(s, 'latin1');
const AUTH_KEY = key('auth_key');
const AUTH_TIMESTAMP = key('auth_timestamp');
const AUTH_VERSION = key('auth_version');
const AUTH_SIGNATURE = key('auth_signature');
const BODY_MD5 = key('body_md5');

/** Whether buf[at, at+len) spells `name`. */
function is(at: number, len: number, name: Buffer): boolean {
  if (len !== name.length) return false;
  for (let i = 0; i < len; i++) if (buf[at + i] !== name[i]) return false;
  return true;
}

/** Byte order of buf[a, a+aLen) against buf[b, b+bLen): <0, 0, >0 (code-unit order for ASCII). */
function compare(a: number, aLen: number, b: number, bLen: number): number {
  const n = Math.min(aLen, bLen);
  for (let i = 0; i < n; i++) {
    const d = buf[a + i] - buf[b + i];
    if (d !== 0) return d;
  }
  return aLen - bLen;
}

/** The number spelled by 1 to 15 ASCII digits at buf[at, at+len), or -1. */
function digits(at: number, len: number): number {
  if (len < 1 || len > 15) return -1;
  let v = 0;
  for (let i = at; i < at + len; i++) {
    const d = buf[i] - 0x30;
    if (d < 0 || d > 9) return -1;
    v = v * 10 + d;
  }
  return v;
}

/** `body` null: the body is not read yet; body_md5 is returned, not checked (http/router.ts checks it once read). */
export function verifySdkLayout(
  method: string, path: string, query: string, body: Buffer | null, nowSeconds: number, toleranceS: number,
  lookupSecret: (authKey: string) => string | null,
): FastVerified | null {
  if (method.length + path.length + query.length + 2 > MAX_CHARS) return null;
  if (query.indexOf('%') !== -1 || query.indexOf('+') !== -1) return null; // decoded by the general check
  const need = 3 * (method.length + path.length + query.length + 2);
  if (need > buf.length) buf = Buffer.allocUnsafe(need);
  const b = buf;
  const upper = method === 'POST' || method === 'GET' ? method : method.toUpperCase();
  const qStart = b.write(upper + '\n' + path + '\n', 0, 'utf8');
  const end = qStart + b.write(query, qStart, 'utf8');
  if (end - qStart !== query.length) return null; // not all ASCII

  let keyAt = -1, keyLen = 0, tsAt = -1, tsLen = 0, versionAt = -1, versionLen = 0, md5At = -1, md5Len = 0;
  let rest: Map<string, string> | null = null;
  let prevAt = -1, prevLen = 0;
  let at = qStart;
  for (;;) {
    let eq = at;
    for (; eq < end; eq++) {
      const c = b[eq];
      if (c === EQ || c === AMP) break;
      if (c >= 0x41 && c <= 0x5a) return null; // a capital in a key: lowercased by the general check
    }
    if (eq === at || eq === end || b[eq] !== EQ) return null; // an empty key, or a pair without '='
    let i = eq + 1;
    while (i < end && b[i] !== AMP) i++;
    const len = eq - at;
    const valueAt = eq + 1;
    const valueLen = i - valueAt;
    if (is(at, len, AUTH_SIGNATURE)) {
      if (i !== end || valueLen === 0) return null;
      const signedLen = at === qStart ? qStart : at - 1; // up to the '&' before it
      if (keyAt === -1 || keyLen === 0 || tsAt === -1 || versionAt === -1) return null;
      const ts = digits(tsAt, tsLen);
      if (ts === -1 || Math.abs(nowSeconds - ts) > toleranceS) return null;
      if (versionLen !== 3 || b[versionAt] !== 0x31 || b[versionAt + 1] !== 0x2e || b[versionAt + 2] !== 0x30) return null; // "1.0"
      const authKey = b.toString('latin1', keyAt, keyAt + keyLen);
      const secret = lookupSecret(authKey);
      if (secret === null) return null;
      if (body !== null && (md5At === -1 ? body.length > 0 : !md5BytesMatch(body, b, md5At, md5Len))) return null;
      if (!hmacSha256BytesMatch(secret, b, signedLen, b, valueAt, valueLen)) return null;
      if (body === null) return { authKey, params: rest ?? NO_PARAMS, bodyMd5: md5At === -1 ? undefined : b.toString('latin1', md5At, md5At + md5Len) };
      return { authKey, params: rest ?? NO_PARAMS };
    }
    if (prevAt !== -1 && compare(prevAt, prevLen, at, len) >= 0) return null; // out of order, or a repeat
    prevAt = at;
    prevLen = len;
    if (is(at, len, AUTH_KEY)) {
      keyAt = valueAt;
      keyLen = valueLen;
    } else if (is(at, len, AUTH_TIMESTAMP)) {
      tsAt = valueAt;
      tsLen = valueLen;
    } else if (is(at, len, AUTH_VERSION)) {
      versionAt = valueAt;
      versionLen = valueLen;
    } else if (is(at, len, BODY_MD5)) {
      md5At = valueAt;
      md5Len = valueLen;
    } else {
      (rest ??= new Map()).set(b.toString('latin1', at, eq), b.toString('latin1', valueAt, i));
    }
    if (i === end) return null; // auth_signature is not last (or absent: the Authorization header form)
    at = i + 1;
  }
}
