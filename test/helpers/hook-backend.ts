// A real app backend for the hook tests: a node:http (or https) server on 127.0.0.1 that
// records every hook call (headers, raw body, parsed body) and answers with what `answer`
// returns for it: a JSON answer, a status, a raw body, a delay, or no answer at all.
// Also verifies each call with the `pusher` SDK's webhook() (the signature contract).

import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import Pusher from 'pusher';
import { APP } from './server';

export interface HookCall {
  headers: http.IncomingHttpHeaders;
  raw: string;
  body: {
    hook: string; app_id: string; time_ms: number; socket_id?: string; user_id?: string; channel?: string;
    channel_data?: string; event?: string; data?: unknown; connection?: { ip: string; origin: string | null; user_agent: string | null };
  };
  /** Whether the `pusher` SDK's webhook(…).isValid() accepted its key and signature. */
  valid: boolean;
  /** Set when the server gave up on the call (the request was aborted before an answer). */
  aborted: boolean;
  at: number;
}

/** What to answer: JSON (200), or {status, raw}, with an optional delay; 'hang' never answers. */
export type Answer = { allow: boolean; reason?: string; data?: unknown } | { status?: number; raw?: string; json?: unknown; delayMs?: number } | 'hang';

export interface HookBackend {
  url: string;
  calls: HookCall[];
  answer: (c: HookCall) => Answer | Promise<Answer>;
  /** Requests the backend has open now (answered ones and aborted ones are gone). */
  open(): number;
  until(pred: (calls: HookCall[]) => boolean, timeoutMs?: number, what?: string): Promise<void>;
  close(): Promise<void>;
}

export async function startHookBackend(opts: { tls?: { cert: string; key: string }; path?: string } = {}): Promise<HookBackend> {
  const verifier = new Pusher({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1' });
  const calls: HookCall[] = [];
  const waiters = new Set<() => void>();
  const openRes = new Set<http.ServerResponse>();
  const b: HookBackend = {
    url: '',
    calls,
    answer: () => ({ allow: true }),
    open: () => openRes.size,
    until(pred, timeoutMs = 10_000, what = 'hook calls') {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!pred(calls)) return;
          clearTimeout(t);
          waiters.delete(check);
          resolve();
        };
        const t = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timed out waiting for ${what}; ${calls.length} calls: ${JSON.stringify(calls.map((c) => c.body)).slice(0, 2000)}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    close: () => new Promise((resolve) => {
      for (const r of openRes) r.destroy();
      server.closeAllConnections?.();
      server.close(() => resolve());
    }),
  };
  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const valid = verifier.webhook({ headers: req.headers as Record<string, string>, rawBody: raw }).isValid();
      const call: HookCall = { headers: req.headers, raw, body: JSON.parse(raw), valid, aborted: false, at: Date.now() };
      calls.push(call);
      openRes.add(res);
      res.on('close', () => {
        if (!res.writableEnded) call.aborted = true;
        openRes.delete(res);
        for (const w of [...waiters]) w();
      });
      for (const w of [...waiters]) w();
      void Promise.resolve(b.answer(call)).then(async (a) => {
        if (a === 'hang') return;
        if ('allow' in a) return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(a));
        if (a.delayMs) await new Promise((r) => setTimeout(r, a.delayMs));
        if (res.destroyed) return;
        res.writeHead(a.status ?? 200, { 'content-type': 'application/json' }).end(a.raw ?? JSON.stringify(a.json ?? {}));
      });
    });
  };
  const server = opts.tls ? https.createServer({ cert: opts.tls.cert, key: opts.tls.key }, handler) : http.createServer(handler);
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  b.url = `${opts.tls ? 'https' : 'http'}://127.0.0.1:${(server.address() as AddressInfo).port}${opts.path ?? '/ringcast-hooks'}`;
  return b;
}

/** The per-app `hooks` block with every hook enabled at `url` (override any part). */
export function allHooks(url: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    url,
    timeout_ms: 2000,
    on_failure: 'deny',
    connect: { enabled: true },
    subscribe: { enabled: true },
    client_event: { enabled: true },
    publish: { enabled: true },
    ...extra,
  };
}
