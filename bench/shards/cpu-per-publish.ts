// CPU time per publish to a channel with one subscriber, against the number of shards.
//
//   node dist/bench/shards/cpu-per-publish.js [options]     (make bench-shards)
//   node dist/bench/shards/cpu-per-publish.js --help
//
// Why CPU and not throughput: at 8 or 16 shards the threads outnumber this machine's
// cores, so throughput would measure the scheduler. What a shard count costs is the CPU
// the server spends per publish: with a publish written to every shard (the design
// before interest routing), each publish costs N−1 ring copies, decodes, native
// publishes to an empty topic and thread wake-ups; with interest routing it should cost
// about the same at 16 shards as at 1 (target ≤ 1.2×).
//
// One run, on a fresh `ringcast start` with `workers: N` (bench/targets/ringcast.ts):
// one subscriber (a raw WebSocket of the harness's load generator) on channel `cpu0-0`;
// the harness's Node publisher sends signed `POST /events` to that channel at a fixed
// rate over keep-alive connections (spread over the shards by SO_REUSEPORT, like real
// API clients). After a warm-up: an idle window (subscriber connected, nothing
// published), then a window publishing --publishes events at --rate. The server's CPU
// time is the sum over its threads of /proc/<pid>/task/*/schedstat (run time in ns,
// user + system; /proc/<pid>/stat counts 10 ms ticks, too coarse for an idle window).
//   cpu_per_publish_us = (CPU of the publish window − idle CPU/s × its wall time) / publishes
// Every publish must reach the subscriber, or the run fails.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { readOptions } from '../harness/args';
import { GenPool, Publisher, sleep } from '../harness/load';
import { killAllNow } from '../harness/procs';
import { median } from '../harness/report';
import { APP, freePort, type RunningTarget } from '../harness/target';
import { ceilingThreadsTarget } from '../targets/ceiling-threads';
import { ringcastTarget } from '../targets/ringcast';

const USAGE = `Usage: node dist/bench/shards/cpu-per-publish.js [options]

  --workers LIST     shard counts                                              [1,2,4,8,16]
  --rounds N         rounds (each: every shard count once, on a fresh server)  [3]
  --publishes N      publishes in the measured window                          [5000]
  --rate N           publishes per second (fixed rate)                         [1000]
  --conns N          publisher keep-alive connections                          [16]
  --warmup S         publishing before the windows (JIT, connections)          [3]
  --payload N        bytes of each event's data                                [100]
  --target NAME      ringcast; ceiling: the bare thread-per-shard uWS server of
                     bench/targets/ceiling-threads.ts, the floor of this design
                     (a MessagePort per hop); ceiling-ring: the same with
                     ringcast's ring + doorbell as the hop                         [ringcast]
  --threads N        log the N threads that spent the most CPU per publish in
                     each publish window (name, tid, µs per publish)           [0]
  --json FILE        also append the JSON lines to FILE
  --help`;

interface Opts {
  workers: number[];
  rounds: number;
  publishes: number;
  rate: number;
  conns: number;
  warmupS: number;
  payload: number;
  threads: number;
  target: 'ringcast' | 'ceiling' | 'ceiling-ring';
  json: string | null;
}

function parse(argv: string[]): Opts {
  const o = readOptions(argv, USAGE, ['workers', 'rounds', 'publishes', 'rate', 'conns', 'warmup', 'payload', 'threads', 'target', 'json']);
  const num = (k: string, def: number, min: number): number => o.num(k, def, min);
  const workers = (o.get('workers') ?? '1,2,4,8,16').split(',').map((s) => Number(s.trim()));
  for (const w of workers) if (!Number.isInteger(w) || w < 1 || w > 64) throw new Error(`--workers: "${w}" is not a shard count (1–64)`);
  const target = o.get('target') ?? 'ringcast';
  if (target !== 'ringcast' && target !== 'ceiling' && target !== 'ceiling-ring') throw new Error(`--target: "${target}" is not ringcast, ceiling or ceiling-ring`);
  return {
    workers, rounds: Math.floor(num('rounds', 3, 1)), publishes: Math.floor(num('publishes', 5000, 100)),
    rate: num('rate', 1000, 1), conns: Math.floor(num('conns', 16, 1)), warmupS: num('warmup', 3, 0),
    payload: Math.floor(num('payload', 100, 20)), threads: Math.floor(num('threads', 0, 0)), target, json: o.get('json') ?? null,
  };
}

/** CPU run time of every thread of pid, in µs (schedstat: ns, user + system). */
export function threadsCpuUs(pid: number): number {
  let us = 0;
  for (const t of perThreadCpuUs(pid).values()) us += t.us;
  return us;
}

/** tid → its name (comm) and CPU run time in µs. */
function perThreadCpuUs(pid: number): Map<string, { name: string; us: number }> {
  const out = new Map<string, { name: string; us: number }>();
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const ns = Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ', 1)[0]);
      out.set(tid, { name: fs.readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim(), us: ns / 1000 });
    } catch { /* the thread ended between readdir and read */ }
  }
  return out;
}

