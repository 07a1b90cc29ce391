/**
 * Verification of signed HTTP API requests (Pusher's scheme), pure: no I/O, no clock.
 *
 *   string to sign = METHOD "\n" PATH "\n" QUERY
 *   QUERY          = every query parameter except auth_signature, keys lowercased,
 *                    sorted (code-unit order, as the SDKs sort), "k=v" joined by "&",
 *                    values as decoded (URLSearchParams) — the SDKs sign raw values.
 *   auth_signature = lowercase hex HMAC-SHA256(secret, string to sign)
 *
 * Decisions:
 * - `Authorization: <key>:<signature>` is used only when the query has no auth_signature;
 *   then auth_key may be absent from the query (if present it must equal the header key).
 * - A repeated parameter (after lowercasing) is refused with 400: the signature would be
 *   ambiguous.
 * - PATH is signed as given; if it is percent-encoded, a signature over its decoded
 *   form is accepted too (clients differ on '#' and the like in channel paths).
 * - body_md5, when present, must match even for an empty body; required when non-empty.
 * - Error messages may show the string to sign (Pusher does); never the secret.
 */
import { verifySdkLayout } from './api-auth-fast';
import { hmacSha256Hex, hmacSha256Matches, md5Hex, md5Matches } from './hmac';

export interface SignedRequest {
  method: string;
  path: string;
  /** raw query string without '?' */
  query: string;
  authorization: string | null;
  body: Buffer;
  nowSeconds: number;
}

export type ApiAuthResult =
  /** `params`: the query's parameters other than auth_* and body_md5, keys lowercased. */
  | { ok: true; authKey: string; params: ReadonlyMap<string, string> }
  | { ok: false; status: 401 | 400; error: string };

/** auth_timestamp must be within this many seconds of server time, either way. */
export const TIMESTAMP_TOLERANCE_S = 600;

const RESERVED = new Set(['auth_key', 'auth_timestamp', 'auth_version', 'auth_signature', 'body_md5']);

function fail(error: string, status: 401 | 400 = 401): { ok: false; status: 401 | 400; error: string } {
  return { ok: false, status, error };
}

/** METHOD\nPATH\nQUERY over params (keys already lowercased); auth_signature is left out. */
export function apiStringToSign(method: string, path: string, params: ReadonlyMap<string, string>): string {
  return toSign(method, path, signedQuery(params));
}

/** METHOD\nPATH\nQUERY from the QUERY part. */
function toSign(method: string, path: string, query: string): string {
  return method.toUpperCase() + '\n' + path + '\n' + query;
}

/** The QUERY part of the string to sign. */
function signedQuery(params: ReadonlyMap<string, string>): string {
  const keys: string[] = [];
  let sorted = true;
  for (const k of params.keys()) {
    if (k === 'auth_signature') continue;
    if (keys.length > 0 && keys[keys.length - 1] > k) sorted = false;
    keys.push(k);
  }
  if (!sorted) keys.sort();
  let q = '';
  for (const k of keys) q += (q === '' ? '' : '&') + k + '=' + params.get(k)!;
  return q;
}

/** What verifyApiRequest reads from the query. */
interface QueryFields {
  authKey: string | undefined;
  signature: string | undefined;
  timestamp: string | undefined;
  version: string | undefined;
  bodyMd5: string | undefined;
  /** The QUERY part of the string to sign. */
  signed: string;
  /** The other parameters. */
  rest: ReadonlyMap<string, string>;
}

/** Any layout: every pair decoded as URLSearchParams does, keys lowercased; a repeat is an error. */
function fromPairs(query: string): QueryFields | { duplicate: string } {
  const params = new Map<string, string>();
  let duplicate: string | null = null;
  forEachQueryPair(query, (k, v) => {
    const key = k.toLowerCase();
    if (params.has(key)) {
      duplicate = key;
      return false;
    }
    params.set(key, v);
    return true;
  });
  if (duplicate !== null) return { duplicate };
  const fields: QueryFields = {
    authKey: params.get('auth_key'),
    signature: params.get('auth_signature'),
    timestamp: params.get('auth_timestamp'),
    version: params.get('auth_version'),
    bodyMd5: params.get('body_md5'),
    signed: signedQuery(params),
    rest: params,
  };
  params.delete('auth_signature');
  for (const k of RESERVED) params.delete(k);
  return fields;
}

