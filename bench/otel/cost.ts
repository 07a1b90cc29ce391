// What OpenTelemetry traces cost an API publish: one ringcast server per mode, each its
// own process (`workers: 1`), all up at once, taking turns window by window (the order
// reversed every other round) so that the windows a ratio compares are seconds apart:
//
//   off     no tracing keys, no OTEL_* variables
//   ratio0  OTEL_EXPORTER_OTLP_ENDPOINT set, OTEL_TRACES_SAMPLER=parentbased_traceidratio, ARG 0
//   ratio1  the same with ARG 1: every publish a recorded trace (a server span and a delivery span)
//   before  (with --before ROOT) another checkout's build, e.g. one without tracing, as `off`
//
// The publisher: wrk (the C load generator, Debian package `wrk`) over --conns keep-alive
// connections, replaying 64 signed `POST /apps/app-id/events` (100-byte data,
// bench/http/signed-post.lua) to a channel --subs raw WebSocket clients listen to, for
// --duration seconds per window. The spans
// go to an OTLP/HTTP sink in this process that answers 200 and counts them. Per window: requests
// answered 200 per second, and the server's CPU (all its threads, /proc) per request,
// which moves less than the rate when other work shares the machine. Output: one JSON
// line per mode with the medians, and the median of the per-window ratios to `off`. Defaults:
// --rounds 5 --duration 3 --conns 16 --subs 2.
//
//   npx tsc -p tsconfig.json && node dist/bench/otel/cost.js [--rounds N] [--duration S] [--conns N] [--subs N] [--before ROOT]
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import WebSocket from 'ws';
import { promisify } from 'node:util';
import { signApiQuery } from '../../src/protocol/api-auth';
import { APP, baseEnv, freePort, launchServer, processCpuUs, type RunningTarget } from '../harness/target';

interface Options { rounds: number; duration: number; conns: number; subs: number; before: string | null }

function parse(argv: string[]): Options {
  const o: Options = { rounds: 5, duration: 3, conns: 16, subs: 2, before: null };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--before') {
      o.before = path.resolve(argv[++i] ?? '');
      if (!fs.existsSync(path.join(o.before, 'dist', 'src', 'cli.js'))) throw new Error(`${o.before}/dist/src/cli.js is missing: build that checkout first`);
      continue;
    }
    const k = argv[i].replace(/^--/, '') as Exclude<keyof Options, 'before'>;
    const v = Number(argv[++i]);
    if (!(k in o) || !Number.isFinite(v) || v <= 0) throw new Error(`unknown option or bad value: ${argv[i - 1]} ${argv[i]} (see bench/otel/cost.ts)`);
    o[k] = v;
  }
  return o;
}

const ALL_MODES = ['off', 'ratio0', 'ratio1', 'before'] as const;
type Mode = typeof ALL_MODES[number];

const run = promisify(execFile);
const root = path.join(__dirname, '..', '..', '..');
const script = path.join(root, 'bench', 'http', 'signed-post.lua');
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

async function startMode(mode: Mode, sink: string, before: string | null): Promise<RunningTarget> {
  const from = mode === 'before' && before !== null ? before : root;
  const port = await freePort();
  const file = path.join(tmp, `ringcast-${mode}.yaml`);
  fs.writeFileSync(file, [
    'host: 127.0.0.1', `port: ${port}`, 'workers: 1', 'shutdown_grace_period: 3000', 'log:', '  level: warn',
    'apps:', `  - id: ${APP.id}`, `    key: ${APP.key}`, `    secret: ${APP.secret}`, '    max_client_events_per_second: 10000000', '',
  ].join('\n'));
  const env = baseEnv();
  if (mode === 'ratio0' || mode === 'ratio1') Object.assign(env, { OTEL_EXPORTER_OTLP_ENDPOINT: sink, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: mode === 'ratio0' ? '0' : '1' });
  return launchServer({
    name: `ringcast-${mode}`, cmd: process.execPath, args: [path.join(from, 'bin', 'ringcast.js'), 'start', '--config', file],
    cwd: from, env, port, tmpDir: tmp, readyPath: '/up', stopGraceMs: 4000,
  });
}

