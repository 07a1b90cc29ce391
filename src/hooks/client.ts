// The HTTP(S) POST of one hook call, from the shard thread that needs the answer: node:http
// / node:https with keep-alive agents (one per scheme per shard), asynchronous all the way,
// so a slow backend never holds the shard's event loop. Each call has its own timeout
// (connect, send and answer together), a cap on the answer's size (read as it arrives;
// a larger answer is cut off, never buffered whole) and can be aborted (the connection
// that asked closed).

import http from 'node:http';
import https from 'node:https';
import tls from 'node:tls';

/** Why a call did not produce an answer body; the reason label of hook_failures_total. */
export type CallFailure = 'timeout' | 'network' | 'too_large' | 'aborted';

export class HookCallError extends Error {
  constructor(readonly reason: CallFailure, message: string) {
    super(message);
    this.name = 'HookCallError';
  }
}

export interface HookResponse {
  status: number;
  body: string;
}

export interface HookHttp {
  post(url: string, headers: Record<string, string>, body: string, timeoutMs: number, signal?: AbortSignal): Promise<HookResponse>;
  close(): void;
}

export interface HookHttpOptions {
  /** Largest answer body read, in bytes. */
  maxResponseBytes: number;
  /** Sockets kept per endpoint (in use and idle); calls beyond wait in the agent's queue, under their timeout. */
  maxSockets: number;
  /** Extra CA certificates (PEM) trusted for https:// endpoints, besides Node's. */
  ca?: string | null;
}

export function createHookHttp(opts: HookHttpOptions): HookHttp {
  const base = { keepAlive: true, maxSockets: opts.maxSockets, maxFreeSockets: Math.min(opts.maxSockets, 256), scheduling: 'lifo' as const };
  const agents = {
    http: new http.Agent(base),
    // Node's own roots as well as the extra CA: `ca` given to an Agent replaces them.
    https: new https.Agent(opts.ca ? { ...base, ca: [...tls.rootCertificates, opts.ca] } : base),
  };
  const urls = new Map<string, URL>();
  const parse = (u: string): URL => {
    let p = urls.get(u);
    if (!p) {
      if (urls.size > 1024) urls.clear(); // URLs come from the config: a bound all the same
      urls.set(u, (p = new URL(u)));
    }
    return p;
  };
  const max = opts.maxResponseBytes;

  return {
    post(url, headers, body, timeoutMs, signal) {
      const u = parse(url);
      const secure = u.protocol === 'https:';
      // Started from a libuv check callback, not from the uWS callback that asked: node:http
      // hands the request its socket on process.nextTick, and Node runs its nextTick queue
      // only after its own callbacks, not after uWS's. Started inline, a request waited for
      // the next Node callback of the thread (a timer): subscribe p50 32 ms instead of under
      // 1 ms at 100 subscribes/s (bench/hooks/subscribe.ts).
      return new Promise<void>((r) => setImmediate(r)).then(() => new Promise<HookResponse>((resolve, reject) => {
        let settled = false;
        const fail = (e: HookCallError) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          req.destroy();
          reject(e);
        };
        const onAbort = () => fail(new HookCallError('aborted', 'the call was cancelled'));
        const req = (secure ? https : http).request(u, {
          method: 'POST',
          agent: secure ? agents.https : agents.http,
          headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        }, (res) => {
          const declared = Number(res.headers['content-length']);
          if (declared > max) return fail(new HookCallError('too_large', `answer of more than the ${max} bytes allowed (Content-Length ${declared})`));
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            size += c.length;
            if (size > max) return fail(new HookCallError('too_large', `answer of more than the ${max} bytes allowed`));
            chunks.push(c);
          });
          res.on('end', () => {
            if (settled) return;
            settled = true;
            clearTimeout(timer);
            signal?.removeEventListener('abort', onAbort);
            resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks, size).toString('utf8') });
          });
          res.on('error', (err) => fail(new HookCallError('network', err.message)));
        });
        const timer = setTimeout(() => fail(new HookCallError('timeout', `no answer within ${timeoutMs} ms`)), timeoutMs);
        req.on('error', (err: Error & { code?: string }) => fail(new HookCallError('network', err.code ?? err.message)));
        if (signal) {
          if (signal.aborted) return onAbort();
          signal.addEventListener('abort', onAbort, { once: true });
        }
        req.end(body);
      }));
    },
    close() {
      agents.http.destroy();
      agents.https.destroy();
    },
  };
}
