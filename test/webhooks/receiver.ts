// A real webhook receiver for the tests: an HTTP server on 127.0.0.1 (ephemeral port)
// that records every request (headers, raw body, parsed body, arrival time) and answers
// with the status `respond` picks (200 by default). Also: the `pusher` SDK's verifier.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Pusher from 'pusher';
import { APP } from '../helpers/server';

export interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  rawBody: string;
  body: { time_ms: number; events: Record<string, unknown>[] };
  at: number;
}

export interface Receiver {
  url: string;
  port: number;
  requests: Received[];
  /** Every event of every request, in arrival order. */
  events(): Record<string, unknown>[];
  /** Answers the requests left hanging so far with `status`. */
  release(status: number): void;
  /** Answer to a request: a status, 'hang' (never answer), or 'reset' (cut the connection). */
  respond: (r: Received, index: number) => number | 'hang' | 'reset';
  /** Resolves once pred holds for the recorded requests (polled on each arrival). */
  until(pred: (r: Received[]) => boolean, timeoutMs?: number, what?: string): Promise<void>;

  close(): Promise<void>;
}

export async function startReceiver(path = '/hooks'): Promise<Receiver> {
  const requests: Received[] = [];
  const waiters = new Set<() => void>();
  const hanging = new Set<http.ServerResponse>();
  const rec: Receiver = {
    url: '', port: 0, requests,
    events: () => requests.flatMap((r) => r.body.events),
    respond: () => 200,
    release(status) {
      for (const r of hanging) r.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
      hanging.clear();
    },
    until(pred, timeoutMs = 10_000, what = 'webhook requests') {
      if (pred(requests)) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!pred(requests)) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timed out waiting for ${what}; got ${JSON.stringify(requests.map((r) => r.body.events))}`));
        }, timeoutMs);
        waiters.add(check);
      });
    },
    close: () => new Promise((resolve) => {
      for (const r of hanging) r.destroy();
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks).toString();
      let body: Received['body'];
      try {
        body = JSON.parse(rawBody) as Received['body'];
      } catch {
        // not a webhook (another test's process polling a port this receiver now has): not recorded
        res.writeHead(400).end('not a webhook: the body is not JSON');
        return;
      }
      const r: Received = { path: req.url ?? '', headers: req.headers, rawBody, body, at: Date.now() };
      const index = requests.length;
      requests.push(r);
      const status = rec.respond(r, index);
      for (const w of [...waiters]) w();
      if (status === 'reset') { // no answer, the connection cut: a network error for the sender
        req.socket.destroy();
        return;
      }
      if (status === 'hang') {
        hanging.add(res);
        return;
      }
      res.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  rec.port = (server.address() as AddressInfo).port;
  rec.url = `http://127.0.0.1:${rec.port}${path}`;
  return rec;
}

/** The `pusher` SDK's verdict on a request (what a real receiver runs). */
export function sdkValid(r: Received, app: { id: string; key: string; secret: string } = APP): boolean {
  const pusher = new Pusher({ appId: app.id, key: app.key, secret: app.secret, host: '127.0.0.1' });
  return pusher.webhook({ headers: r.headers as Record<string, string>, rawBody: r.rawBody }).isValid();
}