/** The n threads that spent the most between two readings, in µs per publish. */
function topThreads(before: Map<string, { name: string; us: number }>, after: Map<string, { name: string; us: number }>, publishes: number, n: number): string {
  const rows: [string, number][] = [];
  for (const [tid, a] of after) rows.push([`${a.name}/${tid}`, (a.us - (before.get(tid)?.us ?? 0)) / publishes]);
  rows.sort((x, y) => y[1] - x[1]);
  return rows.slice(0, n).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ');
}

const nowUs = (): number => Number(process.hrtime.bigint() / 1000n);
const started = Date.now();
function log(msg: string): void {
  process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${msg}\n`);
}

interface RunResult {
  workers: number;
  round: number;
  publishes: number;
  cpu_per_publish_us: number;
  idle_cpu_pct: number;
  publish_cpu_pct: number;
  publish_window_s: number;
  /** Publishes per second reached (below --rate: the server or the machine fell behind). */
  achieved_rate: number;
  publisher_max_backlog: number;
  threads: number;
}

let current: RunningTarget | null = null;

async function oneRun(workers: number, round: number, o: Opts, tmpDir: string): Promise<RunResult> {
  const port = await freePort();
  const t = await (o.target === 'ringcast' ? ringcastTarget(workers) : ceilingThreadsTarget(workers, o.target === 'ceiling' ? 'port' : 'ring')).start({ port, tmpDir });
  current = t;
  const pool = await GenPool.start({
    host: '127.0.0.1', port, connections: 1, procs: 1, minProcs: 1, channels: { prefix: 'cpu', perConn: 1, mod: 1 },
    latency: false, subscribeOnConnect: true, srcAddrs: [], concurrency: 1, socketsPerProc: 1,
  });
  let pub: Publisher | null = null;
  try {
    const c = await pool.connect(20_000);
    if (c.subsConfirmed !== 1) throw new Error(`the subscriber did not subscribe: ${JSON.stringify(c.errors)}`);
    pub = await Publisher.start({
      host: '127.0.0.1', port, appId: APP.id, key: APP.key, secret: APP.secret, conns: o.conns, pipeline: 1, srcAddr: '127.0.0.1',
    });
    const run = {
      rate: o.rate, channelPrefix: 'cpu0-', channelCount: 1, timestamp: false, payloadBytes: o.payload, event: 'bench',
    };
    const windowMs = (o.publishes / o.rate) * 1000;
    // Idle window, before anything is published: the same server, subscriber connected,
    // the publisher's connections open. Measured first so that it holds the server's own
    // timers only: right after publishing, V8's memory reducer and the JIT's background
    // work run for seconds (up to 6 % of a core at 16 threads), and subtracting that as
    // "idle" made the publish window's figure too small and jumpy.
    await sleep(500);
    const i0 = threadsCpuUs(t.pid);
    const it0 = nowUs();
    await sleep(windowMs);
    const idleRate = (threadsCpuUs(t.pid) - i0) / (nowUs() - it0); // CPU µs per µs

    // Warm-up: JIT, the publisher's connections, every shard's first frames.
    if (o.warmupS > 0) {
      await pub.run({ ...run, maxDurationMs: o.warmupS * 1000 + 30_000 });
      await sleep(o.warmupS * 1000);
      await pub.stop();
      await pool.drain(300, 5000);
    }
    await sleep(500);

    // Publish window: from before the first publish until the last one is delivered.
    const before = await pool.snapshot();
    const pubBefore = (await pub.snapshot(false)).stats.ok;
    const th0 = o.threads > 0 ? perThreadCpuUs(t.pid) : null;
    const c0 = threadsCpuUs(t.pid);
    const t0 = nowUs();
    await pub.run({ ...run, maxDurationMs: windowMs * 4 + 30_000 });
    // Until --publishes are answered (a few more may be in flight): if the server falls
    // behind the rate, the window gets longer rather than the count smaller.
    const until = Date.now() + windowMs * 4 + 20_000;
    while ((await pub.snapshot(false)).stats.ok - pubBefore < o.publishes) {
      if (Date.now() > until) throw new Error(`fewer than ${o.publishes} publishes answered in ${(windowMs * 4 + 20_000) / 1000} s`);
      await sleep(20);
    }
    const fin = await pub.stop();
    const done = await pool.drain(200, 5000);
    const c1 = threadsCpuUs(t.pid);
    const t1 = nowUs();
    const published = fin.ok - pubBefore;
    if (th0 !== null) log(`workers ${workers}: µs per publish by thread: ${topThreads(th0, perThreadCpuUs(t.pid), published, o.threads)}`);
    const delivered = done.msgs - before.msgs;
    if (published <= 0) throw new Error('no publish was accepted');
    if (delivered !== published) throw new Error(`${published} publishes accepted, ${delivered} delivered to the subscriber`);
    const nonOk = Object.values(fin.status).reduce((a, b) => a + b, 0) + Object.values(fin.errors).reduce((a, b) => a + b, 0);
    if (nonOk > 0) throw new Error(`publisher: ${JSON.stringify({ status: fin.status, errors: fin.errors })}`);
    const died = t.exitReport();
    if (died !== null) throw new Error(`the server died during the run: ${died}`);
    const wall = t1 - t0;
    return {
      workers, round, publishes: published,
      cpu_per_publish_us: round3((c1 - c0 - idleRate * wall) / published),
      idle_cpu_pct: round3(idleRate * 100),
      publish_cpu_pct: round3(((c1 - c0) / wall) * 100),
      publish_window_s: round3(wall / 1e6),
      achieved_rate: Math.round(published / (wall / 1e6)),
      publisher_max_backlog: fin.lagging,
      threads: fs.readdirSync(`/proc/${t.pid}/task`).length,
    };
  } finally {
    if (pub) await pub.close();
    await pool.close();
    await t.stop();
    current = null;
  }
}

function round3(v: number): number {
  return Math.round(v * 1000) / 1000;
}

async function main(): Promise<number> {
  let o: Opts;
  try {
    o = parse(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`cpu-per-publish: ${(err as Error).message}\n`);
    return 2;
  }
  const onSignal = (sig: NodeJS.Signals): void => {
    log(`${sig}: stopping`);
    void Promise.race([current?.stop(), sleep(8000)]).finally(() => {
      killAllNow();
      process.exit(sig === 'SIGINT' ? 130 : 143);
    });
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ringcast-shards-'));
  if (o.target === 'ringcast') await ringcastTarget(1).prepare!(log);
  log(`CPU per publish, 1 subscriber, ${o.target}: workers ${o.workers.join(', ')} × ${o.rounds} round(s), ${o.publishes} publishes at ${o.rate}/s; ` +
    `${os.cpus().length} cores, node ${process.version}, load ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  const results = new Map<number, RunResult[]>(o.workers.map((w) => [w, []]));
  let failed = false;
  for (let r = 1; r <= o.rounds; r++) {
    // Reversed every other round, so a slow spell of the machine does not always land on
    // the same shard counts.
    for (const w of r % 2 === 1 ? o.workers : [...o.workers].reverse()) {
      try {
        const res = await oneRun(w, r, o, tmpDir);
        results.get(w)!.push(res);
        log(`round ${r}, workers ${w}: ${res.cpu_per_publish_us} µs CPU per publish (idle ${res.idle_cpu_pct} % of a core, ` +
          `publishing ${res.publish_cpu_pct} % at ${res.achieved_rate}/s, ${res.threads} threads)`);
      } catch (err) {
        failed = true;
        log(`round ${r}, workers ${w} FAILED: ${(err as Error).message}`);
        killAllNow();
      }
    }
  }

  const base = results.get(o.workers[0]) ?? [];
  const rows: string[] = [];
  for (const w of o.workers) {
    const runs = results.get(w)!;
    // per-round ratio against the first shard count of the list, then the median
    const ratios = runs.flatMap((x) => {
      const b = base.find((y) => y.round === x.round);
      return b ? [x.cpu_per_publish_us / b.cpu_per_publish_us] : [];
    });
    const line = {
      bench: 'cpu-per-publish', workers: w, runs: runs.length,
      cpu_per_publish_us: median(runs.map((x) => x.cpu_per_publish_us)),
      idle_cpu_pct: median(runs.map((x) => x.idle_cpu_pct)),
      ratio_to_first: round3(median(ratios)),
      per_run: runs,
    };
    const json = JSON.stringify(line, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? null : v));
    process.stdout.write(json + '\n');
    if (o.json) fs.appendFileSync(o.json, json + '\n');
    const f = (v: number, digits: number, unit: string): string => (Number.isFinite(v) ? v.toFixed(digits) + unit : '–');
    rows.push(`| ${w} | ${f(line.cpu_per_publish_us, 1, ' µs')} | ${runs.map((x) => x.cpu_per_publish_us.toFixed(1)).join(', ') || '–'} | ` +
      `${f(line.idle_cpu_pct, 1, ' %')} | ${f(line.ratio_to_first, 2, '×')} |`);
  }
  process.stdout.write(`\n${o.publishes} publishes at ${o.rate}/s to a channel with 1 subscriber, ${o.conns} publisher connections; ` +
    `medians of ${o.rounds} round(s); ${os.cpus().length} cores, node ${process.version}\n\n` +
    `| workers | CPU per publish (median) | per round | idle CPU (% of a core) | ÷ workers ${o.workers[0]} (per round, median) |\n` +
    '|---|---|---|---|---|\n' + rows.join('\n') + '\n');
  fs.rmSync(tmpDir, { recursive: true, force: true });
  return failed ? 1 : 0;
}

main().then(
  (code) => {
    killAllNow();
    process.exit(code);
  },
  (err: unknown) => {
    process.stderr.write(`cpu-per-publish: ${(err as Error)?.stack ?? String(err)}\n`);
    killAllNow();
    process.exit(1);
  },
);
