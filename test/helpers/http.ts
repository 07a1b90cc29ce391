// Plain HTTP requests to the API for tests: one connection per request (agent: false,
// Connection: close), so that with several shards SO_REUSEPORT spreads them over shards.

import http from 'node:http';
import { signApiQuery } from '../../src/protocol/api-auth';

export interface RawResponse { status: number; headers: http.IncomingHttpHeaders; text: string; json: any }
export interface AppCreds { id: string; key: string; secret: string }

export function rawRequest(port: number, method: string, pathAndQuery: string, body?: string | Buffer, headers: Record<string, string> = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(body);
    const req = http.request({
      host: '127.0.0.1', port, method, path: pathAndQuery, agent: false,
      headers: {
        connection: 'close',
        ...(payload ? { 'content-type': 'application/json', 'content-length': String(payload.length) } : {}),
        ...headers,
      },
    }, (res) => {
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
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error(`${method} ${pathAndQuery} timed out`)));
    req.end(payload);
  });
}

const now = () => Math.floor(Date.now() / 1000);

/** A correctly signed GET of /apps/{id}/{what} (what: 'channels', 'channels/x', …). */
export function signedGet(port: number, app: AppCreds, what: string, params: Record<string, string> = {}, headers: Record<string, string> = {}): Promise<RawResponse> {
  const path = `/apps/${app.id}/${what}`;
  return rawRequest(port, 'GET', `${path}?${signApiQuery(app.key, app.secret, 'GET', path, params, '', now())}`, undefined, headers);
}

/** A correctly signed POST of `body` (JSON value) to /apps/{id}/{what}. */
export function signedPost(port: number, app: AppCreds, what: string, body: unknown, headers: Record<string, string> = {}): Promise<RawResponse> {
  const raw = typeof body === 'string' ? body : JSON.stringify(body);
  const path = `/apps/${app.id}/${what}`;
  return rawRequest(port, 'POST', `${path}?${signApiQuery(app.key, app.secret, 'POST', path, {}, raw, now())}`, raw, headers);
}
