// Plain HTTP requests to the API for tests: one connection per request (agent: false,
// Connection: close), so that with several shards SO_REUSEPORT spreads them over shards.

import http from 'node:http';
import type { Test } from 'tap';
import { signApiQuery } from '../../src/protocol/api-auth';

export interface RawResponse { status: number; headers: http.IncomingHttpHeaders; text: string; json: any }
export interface AppCreds { id: string; key: string; secret: string }

/** Reads a whole answer (json: undefined when the body is not JSON). */
export function readResponse(res: http.IncomingMessage): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      let json: unknown;
      try { json = JSON.parse(text); } catch { json = undefined; }
      resolve({ status: res.statusCode!, headers: res.headers, text, json });
    });
    res.on('error', reject);
  });
}

/** Default time a request may take before it fails (timed out). */
export const REQUEST_TIMEOUT_MS = 10_000;

/** One HTTP request on its own connection; resolves with the whole answer (json: undefined when not JSON). */
export function rawRequest(port: number, method: string, pathAndQuery: string, body?: string | Buffer, headers: Record<string, string> = {}, timeoutMs = REQUEST_TIMEOUT_MS): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(body);
    const req = http.request({
      host: '127.0.0.1', port, method, path: pathAndQuery, agent: false,
      headers: {
        connection: 'close',
        ...(payload ? { 'content-type': 'application/json', 'content-length': String(payload.length) } : {}),
        ...headers,
      },
    }, (res) => readResponse(res).then(resolve, reject));
    req.on('error', reject);
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${pathAndQuery} timed out`)));
    req.end(payload);
  });
}

/** Unix time in seconds (auth_timestamp). */
export const now = (): number => Math.floor(Date.now() / 1000);

/** A correctly signed GET of /apps/{id}/{what} (what: 'channels', 'channels/x', …). */
export function signedGet(port: number, app: AppCreds, what: string, params: Record<string, string> = {}, headers: Record<string, string> = {}, timeoutMs = REQUEST_TIMEOUT_MS): Promise<RawResponse> {
  const path = `/apps/${app.id}/${what}`;
  return rawRequest(port, 'GET', `${path}?${signApiQuery(app.key, app.secret, 'GET', path, params, '', now())}`, undefined, headers, timeoutMs);
}

/** A correctly signed POST of `body` (a JSON value, or a string sent as it is) to /apps/{id}/{what}. */
export function signedPost(port: number, app: AppCreds, what: string, body: unknown, headers: Record<string, string> = {}, timeoutMs = REQUEST_TIMEOUT_MS): Promise<RawResponse> {
  const raw = typeof body === 'string' ? body : JSON.stringify(body);
  const path = `/apps/${app.id}/${what}`;
  return rawRequest(port, 'POST', `${path}?${signApiQuery(app.key, app.secret, 'POST', path, {}, raw, now())}`, raw, headers, timeoutMs);
}

/**
 * Asserts a JSON error body {"error": "<message>"} with that status, the message matching `re`
 * (five assertions; test files add their own, e.g. no stack trace).
 */
export function isJsonError(t: Test, r: RawResponse, status: number, re: RegExp, what: string): void {
  t.equal(r.status, status, `${what}: status ${status} (body ${r.text.slice(0, 300)})`);
  t.match(r.headers['content-type'], /application\/json/, `${what}: JSON content type`);
  t.same(Object.keys(r.json ?? {}), ['error'], `${what}: body is {"error": ...}`);
  t.type(r.json?.error, 'string', `${what}: error is a string`);
  t.match(r.json?.error, re, `${what}: useful message`);
}