async function subscribers(port: number, n: number): Promise<WebSocket[]> {
  return Promise.all(Array.from({ length: n }, () => new Promise<WebSocket>((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/app/${APP.key}?protocol=7&client=js&version=8.4.0`);
    ws.on('error', reject);
    ws.on('message', (raw: Buffer) => {
      const f = JSON.parse(raw.toString('utf8')) as { event: string };
      if (f.event === 'pusher:connection_established') ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'bench' } }));
      else if (f.event === 'pusher_internal:subscription_succeeded') resolve(ws);
    });
  })));
}

/** 64 requests signed now (valid ±600 s), one per line for bench/http/signed-post.lua. */
function writeRequests(): string {
  const p = `/apps/${APP.id}/events`;
  const now = Math.floor(Date.now() / 1000);
  const lines = Array.from({ length: 64 }, (_, i) => {
    const body = JSON.stringify({ name: 'bench', channel: 'bench', data: `${i} ` + 'x'.repeat(96) });
    return `${p}?${signApiQuery(APP.key, APP.secret, 'POST', p, {}, body, now)}\t${body}`;
  });
  const file = path.join(tmp, 'requests.txt');
  fs.writeFileSync(file, lines.join('\n') + '\n');
  return file;
}

/** One wrk window of `seconds` on `port`: requests answered (wrk counts non-2xx apart; they fail the run). */
async function window(port: number, conns: number, seconds: number, requests: string): Promise<number> {
  const { stdout } = await run('wrk', ['-t1', `-c${conns}`, `-d${seconds}s`, '-s', script, `http://127.0.0.1:${port}`, '--', requests], { maxBuffer: 1 << 20 });
  if (/Non-2xx/.test(stdout)) {
    const [target, body] = fs.readFileSync(requests, 'utf8').split('\n')[0].split('\t');
    const sample = await new Promise<string>((resolve) => {
      const q = http.request({ host: '127.0.0.1', port, method: 'POST', path: target, headers: { 'content-type': 'application/json' } }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => { text += c.toString(); });
        res.on('end', () => resolve(`${res.statusCode} ${text}`));
      });
      q.on('error', (err) => resolve(String(err)));
      q.end(body);
    });
    throw new Error(`answers other than 2xx (one now: ${sample}):\n${stdout}`);
  }
  const total = /(\d+) requests in/.exec(stdout);
  if (!total) throw new Error(`wrk printed no request count:\n${stdout}`);
  return Number(total[1]);
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function main(): Promise<void> {
  const o = parse(process.argv.slice(2));
  const MODES: Mode[] = ALL_MODES.filter((m) => m !== 'before' || o.before !== null);
  const sink = await startSink();
  const servers = new Map<Mode, RunningTarget>();
  const clients: WebSocket[] = [];
  try {
    for (const m of MODES) {
      const s = await startMode(m, sink.base, o.before);
      servers.set(m, s);
      clients.push(...await subscribers(s.port, o.subs));
    }
    const rate: Record<Mode, number[]> = { off: [], ratio0: [], ratio1: [], before: [] };
    const cpu: Record<Mode, number[]> = { off: [], ratio0: [], ratio1: [], before: [] };
    const requests = writeRequests();
    for (const m of MODES) await window(servers.get(m)!.port, o.conns, 1, requests); // warm-up
    for (let r = 0; r < o.rounds; r++) {
      for (const m of r % 2 === 0 ? MODES : [...MODES].reverse()) {
        const s = servers.get(m)!;
        const cpu0 = processCpuUs(s.pid);
        const t0 = performance.now();
        const n = await window(s.port, o.conns, o.duration, requests);
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
