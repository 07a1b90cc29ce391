// The live console's HTTP API for tests: requests from a chosen client address (any
// 127.0.0.0/8 address reaches a listener on 127.0.0.1 on Linux), /metrics values, and a
// reader of the live log's text/event-stream.

import http from 'node:http';
import type { Test } from 'tap';
import type { Page } from 'playwright-core';
import { launchChromium } from './browser';
import { readResponse, type RawResponse } from './http';

export const TOKEN = 'console-token-0123456789';

/** One request on its own connection, from `from` (a loopback address). */
export function consoleRequest(port: number, method: string, path: string, o: { headers?: Record<string, string>; body?: string; from?: string } = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1', port, method, path, agent: false, localAddress: o.from ?? '127.0.0.1',
      headers: { ...(o.body !== undefined ? { 'content-type': 'application/json' } : {}), ...o.headers },
    }, (res) => readResponse(res).then(resolve, reject));
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.end(o.body);
  });
}

/** A headless Chromium page of the console at `port`, logged in with `token`. */
export async function consolePage(t: Test, port: number, token = TOKEN): Promise<{ page: Page; browser: Awaited<ReturnType<typeof launchChromium>> }> {
  const browser = await launchChromium(t);
  const page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${port}/`);
  await page.fill('#login-token', token);
  await page.click('#login-submit');
  await page.waitForSelector('#main:not([hidden])');
  return { page, browser };
}

export const bearer = (token = TOKEN): Record<string, string> => ({ authorization: `Bearer ${token}` });

/** The sum of a metric's series (labelled or not) in /metrics. */
export async function metricValue(metricsPort: number, name: string): Promise<number> {
  const r = await consoleRequest(metricsPort, 'GET', '/metrics');
  let sum = 0;
  for (const m of r.text.matchAll(new RegExp(`^ringcast_${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))) sum += Number(m[1]);
  return sum;
}

export interface LiveEvent { kind: string; t: number; event?: string; channel?: string; data?: string; op?: string; reason?: string; count?: number }

/** The live log of an app, read as it arrives (every `data:` line). */
export class LiveLog {
  readonly events: LiveEvent[] = [];
  status = 0;
  private readonly req: http.ClientRequest;
  private waiters: { pred: (e: LiveEvent) => boolean; resolve: (e: LiveEvent) => void }[] = [];

  constructor(port: number, app: string, token = TOKEN) {
    this.req = http.get({ host: '127.0.0.1', port, path: `/api/apps/${app}/events`, agent: false, headers: bearer(token) }, (res) => {
      this.status = res.statusCode ?? 0;
      let buf = '';
      res.on('data', (c: Buffer) => {
        buf += c.toString();
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          for (const line of buf.slice(0, i).split('\n')) if (line.startsWith('data: ')) this.push(JSON.parse(line.slice(6)) as LiveEvent);
          buf = buf.slice(i + 2);
        }
      });
    });
    this.req.on('error', () => { /* closed by the test */ });
  }

  private push(e: LiveEvent): void {
    this.events.push(e);
    for (const w of this.waiters.filter((x) => x.pred(e))) {
      this.waiters.splice(this.waiters.indexOf(w), 1);
      w.resolve(e);
    }
  }

  /** The first event (seen or to come) matching `pred`. */
  next(pred: (e: LiveEvent) => boolean, timeoutMs = 10_000): Promise<LiveEvent> {
    const seen = this.events.find(pred);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const w = { pred, resolve: (e: LiveEvent) => { clearTimeout(timer); resolve(e); } };
      const timer = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        reject(new Error(`no live log event matched within ${timeoutMs} ms (${this.events.length} seen)`));
      }, timeoutMs);
      this.waiters.push(w);
    });
  }

  close(): void {
    this.req.destroy();
  }
}
