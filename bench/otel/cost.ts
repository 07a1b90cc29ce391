// What OpenTelemetry traces cost an API publish: one ringcast server per mode, each its
// own process (`workers: 1`), all up at once, taking turns window by window (the order
// reversed every other round) so that the windows a ratio compares are seconds apart:
//
//   off     no tracing keys, no OTEL_* variables
//   ratio0  OTEL_EXPORTER_OTLP_ENDPOINT set, OTEL_TRACES_SAMPLER=parentbased_traceidratio, ARG 0
//   ratio1  the same with ARG 1: every publish a recorded trace (a server span and a delivery span)
//
// The publisher: --conns keep-alive connections in this process, each sending signed
// `POST /apps/app-id/events` (100-byte data) to a channel --subs raw WebSocket clients
// listen to, one request after the other, for --duration seconds per window. The spans
// go to an OTLP/HTTP sink in this process that answers 200 and counts them. Per window: requests
// answered 200 per second, and the server's CPU (all its threads, /proc) per request,
// which moves less than the rate when other work shares the machine. Output: one JSON
// line per mode with the medians, and the median of the per-window ratios to `off`.
//
//   npx tsc -p tsconfig.json && node dist/bench/otel/cost.js [--rounds N] [--duration S] [--conns N] [--subs N]
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import WebSocket from 'ws';
import { signApiQuery } from '../../src/protocol/api-auth';
import { APP, baseEnv, freePort, launchServer, processCpuUs, type RunningTarget } from '../harness/target';

interface Options { rounds: number; duration: number; conns: number; subs: number }

function parse(argv: string[]): Options {
  const o: Options = { rounds: 5, duration: 3, conns: 8, subs: 10 };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i].replace(/^--/, '') as keyof Options;
    const v = Number(argv[++i]);
    if (!(k in o) || !Number.isFinite(v) || v <= 0) throw new Error(`unknown option or bad value: ${argv[i - 1]} ${argv[i]} (see bench/otel/cost.ts)`);
    o[k] = v;
  }
  return o;
}

const MODES = ['off', 'ratio0', 'ratio1'] as const;
type Mode = typeof MODES[number];

const root = path.join(__dirname, '..', '..', '..');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ringcast-otel-cost-'));

