// Subscribe latency with a subscribe hook against a local backend answering at once, and
// without one (docs/hooks.md, "Latency"):
//
//   node dist/bench/hooks/subscribe.js [--rate 1000] [--seconds 10] [--connections 50] [--workers 1]
//                                      [--runs 1] [--warmup 1] [--burst 1]
//
// Three rounds per run on one ringcast (started in this process, as the tests do; its shards
// are worker threads) with a fresh app config each: `none` (the app has no hooks), `unmatched`
// (a subscribe hook whose pattern the channels do not match: what unhooked channels cost),
// `hooked` (every subscribe calls the backend). The backend is a node:http server in a
// child process answering {"allow":true} at once; its own time per call is from its request
// handler being called (headers read) to its answer being handed to res.end().
//
// The load is open-loop at a steady rate: subscribe i to a fresh public channel is due at
// i / `rate` s and sent by a 1 ms timer (one at a time at 1,000/s; with --burst N, N at
// once every N / `rate` s), round-robin over `connections` raw WebSocket clients; its
// latency is from its send to its subscription_succeeded. Each round first sends `warmup`
// seconds' worth at the same rate and waits for their answers, not measured (a fresh shard
// thread runs unoptimised code at first), so the measured run starts from empty queues.
// `late` is how far behind its due time a subscribe was sent (p99); `cpu` is this process's
// CPU time per subscribe (ringcast's threads and the clients, whose share is the same in
// every round), steadier than latency on a busy machine. With --runs N the three rounds run
// N times in turn and the medians of their p50s are printed last.

import { fork } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import WebSocket from 'ws';
import { loadConfig } from '../../src/config';
import { start } from '../../src/main';

const args = new Map<string, string>();
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i].replace(/^--/, ''), process.argv[i + 1]);
const RATE = Number(args.get('rate') ?? 1000);
const SECONDS = Number(args.get('seconds') ?? 10);
const CONNECTIONS = Number(args.get('connections') ?? 50);
const WORKERS = Number(args.get('workers') ?? 1);
const RUNS = Number(args.get('runs') ?? 1);
const WARMUP = Number(args.get('warmup') ?? 1);
const BURST = Number(args.get('burst') ?? 1);
const APP = { id: 'bench', key: 'bench-key', secret: 'bench-secret' };

if (process.argv[2] === 'backend') {
  // The backend: answers at once, keeps its own handling times.
  const own: number[] = [];
  const server = http.createServer((req, res) => {
    const t0 = process.hrtime.bigint();
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      own.push(Number(process.hrtime.bigint() - t0) / 1e6);
      res.end('{"allow":true}');
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as AddressInfo).port }));
  process.on('message', () => {
    process.send!({ own: own.splice(0) });
  });
} else {
  void main();
}

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

interface Round { name: string; rate: number; p50: number; p99: number; late: number; cpu: number; done: number }