/** Parses `<key>:<signature>` (optionally with surrounding spaces); null if not that form. */
function parseAuthorizationHeader(h: string): { key: string; signature: string } | null {
  const m = /^\s*([^\s:]+):([0-9A-Fa-f]+)\s*$/.exec(h);
  return m === null ? null : { key: m[1], signature: m[2] };
}

function decodedPath(path: string): string | null {
  if (!path.includes('%')) return null;
  try {
    const d = decodeURIComponent(path);
    return d === path ? null : d;
  } catch {
    return null;
  }
}

/**
 * Calls `fn` with each pair of the query as URLSearchParams gives them, until it returns
 * false. A query without '%' and '+' (what the SDKs send: hex, digits, keys) needs no
 * decoding, so it is split by hand, which is several times cheaper and allocates only
 * the strings; anything else goes through URLSearchParams itself.
 */
export function forEachQueryPair(query: string, fn: (key: string, value: string) => boolean): void {
  if (query.includes('%') || query.includes('+')) {
    for (const [k, v] of new URLSearchParams(query)) if (!fn(k, v)) return;
    return;
  }
  let start = 0;
  while (start <= query.length) {
    let end = query.indexOf('&', start);
    if (end === -1) end = query.length;
    if (end > start) {
      const eq = query.indexOf('=', start);
      const go = eq === -1 || eq > end ? fn(query.slice(start, end), '') : fn(query.slice(start, eq), query.slice(eq + 1, end));
      if (!go) return;
    }
    start = end + 1;
  }
}

/** A signed request whose body is not read yet (http/router.ts checks the query first). */
export interface SignedQuery extends Omit<SignedRequest, 'body'> {
  /** Content-Length, null when not given (chunked). */
  bodyLength: number | null;
}

export type QueryAuthResult =
  | { ok: true; authKey: string; params: ReadonlyMap<string, string>; bodyMd5: string | undefined }
  | { ok: false; status: 401 | 400; error: string };

/**
 * Everything verifyApiRequest checks that does not need the body: key, timestamp,
 * version and the signature over the query (which commits to body_md5). A request that
 * fails here is refused before its body is read. Once read, checkBody decides the rest.
 */
export function verifyApiQuery(req: SignedQuery, lookupSecret: (authKey: string) => string | null): QueryAuthResult {
  const fast = verifySdkLayout(req.method, req.path, req.query, null, req.nowSeconds, TIMESTAMP_TOLERANCE_S, lookupSecret);
  if (fast !== null && (fast.bodyMd5 !== undefined || !((req.bodyLength ?? 0) > 0))) {
    return { ok: true, authKey: fast.authKey, params: fast.params, bodyMd5: fast.bodyMd5 };
  }
  const r = verifyCore(req, null, req.bodyLength, lookupSecret);
  return r.ok ? { ok: true, authKey: r.authKey, params: r.params, bodyMd5: r.bodyMd5 } : r;
}

/** The body against the body_md5 of a query verifyApiQuery accepted: null when it matches, else the refusal. */
export function checkBody(body: Buffer, bodyMd5: string | undefined): { ok: false; status: 401; error: string } | null {
  if (bodyMd5 === undefined) return body.length > 0 ? { ok: false, status: 401, error: MISSING_MD5 } : null;
  return md5Matches(body, bodyMd5) ? null : { ok: false, status: 401, error: 'body_md5 does not match the body' };
}

const MISSING_MD5 = 'Missing body_md5: required when the request has a body';

export function verifyApiRequest(req: SignedRequest, lookupSecret: (authKey: string) => string | null): ApiAuthResult {
  // The SDKs' layout, on bytes (api-auth-fast.ts); anything it does not accept is decided here.
  const fast = verifySdkLayout(req.method, req.path, req.query, req.body, req.nowSeconds, TIMESTAMP_TOLERANCE_S, lookupSecret);
  if (fast !== null) return { ok: true, authKey: fast.authKey, params: fast.params };
  return verifyAnyLayout(req, lookupSecret);
}

/** verifyApiRequest without the SDK-layout shortcut: any layout, and every error's wording. */
export function verifyAnyLayout(req: SignedRequest, lookupSecret: (authKey: string) => string | null): ApiAuthResult {
  const r = verifyCore(req, req.body, req.body.length, lookupSecret);
  return r.ok ? { ok: true, authKey: r.authKey, params: r.params } : r;
}

