import t from 'tap';
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { AppRegistry } from '../../src/apps/registry';
import { loadConfig } from '../../src/config';
import type { ApiDeps } from '../../src/http/deps';
import { registerRoutes } from '../../src/http/router';
import { noMetrics } from '../../src/metrics/types';
import { signApiQuery } from '../../src/protocol/api-auth';
import type { Decision, RateLimiter } from '../../src/ratelimit/types';
import type { Outgoing, Publisher } from '../../src/channels/publisher';

// A one-chunk body is read into a buffer that the next request reuses (http/request.ts
// readBody). An answer that has to wait (here: a rate limiter that answers later, as the
// Redis ones do) must still publish its own body. Driven through the real routes with
// stand-ins for uWS's request and response objects.

const APP = { id: 'app-1', key: 'key-1', secret: 'secret-1' };

t.test('requests whose answers wait each publish their own body', async (t) => {
  const config = loadConfig({ env: {}, overrides: { apps: [{ ...APP, max_client_events_per_second: 1000 }] } });
  const pending: (() => void)[] = [];
  const later: RateLimiter = {
    driver: 'memory',
    consume: () => new Promise<Decision>((resolve) => pending.push(() => resolve({ allowed: true, limit: 1000, remaining: 999, resetSeconds: 1, retryAfterSeconds: 0 }))),
    window: () => ({ allowed: true, limit: 1, remaining: 1, resetSeconds: 1, retryAfterSeconds: 0 }),
    ready: async () => undefined,
    health: () => undefined,
    close: async () => undefined,
  };
  const published: string[] = [];
  const publisher = { publish: (msgs: Outgoing[]) => { for (const m of msgs) published.push(m.message); } } as unknown as Publisher;
  const routes = new Map<string, (res: HttpResponse, req: HttpRequest) => void>();
  const app = new Proxy({}, { get: (_, method: string) => (pattern: string, h: (res: HttpResponse, req: HttpRequest) => void) => { routes.set(`${method} ${pattern}`, h); return app; } }) as TemplatedApp;
  const deps = {
    config, apps: new AppRegistry(config.apps), publisher, log: { error: () => undefined } as unknown as ApiDeps['log'], metrics: noMetrics,
    limiter: later, cache: null, stopping: () => false,
  } as unknown as ApiDeps;
  registerRoutes(app, deps);
  const post = routes.get('post /apps/:appId/events')!;

  const answers: string[] = [];
  const send = (data: string) => {
    const body = Buffer.from(JSON.stringify({ name: 'ev', channels: ['ch'], data }));
    const path = `/apps/${APP.id}/events`;
    const query = signApiQuery(APP.key, APP.secret, 'POST', path, {}, body, Math.floor(Date.now() / 1000));
    const req = {
      getParameter: () => APP.id, getUrl: () => path, getQuery: () => query,
      getHeader: (name: unknown) => (String(name) === 'content-length' ? String(body.length) : ''),
    } as unknown as HttpRequest;
    let status = '200 OK';
    const res = {
      onAborted: () => res,
      // uWS hands the chunk in memory that is only valid during the callback: wipe it after.
      onData: (cb: (chunk: ArrayBuffer, isLast: boolean) => void) => {
        const chunk = new Uint8Array(body).buffer;
        cb(chunk, true);
        new Uint8Array(chunk).fill(0x20);
        return res;
      },
      cork: (f: () => void) => { f(); return res; },
      writeStatus: (s: string) => { status = s; return res; },
      writeHeader: () => res,
      end: (b: unknown) => { answers.push(`${status} ${String(b)}`); return res; },
    } as unknown as HttpResponse;
    post(res, req);
  };

  const datas = ['first', 'second, longer than the first', '3rd', 'ü'.repeat(20)];
  for (const d of datas) send(d);
  t.equal(pending.length, datas.length, 'every request waits for the limiter');
  t.same(published, [], 'nothing published yet');
  for (const go of pending) go();
  await new Promise((r) => setImmediate(r));
  t.equal(answers.length, datas.length);
  t.ok(answers.every((a) => a.startsWith('200 OK')), answers.join(' | '));
  t.same(published.map((m) => (JSON.parse(m) as { data: string }).data), datas, 'each request published its own data');
});
