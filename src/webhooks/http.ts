// HTTP(S) POST of a webhook request with node:http / node:https and keep-alive agents
// (at most `concurrency` sockets per endpoint). Not fetch: on the many-channels benchmark
// (3,000 connections × 2 channels, every event type unbatched, 2 cores) fetch's per-request
// overhead on the primary halved the shards' throughput; see the commit message for numbers.
// The timeout covers the whole request (connect, send, answer), not socket idleness.

import http from 'node:http';
import https from 'node:https';

export class TimeoutError extends Error {
  override readonly name = 'TimeoutError';
}

export interface HttpPoster {
  /** Resolves with the answer's status (its body is read and dropped); rejects on network errors and timeouts. */
  post(url: string, headers: Record<string, string>, body: string): Promise<number>;
  close(): void;
}

export function createHttpPoster(opts: { timeoutMs: number; concurrency: number }): HttpPoster {
  const agentOpts = { keepAlive: true, maxSockets: opts.concurrency, maxFreeSockets: opts.concurrency, scheduling: 'lifo' as const };
  const agents = { http: new http.Agent(agentOpts), https: new https.Agent(agentOpts) };
  const urls = new Map<string, URL>();
  const parse = (u: string): URL => {
    let p = urls.get(u);
    if (!p) urls.set(u, (p = new URL(u)));
    return p;
  };
  return {
    post(url, headers, body) {
      const u = parse(url);
      const secure = u.protocol === 'https:';
      return new Promise<number>((resolve, reject) => {
        const req = (secure ? https : http).request(u, {
          method: 'POST',
          agent: secure ? agents.https : agents.http,
          headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        }, (res) => {
          res.resume(); // the body is not used; reading it frees the socket for keep-alive
          res.on('end', () => {
            clearTimeout(timer);
            resolve(res.statusCode ?? 0);
          });
          res.on('error', (err) => {
            clearTimeout(timer);
            reject(err);
          });
        });
        const timer = setTimeout(() => req.destroy(new TimeoutError(`no answer within ${opts.timeoutMs} ms`)), opts.timeoutMs);
        req.on('error', (err) => {
          clearTimeout(timer);
          reject(err);
        });
        req.end(body);
      });
    },
    close() {
      agents.http.destroy();
      agents.https.destroy();
    },
  };
}
