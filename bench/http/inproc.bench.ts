// CPU per signed `POST /apps/{id}/events` through the real HTTP routes (registerRoutes:
// request capture, body read, app lookup, rate limits with the in-memory limiter,
// signature and body_md5 check, body parse, publish, answer), in one thread, with
// stand-ins for uWS's request and response objects and for the publish (the bus and the
// native fan-out are not JavaScript this build changes). Only JavaScript runs here, so it
// isolates what the request's checks cost; bench/http/api-ab.ts runs it across builds.
//
//   npx tsc -p . && taskset -c 1 node dist/bench/http/inproc.bench.js [rounds=7] [requests=50000]
//
// Requests are what the bench publisher sends (bench/harness/publisher.ts): the `pusher`
// SDK's query, 100-byte data, 64 channels in turn. Prints one JSON line:
// { "us_per_req": median CPU µs per request, "rounds": [...] }.
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { AppRegistry } from '../../src/apps/registry';
import { loadConfig } from '../../src/config';
import type { ApiDeps } from '../../src/http/deps';
import { registerRoutes } from '../../src/http/router';
import { noMetrics } from '../../src/metrics/types';
import { signApiQuery } from '../../src/protocol/api-auth';
import { allocateRateLimiterMemory, createRateLimiter } from '../../src/ratelimit';
import type { Publisher } from '../../src/channels/publisher';

const APP = { id: 'app-id', key: 'app-key', secret: 'app-secret' };
const rounds = Number(process.argv[2] ?? 7);
const perRound = Number(process.argv[3] ?? 50_000);

const config = loadConfig({ env: {}, overrides: { apps: [{ ...APP, max_client_events_per_second: 10_000_000 }] } });
let published = 0;
const publisher = { publish: () => { published++; } } as unknown as Publisher;
const routes = new Map<string, (res: HttpResponse, req: HttpRequest) => void>();
const uws = new Proxy({}, {
  get: (_, method: string) => (pattern: string, h: (res: HttpResponse, req: HttpRequest) => void) => { routes.set(`${method} ${pattern}`, h); return uws; },
}) as TemplatedApp;
const deps = {
  config, apps: new AppRegistry(config.apps), publisher, log: { error: (o: unknown, m: string) => console.error(m, o) } as unknown as ApiDeps['log'],
  metrics: noMetrics, limiter: createRateLimiter(config, { memory: allocateRateLimiterMemory(config) }), cache: null, stopping: () => false,
} as unknown as ApiDeps;
registerRoutes(uws, deps);
const post = routes.get('post /apps/:appId/events');
if (post === undefined) throw new Error('no route for POST /apps/:appId/events');

interface Prepared { query: string; body: ArrayBuffer; length: string }
const path = `/apps/${APP.id}/events`;
function prepare(n: number): Prepared[] {
  const now = Math.floor(Date.now() / 1000);
  const out: Prepared[] = [];
  for (let i = 0; i < n; i++) {
    const body = Buffer.from(JSON.stringify({ name: 'bench', channels: [`nobody-${i}`], data: '@0 ' + 'x'.repeat(82) }));
    out.push({ query: signApiQuery(APP.key, APP.secret, 'POST', path, {}, body, now), body: new Uint8Array(body).buffer, length: String(body.length) });
  }
  return out;
}

// One request and one response object, reused: uWS hands out its own objects, whose
// allocation is not this code's; what the routes allocate per request is theirs.
let current: Prepared;
let status = '';
let answered = 0;
let refused = '';
const req = {
  getParameter: () => APP.id, getUrl: () => path, getQuery: () => current.query,
  getHeader: (name: unknown) => (String(name) === 'content-length' ? current.length : ''),
} as unknown as HttpRequest;
const res = {
  onAborted: () => res,
  onData: (cb: (chunk: ArrayBuffer, isLast: boolean) => void) => { cb(current.body, true); return res; },
  cork: (f: () => void) => { f(); return res; },
  writeStatus: (s: string) => { status = s; return res; },
  writeHeader: () => res,
  end: (b: unknown) => {
    answered++;
    if (status !== '') { refused = `${status} ${String(b)}`; status = ''; }
    return res;
  },
} as unknown as HttpResponse;

function run(reqs: Prepared[], n: number): void {
  for (let i = 0; i < n; i++) {
    current = reqs[i & 63];
    post!(res, req);
  }
}

const reqs = prepare(64);
run(reqs, perRound / 5); // warm-up: the JIT and the limiter's state
const samples: number[] = [];
for (let r = 0; r < rounds; r++) {
  const before = answered;
  const c0 = process.cpuUsage();
  run(reqs, perRound);
  const c = process.cpuUsage(c0);
  if (answered - before !== perRound) throw new Error(`${answered - before} answers to ${perRound} requests (some wait: not the synchronous path)`);
  samples.push((c.user + c.system) / perRound);
}
if (refused !== '') throw new Error(`a request was refused: ${refused}`);
if (published !== answered) throw new Error(`${published} publishes for ${answered} answers`);
const sorted = [...samples].sort((a, b) => a - b);
console.log(JSON.stringify({ us_per_req: Number(sorted[sorted.length >> 1].toFixed(3)), rounds: samples.map((s) => Number(s.toFixed(3))) }));