async function round(name: string, hooks: Record<string, unknown> | null): Promise<Round> {
  const config = loadConfig({
    env: {},
    overrides: { host: '127.0.0.1', port: 0, workers: WORKERS, log: { level: 'error' }, apps: [{ ...APP, hooks, max_client_events_per_second: 100_000 }], rate_limiter: { enabled: false },
      // the load is 20+ subscribes/s per connection: measure the call, not the per-connection budget
      hook_client: { calls_per_second_per_connection: 100_000, max_in_flight_per_app: 100_000 } },
  });
  const server = await start(config);
  const clients = await Promise.all(Array.from({ length: CONNECTIONS }, () => new Promise<WebSocket>((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${server.port}/app/${APP.key}?protocol=7`);
    ws.once('message', () => resolve(ws));
    ws.once('error', reject);
  })));
  const warm = Math.round(RATE * WARMUP); // subscribes b-0 … b-(warm-1): sent, answered, not measured
  const measured = RATE * SECONDS;
  const sentAt = new Map<string, number>();
  const latencies: number[] = [];
  let warmAnswered = 0;
  for (const ws of clients) {
    ws.on('message', (raw: Buffer) => {
      const s = raw.toString('utf8');
      const m = /"channel":"b-(\d+)"/.exec(s);
      if (!m || !s.includes('subscription_succeeded')) return;
      if (Number(m[1]) < warm) {
        warmAnswered++;
        return;
      }
      const t0 = sentAt.get(m[1]);
      if (t0 === undefined) return;
      sentAt.delete(m[1]);
      latencies.push(performance.now() - t0);
    });
  }
  const gapMs = 1000 / RATE;
  /** Subscribes first … first+count-1, in groups of BURST, each group due BURST × gapMs after the one before. */
  const pace = (first: number, count: number, onSend: (n: number, at: number, due: number) => void) => new Promise<void>((resolve) => {
    const t0 = performance.now();
    const dueOf = (i: number) => t0 + Math.floor(i / BURST) * BURST * gapMs;
    let i = 0;
    const tick = () => {
      const due = Math.min(count, (Math.floor((performance.now() - t0) / (BURST * gapMs)) + 1) * BURST);
      for (; i < due; i++) {
        const n = first + i;
        onSend(n, performance.now(), dueOf(i));
        clients[n % CONNECTIONS].send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: `b-${n}` } }));
      }
      if (i >= count) return resolve();
      setTimeout(tick, dueOf(i) - performance.now());
    };
    tick();
  });
  const until = async (done: () => boolean) => {
    const limit = performance.now() + 10_000;
    while (!done() && performance.now() < limit) await new Promise((r) => setTimeout(r, 20));
  };
  // Warm-up, then the measured run from empty queues.
  await pace(0, warm, () => {});
  await until(() => warmAnswered >= warm);
  const late: number[] = [];
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await pace(warm, measured, (n, at, due) => {
    late.push(at - due);
    sentAt.set(String(n), at);
  });
  await until(() => latencies.length >= measured);
  const elapsed = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  for (const ws of clients) ws.close();
  await server.stop();
  latencies.sort((a, b) => a - b);
  late.sort((a, b) => a - b);
  return { name, rate: latencies.length / elapsed, p50: quantile(latencies, 0.5), p99: quantile(latencies, 0.99), late: quantile(late, 0.99), cpu: (cpu.user + cpu.system) / measured, done: latencies.length };
}

async function main(): Promise<void> {
  const loadAtStart = os.loadavg()[0];
  const backend = fork(__filename, ['backend']);
  const port = await new Promise<number>((resolve) => backend.once('message', (m: { port: number }) => resolve(m.port)));
  const url = `http://127.0.0.1:${port}/hooks`;
  const ownTimes = () => new Promise<number[]>((resolve) => {
    backend.once('message', (m: { own: number[] }) => resolve(m.own));
    backend.send('own');
  });
  console.log(`subscribe hook bench: ${RATE}/s${BURST > 1 ? ` in bursts of ${BURST}` : ''} for ${SECONDS} s over ${CONNECTIONS} connections, workers ${WORKERS}, ${RUNS} run(s), node ${process.version}`);
  console.log('run  round      subscribes/s   p50 ms   p99 ms   answered   late p99 ms   cpu µs');
  const added: number[] = [];
  const p50s = new Map<string, number[]>();
  for (let run = 1; run <= RUNS; run++) {
    const results: Round[] = [];
    results.push(await round('none', null));
    results.push(await round('unmatched', { url, subscribe: { enabled: true, channels: ['hooked-*'] } }));
    await ownTimes();
    results.push(await round('hooked', { url, subscribe: { enabled: true, channels: ['*'] } }));
    const own = (await ownTimes()).sort((a, b) => a - b);
    for (const r of results) {
      p50s.set(r.name, [...(p50s.get(r.name) ?? []), r.p50]);
      console.log(`${String(run).padStart(3)}  ${r.name.padEnd(10)} ${r.rate.toFixed(0).padStart(12)} ${r.p50.toFixed(3).padStart(8)} ${r.p99.toFixed(3).padStart(8)} ${String(r.done).padStart(10)} ${r.late.toFixed(3).padStart(13)} ${r.cpu.toFixed(0).padStart(8)}`);
    }
    const extra = results[2].p50 - results[0].p50;
    added.push(extra - quantile(own, 0.5));
    console.log(`     backend's own time per call: p50 ${quantile(own, 0.5).toFixed(3)} ms, p99 ${quantile(own, 0.99).toFixed(3)} ms (${own.length} calls); `
      + `added by the hook at p50: ${extra.toFixed(3)} ms, ${added[added.length - 1].toFixed(3)} ms over the backend's own time`);
  }
  backend.kill();
  const median = (xs: number[]) => quantile([...xs].sort((a, b) => a - b), 0.5);
  if (RUNS > 1) {
    console.log(`median of ${RUNS} runs: p50 ${[...p50s].map(([name, xs]) => `${name} ${median(xs).toFixed(3)} ms`).join(', ')}; `
      + `added by the hook over the backend's own time ${median(added).toFixed(3)} ms`);
  }
  console.log(`load average (1 min) ${loadAtStart.toFixed(2)} at the start, ${os.loadavg()[0].toFixed(2)} at the end; ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'})`);
}