/** The OTLP sink: answers every export at once, counts the spans roughly (by their spanId fields). */
async function startSink(): Promise<{ base: string; spans(): number; close(): void }> {
  let spans = 0;
  const server = http.createServer((req, res) => {
    let n = 0;
    req.on('data', (c: Buffer) => { n += c.toString('latin1').split('"spanId"').length - 1; });
    req.on('end', () => { spans += n; res.writeHead(200, { 'content-type': 'application/json' }).end('{}'); });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans: () => spans, close: () => server.close() };
}

async function startMode(mode: Mode, sink: string): Promise<RunningTarget> {
  const port = await freePort();
  const file = path.join(tmp, `ringcast-${mode}.yaml`);
  fs.writeFileSync(file, [
    'host: 127.0.0.1', `port: ${port}`, 'workers: 1', 'shutdown_grace_period: 3000', 'log:', '  level: warn',
    'apps:', `  - id: ${APP.id}`, `    key: ${APP.key}`, `    secret: ${APP.secret}`, '',
  ].join('\n'));
  const env = baseEnv();
  if (mode !== 'off') Object.assign(env, { OTEL_EXPORTER_OTLP_ENDPOINT: sink, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: mode === 'ratio0' ? '0' : '1' });
  return launchServer({
    name: `ringcast-${mode}`, cmd: process.execPath, args: [path.join(root, 'bin', 'ringcast.js'), 'start', '--config', file],
    cwd: root, env, port, tmpDir: tmp, readyPath: '/up', stopGraceMs: 4000,
  });
}

async function subscribers(port: number, n: number): Promise<WebSocket[]> {
  return Promise.all(Array.from({ length: n }, () => new Promise<WebSocket>((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/app/${APP.key}?protocol=7&client=js&version=8.4.0`);
    ws.on('error', reject);
    ws.on('message', (raw) => {
      const f = JSON.parse(raw.toString()) as { event: string };
      if (f.event === 'pusher:connection_established') ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'bench' } }));
      else if (f.event === 'pusher_internal:subscription_succeeded') resolve(ws);
    });
  })));
}

/** 64 signed requests (valid ±600 s). */
function signed(): { path: string; body: string }[] {
  const p = `/apps/${APP.id}/events`;
  const now = Math.floor(Date.now() / 1000);
  return Array.from({ length: 64 }, (_, i) => {
    const body = JSON.stringify({ name: 'bench', channel: 'bench', data: `${i} ` + 'x'.repeat(96) });
    return { path: `${p}?${signApiQuery(APP.key, APP.secret, 'POST', p, {}, body, now)}`, body };
  });
}

/** --conns loops of one request after the other for `seconds`: requests answered 200. */
async function window(port: number, conns: number, seconds: number): Promise<number> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: conns });
  const reqs = signed();
  const until = Date.now() + seconds * 1000;
  let ok = 0;
  const loop = async (k: number): Promise<void> => {
    for (let i = k; Date.now() < until; i++) {
      const r = reqs[i % reqs.length];
      const status = await new Promise<number>((resolve) => {
        const q = http.request({ host: '127.0.0.1', port, method: 'POST', path: r.path, agent, headers: { 'content-type': 'application/json' } }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
        q.on('error', () => resolve(0));
        q.end(r.body);
      });
      if (status === 200) ok++;
    }
  };
  await Promise.all(Array.from({ length: conns }, (_, k) => loop(k)));
  agent.destroy();
  return ok;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function main(): Promise<void> {
  const o = parse(process.argv.slice(2));
  const sink = await startSink();
  const servers = new Map<Mode, RunningTarget>();
  const clients: WebSocket[] = [];
  try {
    for (const m of MODES) {
      const s = await startMode(m, sink.base);
      servers.set(m, s);
      clients.push(...await subscribers(s.port, o.subs));
    }
    const rate: Record<Mode, number[]> = { off: [], ratio0: [], ratio1: [] };
    const cpu: Record<Mode, number[]> = { off: [], ratio0: [], ratio1: [] };
    for (const m of MODES) await window(servers.get(m)!.port, o.conns, 1); // warm-up
    for (let r = 0; r < o.rounds; r++) {
      for (const m of r % 2 === 0 ? MODES : [...MODES].reverse()) {
        const s = servers.get(m)!;
        const cpu0 = processCpuUs(s.pid);
        const t0 = performance.now();
        const n = await window(s.port, o.conns, o.duration);
        const secs = (performance.now() - t0) / 1000;
        rate[m].push(n / secs);
        cpu[m].push((processCpuUs(s.pid) - cpu0) / Math.max(1, n));
        process.stderr.write(`round ${r + 1} ${m}: ${(n / secs).toFixed(0)} req/s, ${cpu[m].at(-1)!.toFixed(1)} µs CPU/req\n`);
      }
    }
    for (const m of MODES) {
      const rr = rate[m].map((x, i) => x / rate.off[i]);
      const cr = cpu[m].map((x, i) => x / cpu.off[i]);
      console.log(JSON.stringify({
        mode: m, rounds: o.rounds, duration_s: o.duration, conns: o.conns, subs: o.subs,
        req_per_s: Math.round(median(rate[m])), cpu_us_per_req: +median(cpu[m]).toFixed(1),
        rate_vs_off: +median(rr).toFixed(3), cpu_vs_off: +median(cr).toFixed(3),
      }));
    }
    console.log(JSON.stringify({ spans_received: sink.spans() }));
  } finally {
    for (const c of clients) c.terminate();
    await Promise.all([...servers.values()].map((s) => s.stop()));
    sink.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
