// The uWS HTTP contract, once: copy what is needed from `req` before anything async,
// register onAborted, read the body with a size limit, cork every deferred write.

import type { HttpRequest, HttpResponse } from 'uWebSockets.js';

export interface ApiRequest {
  method: string;
  /** Raw path, as signed by clients (not decoded). */
  path: string;
  query: string;
  params: string[];
  headers: {
    authorization: string | null; origin: string | null; contentLength: number | null; forwardedFor: string | null; forwarded: string | null; connectionClose: boolean;
    /** W3C trace context (read only while tracing is on, else null). */
    traceparent?: string | null; tracestate?: string | null;
  };
  ip: string;
  body: Buffer;
}

export interface ApiResponse {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

const STATUS_TEXT: Record<number, string> = {
  200: '200 OK', 204: '204 No Content', 400: '400 Bad Request', 401: '401 Unauthorized', 403: '403 Forbidden',
  404: '404 Not Found', 405: '405 Method Not Allowed', 413: '413 Payload Too Large', 429: '429 Too Many Requests',
  500: '500 Internal Server Error', 503: '503 Service Unavailable',
};

export function statusLine(status: number): string {
  return STATUS_TEXT[status] ?? `${status} Unknown`;
}

/** The body of an accepted publish, shared: its JSON is written from bytes made once. */
export const PUBLISHED: Readonly<{ ok: true }> = Object.freeze({ ok: true });
const PUBLISHED_JSON = Buffer.from(JSON.stringify(PUBLISHED));

export function jsonError(status: number, error: string): ApiResponse {
  return { status, body: { error } };
}

const decoder = new TextDecoder();

// Header names and fixed header values handed to uWS as bytes: uWS copies every string
// argument into a freshly malloc'd UTF-8 buffer (v8::String::Utf8Value) and frees it after
// the call, while bytes are read in place. With 10,000 sockets' buffers in the heap those
// mallocs showed up in perf (docs/benchmarks.md). Names come from this code, so their
// cache stays small; values are bytes when fixed or a number met before (bounded).
const H_AUTHORIZATION = Buffer.from('authorization');
const H_ORIGIN = Buffer.from('origin');
const H_CONTENT_LENGTH = Buffer.from('content-length');
const H_FORWARDED_FOR = Buffer.from('x-forwarded-for');
const H_FORWARDED = Buffer.from('forwarded');
const H_CONNECTION = Buffer.from('connection');
const CONTENT_TYPE = Buffer.from('Content-Type');
const APPLICATION_JSON = Buffer.from('application/json');
const names = new Map<string, Buffer>();
/** The fixed values, then numbers as met (the limits, X-RateLimit-Reset, Retry-After). */
const values = new Map(['*', 'true', 'Origin'].map((v) => [v, Buffer.from(v)]));
const MAX_VALUES = 1024;
const DIGITS = /^\d{1,12}$/;

function nameBytes(name: string): Buffer | string {
  const b = names.get(name);
  if (b !== undefined) return b;
  if (names.size >= 64) return name;
  const n = Buffer.from(name, 'latin1');
  names.set(name, n);
  return n;
}

function valueBytes(value: string): Buffer | string {
  const known = values.get(value);
  if (known !== undefined) return known;
  // Numbers are kept as met, up to MAX_VALUES: the limits and the small counts repeat,
  // X-RateLimit-Remaining mostly does not (past the bound it goes as a string).
  if (values.size >= MAX_VALUES || !DIGITS.test(value)) return value;
  const b = Buffer.from(value, 'latin1');
  values.set(value, b);
  return b;
}

/** The body of a request without one (shared: nothing writes to a request body). */
const NO_BODY = Buffer.alloc(0);

/**
 * Copies the request; must be called synchronously in the route handler. The client's
 * address and X-Forwarded-For are only read when `withIp` (the per-IP limit needs them).
 * `method` is the route's (uWS routes by method).
 */
export function captureRequest(res: HttpResponse, req: HttpRequest, method: 'GET' | 'POST', paramCount: number, withIp: boolean, withTrace = false): ApiRequest {
  const params: string[] = [];
  for (let i = 0; i < paramCount; i++) params.push(req.getParameter(i) ?? '');
  const cl = method === 'POST' ? req.getHeader(H_CONTENT_LENGTH) : '';
  return {
    method,
    path: req.getUrl(),
    query: req.getQuery() ?? '',
    params,
    headers: {
      authorization: req.getHeader(H_AUTHORIZATION) || null,
      origin: req.getHeader(H_ORIGIN) || null,
      contentLength: cl === '' ? null : Number(cl),
      forwardedFor: withIp ? req.getHeader(H_FORWARDED_FOR) || null : null,
      forwarded: withIp ? req.getHeader(H_FORWARDED) || null : null,
      connectionClose: method === 'POST' && /(^|,)\s*close\s*($|,)/i.test(req.getHeader(H_CONNECTION)),
      ...(withTrace ? { traceparent: req.getHeader('traceparent') || null, tracestate: req.getHeader('tracestate') || null } : {}),
    },
    ip: withIp ? decoder.decode(res.getRemoteAddressAsText()) : '',
    body: NO_BODY,
  };
}

/** A one-chunk body is copied here (the usual case: an API request fits in one read). */
let bodyBuffer = Buffer.allocUnsafe(16 * 1024);
/** Longest body read into bodyBuffer; longer ones get a Buffer of their own. */
const MAX_BODY_BUFFER = 1024 * 1024;

/**
 * A body that arrived in one chunk, copied into a buffer reused by the next request:
 * valid during the callback that gets it only. Whoever keeps it past that (an answer that
 * has to wait) calls keepBody first (router.ts serve). Before, each body took a slice of
 * Node's Buffer pool, and a malloc'd 8 KiB pool every few dozen requests
 * (docs/benchmarks.md). null when the chunk is longer than the reused buffer may grow.
 */
export function sharedBodyCopy(chunk: ArrayBuffer): Buffer | null {
  const size = chunk.byteLength;
  if (size > MAX_BODY_BUFFER) return null;
  if (size > bodyBuffer.length) bodyBuffer = Buffer.allocUnsafe(Math.min(MAX_BODY_BUFFER, Math.max(size, 2 * bodyBuffer.length)));
  bodyBuffer.set(new Uint8Array(chunk));
  return bodyBuffer.subarray(0, size);
}

/** The request's body in memory of its own (see readBody): for an answer that has to wait. */
export function keepBody(req: ApiRequest): void {
  if (req.body.buffer === bodyBuffer.buffer) req.body = Buffer.from(req.body);
}

/**
 * Writes the answer. `inCallback`: called synchronously from a uWS route or onData
 * callback, where uWS has corked the socket already; anywhere else (after an await) the
 * writes are corked here, or each would be a send of its own.
 */
export function writeResponse(
  res: HttpResponse, r: ApiResponse, extraHeaders: Readonly<Record<string, string>>, closeConnection = false, inCallback = false,
): void {
  if (inCallback) write(res, r, extraHeaders, closeConnection);
  else res.cork(() => write(res, r, extraHeaders, closeConnection));
}

function write(res: HttpResponse, r: ApiResponse, extraHeaders: Readonly<Record<string, string>>, closeConnection: boolean): void {
  if (r.status !== 200) res.writeStatus(statusLine(r.status)); // uWS answers 200 OK by default
  for (const k in extraHeaders) res.writeHeader(nameBytes(k), valueBytes(extraHeaders[k]));
  if (r.headers) for (const k in r.headers) res.writeHeader(nameBytes(k), valueBytes(r.headers[k]));
  if (r.status === 204) {
    res.end(undefined, closeConnection);
    return;
  }
  res.writeHeader(CONTENT_TYPE, APPLICATION_JSON);
  res.end(r.body === PUBLISHED ? PUBLISHED_JSON : JSON.stringify(r.body), closeConnection);
}