/**
 * The general check. `body` null: not read yet; then body_md5 is returned unchecked, and
 * missing only counts when `bodyLength` (Content-Length) says there is a body.
 */
function verifyCore(
  req: Omit<SignedRequest, 'body'>, body: Buffer | null, bodyLength: number | null, lookupSecret: (authKey: string) => string | null,
): QueryAuthResult {
  const parsed = fromPairs(req.query);
  if ('duplicate' in parsed) return fail(`Duplicate query parameter '${parsed.duplicate}'`, 400);

  let { authKey, signature } = parsed;
  if (signature === undefined && req.authorization !== null && req.authorization !== '') {
    const h = parseAuthorizationHeader(req.authorization);
    if (h === null) return fail('Malformed Authorization header: expected "<key>:<signature>"');
    if (authKey !== undefined && authKey !== h.key) return fail('auth_key does not match the key in the Authorization header');
    authKey = h.key;
    signature = h.signature;
  }
  if (authKey === undefined || authKey === '') return fail('Missing auth_key');
  if (signature === undefined || signature === '') return fail('Missing auth_signature');

  const ts = parsed.timestamp;
  if (ts === undefined || ts === '') return fail('Missing auth_timestamp');
  const version = parsed.version;
  if (version === undefined || version === '') return fail('Missing auth_version');
  if (version !== '1.0') return fail(`Unsupported auth_version '${version}': must be 1.0`);
  if (!/^\d{1,15}$/.test(ts)) return fail(`Invalid auth_timestamp '${ts}': must be a Unix time in seconds`);
  const drift = req.nowSeconds - Number(ts);
  if (Math.abs(drift) > TIMESTAMP_TOLERANCE_S) {
    const when = drift > 0 ? `${drift} s in the past` : `${-drift} s in the future`;
    return fail(`Timestamp expired: auth_timestamp ${ts} is ${when} (server time ${req.nowSeconds}, allowed ±${TIMESTAMP_TOLERANCE_S} s)`);
  }

  const secret = lookupSecret(authKey);
  if (secret === null) return fail('Unknown auth_key');

  const bodyMd5 = parsed.bodyMd5;
  if (bodyMd5 === undefined) {
    if (bodyLength !== null && bodyLength > 0) return fail(MISSING_MD5);
  } else if (body !== null && !md5Matches(body, bodyMd5)) {
    return fail('body_md5 does not match the body');
  }

  const signed = toSign(req.method, req.path, parsed.signed);
  if (hmacSha256Matches(secret, signed, signature)) return { ok: true, authKey, params: parsed.rest, bodyMd5 };
  const alt = decodedPath(req.path);
  if (alt !== null && hmacSha256Matches(secret, toSign(req.method, alt, parsed.signed), signature)) {
    return { ok: true, authKey, params: parsed.rest, bodyMd5 };
  }
  return fail(`Invalid signature: expected HMAC-SHA256 hex of the string to sign ${JSON.stringify(signed)}`);
}

/**
 * For tests and tools: the signed query string (values percent-encoded) for a request:
 * auth_key, auth_timestamp, auth_version, body_md5 when the body is non-empty, the extra
 * params, all sorted, then auth_signature last — the layout of the `pusher` SDK.
 */
export function signApiQuery(
  key: string, secret: string, method: string, path: string,
  params: Record<string, string>, body: string | Buffer, nowSeconds: number,
): string {
  const all = new Map<string, string>([
    ['auth_key', key],
    ['auth_timestamp', String(nowSeconds)],
    ['auth_version', '1.0'],
  ]);
  if (body.length > 0) all.set('body_md5', md5Hex(body));
  for (const [k, v] of Object.entries(params)) {
    const lk = k.toLowerCase();
    if (RESERVED.has(lk)) throw new Error(`${lk} is set by signApiQuery and cannot be passed as a parameter`);
    if (all.has(lk)) throw new Error(`duplicate parameter '${lk}'`);
    all.set(lk, v);
  }
  const signature = hmacSha256Hex(secret, apiStringToSign(method, path, all));
  const keys = [...all.keys()].sort();
  const q = keys.map((k) => encodeURIComponent(k) + '=' + encodeURIComponent(all.get(k)!)).join('&');
  return q + '&auth_signature=' + signature;
}
