// Benchmark entry point: every scenario against every target, medians of N runs, one
// JSON line per scenario/target on stdout, then a Markdown table with the ratios
// ringcast / soketi and ringcast / ceiling. Progress goes to stderr.
//
//   node dist/bench/run.js [options]        (make bench: the whole comparison)
//   node dist/bench/run.js --help
//
// Everything it starts (servers, load generators, the publisher) is stopped at the end,
// on errors, on Ctrl-C and on SIGTERM; servers run under a guard process that stops them
// even if this process is killed outright.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_SOCKETS_PER_PROC, openFilesLimit } from './harness/load';
import { killAllNow, liveCount } from './harness/procs';
import { svgChart } from './harness/chart';
import { jsonLine, markdownTable, summarise, type TargetSummary } from './harness/report';
import { SCENARIOS, type BenchOptions, type Result, type Scenario } from './harness/scenarios';
import { freePort, type RunningTarget, type TargetDef } from './harness/target';
import { findWrk, wrkVersion } from './harness/wrk';
import { ceilingTarget } from './targets/ceiling';
import { ringcastTarget } from './targets/ringcast';
import { soketiTarget } from './targets/soketi';

const USAGE = `Usage: node dist/bench/run.js [options]

  --scenarios LIST        fanout,latency,channels,idle,api (idle = idle-1ch,idle-spread) [all]
  --targets LIST          ceiling,soketi,ringcast-1,ringcast-2 (ringcast = both)        [all]
                          opt-in: ringcast-1-wh, ringcast-2-wh (every webhook event type
                          to a receiver answering at once), ringcast-2-wh-slow (answering
                          after 2 s), ringcast-2-wh-batch (batching on); webhooks = the four;
                          ringcast-1-base, ringcast-2-base: the build at RINGCAST_BENCH_BASE_ROOT
                          (before / after pairs in one interleaved run)
  --runs N                runs per scenario and target; the median is reported        [3]
  --duration S            publish window of every publishing scenario (overrides the four below)
  --fanout-duration S     [15]   --latency-duration S [8]
  --channels-duration S   [6]    --api-duration S     [6]
  --warmup S              publishing before each measured window                      [1]
  --conns N               connection count of every scenario (overrides the ones below)
  --fanout-subs N         [1000]   --latency-subs N    [1000]   --rate N (latency) [200]
  --channels-conns N      [10000]  --channels-per-conn N [2]
  --idle-conns N          [19000]  --idle-spread N (channels of idle-spread)        [100]
  --api-conns N           keep-alive connections of the publisher                     [16]
  --pipeline N            requests in flight per publisher connection                 [1]
  --pub-procs N           publisher processes sharing those connections               [1]
  --payload N             bytes of each event's data                                  [100]
  --publisher P           wrk | node: publisher of the api and channels scenarios      [wrk]
                          (wrk replays pre-signed requests: make bench-deps installs it;
                          fanout and latency always use the Node publisher)
  --wrk-threads N         wrk threads (it shares the --api-conns connections)         [1]
  --wrk-pool N            distinct pre-signed requests of the api scenario's pool     [10000]
  --gen-procs N           load-generator processes (0 = automatic: ≥2, --sockets-per-proc each) [0]
  --sockets-per-proc N    sockets per generator process when automatic                [9500]
  --src-addrs N           spread subscribers over 127.0.0.<base>..<base+N-1> (0 = 127.0.0.1) [32]
  --src-base N            first last octet of those addresses                         [2]
  --connect-concurrency N WebSocket upgrades in flight per generator process          [256]
  --max-minutes M         start no new run after M minutes (runs left are reported as skipped) [18]
  --json FILE             also append the JSON lines to FILE
  --chart FILE            write the SVG chart of the medians to FILE (make bench: docs/benchmarks.svg) [none]
  --help

Short smoke run:  node dist/bench/run.js --runs 1 --duration 2 --warmup 0.5 --conns 50`;

interface Cli {
  scenarios: Scenario[];
  targets: TargetDef[];
  opts: BenchOptions;
  maxMinutes: number;
  jsonFile: string | null;
  chartFile: string | null;
}

function parseArgs(argv: string[]): Cli {
  const kv = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--help' || a === '-h') {
      process.stdout.write(USAGE + '\n');
      process.exit(0);
    }
    if (!a.startsWith('--')) throw new Error(`unexpected argument "${a}"`);
    const eq = a.indexOf('=');
    if (eq > 0) kv.set(a.slice(2, eq), a.slice(eq + 1));
    else {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      kv.set(a.slice(2), v);
    }
  }
  const known = new Set(['scenarios', 'targets', 'runs', 'duration', 'fanout-duration', 'latency-duration', 'channels-duration',
    'api-duration', 'warmup', 'conns', 'fanout-subs', 'latency-subs', 'rate', 'channels-conns', 'channels-per-conn',
    'idle-conns', 'idle-spread', 'api-conns', 'pipeline', 'pub-procs', 'payload', 'gen-procs', 'src-addrs', 'src-base',
    'connect-concurrency', 'max-minutes', 'json', 'chart', 'sockets-per-proc', 'publisher', 'wrk-threads', 'wrk-pool']);
  for (const k of kv.keys()) if (!known.has(k)) throw new Error(`unknown option --${k} (see --help)`);
  const num = (k: string, def: number, min = 0): number => {
    const v = kv.get(k);
    if (v === undefined) return def;
    const n = Number(v);
    if (!Number.isFinite(n) || n < min) throw new Error(`--${k} must be a number ≥ ${min}, got "${v}"`);
    return n;
  };
  const int = (k: string, def: number, min = 0): number => Math.floor(num(k, def, min));
  const conns = kv.has('conns') ? int('conns', 0, 1) : null;
  const dur = kv.has('duration') ? num('duration', 0, 0.1) : null;

  const allTargets: Record<string, TargetDef[]> = {
    ceiling: [ceilingTarget], soketi: [soketiTarget], 'ringcast-1': [ringcastTarget(1)], 'ringcast-2': [ringcastTarget(2)],
  };
  allTargets.ringcast = [...allTargets['ringcast-1'], ...allTargets['ringcast-2']];
  allTargets.all = [ceilingTarget, soketiTarget, ...allTargets.ringcast];
  // opt-in (not in `all`): every webhook event type configured, receiver on this machine
  for (const [n, t] of [
    ['ringcast-1-wh', ringcastTarget(1, { webhooks: { delayMs: 0 } })],
    ['ringcast-2-wh', ringcastTarget(2, { webhooks: { delayMs: 0 } })],
    ['ringcast-2-wh-slow', ringcastTarget(2, { webhooks: { delayMs: 2000 } })],
    ['ringcast-2-wh-batch', ringcastTarget(2, { webhooks: { delayMs: 0, batching: true } })],
  ] as const) allTargets[n] = [t];
  allTargets.webhooks = ['ringcast-1-wh', 'ringcast-2-wh', 'ringcast-2-wh-slow', 'ringcast-2-wh-batch'].flatMap((n) => allTargets[n]);
  // opt-in: the same targets from another build (RINGCAST_BENCH_BASE_ROOT: a checkout with dist/)
  const baseRoot = process.env.RINGCAST_BENCH_BASE_ROOT;
  if (baseRoot) {
    allTargets['ringcast-1-base'] = [ringcastTarget(1, { base: baseRoot })];
    allTargets['ringcast-2-base'] = [ringcastTarget(2, { base: baseRoot })];
  }
  const order = [...allTargets.all, ...(allTargets['ringcast-1-base'] ?? []), ...(allTargets['ringcast-2-base'] ?? []), ...allTargets.webhooks];
  const targets: TargetDef[] = [];
  for (const n of (kv.get('targets') ?? 'all').split(',').map((s) => s.trim()).filter(Boolean)) {
    const t = allTargets[n];
    if (!t) throw new Error(`unknown target "${n}" (ceiling, soketi, ringcast-1, ringcast-2, ringcast, all, ringcast-1-wh, ringcast-2-wh, ringcast-2-wh-slow, ringcast-2-wh-batch, webhooks; ringcast-1-base, ringcast-2-base with RINGCAST_BENCH_BASE_ROOT)`);
    for (const x of t) if (!targets.includes(x)) targets.push(x);
  }
  targets.sort((a, b) => order.indexOf(a) - order.indexOf(b));
  const scenarios: Scenario[] = [];
  for (const n of (kv.get('scenarios') ?? 'all').split(',').map((s) => s.trim()).filter(Boolean)) {
    const picked = n === 'all' ? SCENARIOS : n === 'idle' ? SCENARIOS.filter((s) => s.id.startsWith('idle')) : SCENARIOS.filter((s) => s.id === n);
    if (picked.length === 0) throw new Error(`unknown scenario "${n}" (${SCENARIOS.map((s) => s.id).join(', ')}, idle, all)`);
    for (const s of picked) if (!scenarios.includes(s)) scenarios.push(s);
  }
  scenarios.sort((a, b) => SCENARIOS.indexOf(a) - SCENARIOS.indexOf(b));

  const nAddr = int('src-addrs', 32);
  const base = int('src-base', 2, 1);
  if (nAddr > 0 && base + nAddr - 1 > 254) throw new Error('--src-base + --src-addrs must stay within 127.0.0.1..127.0.0.254');
  const srcAddrs = Array.from({ length: nAddr }, (_, i) => `127.0.0.${base + i}`);
  const publisher = kv.get('publisher') ?? 'wrk';
  if (publisher !== 'wrk' && publisher !== 'node') throw new Error(`--publisher must be wrk or node, got "${publisher}"`);
  const wrkBin = findWrk();
  if (publisher === 'wrk' && wrkBin === null && scenarios.some((s) => s.id === 'api' || s.id === 'channels')) {
    throw new Error('the api and channels scenarios publish with wrk, which is not installed: run `make bench-deps` ' +
      '(apt-get install wrk; or set RINGCAST_BENCH_WRK), or pass --publisher node');
  }

  const opts: BenchOptions = {
    host: '127.0.0.1',
    runs: int('runs', 3, 1),
    warmupS: num('warmup', 1),
    fanout: { subs: conns ?? int('fanout-subs', 1000, 1), durationS: dur ?? num('fanout-duration', 15, 0.1) },
    latency: { subs: conns ?? int('latency-subs', 1000, 1), rate: num('rate', 200, 0.1), durationS: dur ?? num('latency-duration', 8, 0.1) },
    channels: { conns: conns ?? int('channels-conns', 10_000, 1), perConn: int('channels-per-conn', 2, 1), durationS: dur ?? num('channels-duration', 6, 0.1) },
    idle: { conns: conns ?? int('idle-conns', 19_000, 1), spread: int('idle-spread', 100, 1) },
    api: { durationS: dur ?? num('api-duration', 6, 0.1) },
    apiConns: int('api-conns', 16, 1),
    pipeline: int('pipeline', 1, 1),
    pubProcs: int('pub-procs', 1, 1),
    payloadBytes: int('payload', 100, 20),
    genProcs: int('gen-procs', 0),
    srcAddrs,
    concurrency: int('connect-concurrency', 256, 1),
    socketsPerProc: int('sockets-per-proc', DEFAULT_SOCKETS_PER_PROC, 1),
    publisher,
    wrkBin,
    wrkThreads: int('wrk-threads', 1, 1),
    wrkPool: int('wrk-pool', 10_000, 1),
  };
  return { scenarios, targets, opts, maxMinutes: num('max-minutes', 18, 0.1), jsonFile: kv.get('json') ?? null,
    chartFile: kv.get('chart') ?? null };
}

const started = Date.now();
function log(msg: string): void {
  const s = Math.floor((Date.now() - started) / 1000);
  process.stderr.write(`[${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}] ${msg}\n`);
}

let current: RunningTarget | null = null;
let cleaning: Promise<void> | null = null;

function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    const t = current;
    current = null;
    if (t) {
      try {
        await Promise.race([t.stop(), new Promise((r) => setTimeout(r, 10_000))]);
      } catch { /* killed below */ }
    }
    killAllNow();
  })();
  return cleaning;
}

function onSignal(sig: NodeJS.Signals): void {
  log(`${sig}: stopping everything this run started`);
  void cleanup().then(() => process.exit(sig === 'SIGINT' ? 130 : 143));
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} took longer than ${Math.round(ms / 1000)} s`)), ms);
    }),
  ]);
}

function rotate<T>(a: T[], by: number): T[] {
  if (a.length === 0) return a;
  const k = by % a.length;
  return [...a.slice(k), ...a.slice(0, k)];
}

async function main(): Promise<number> {
  let cli: Cli;
  try {
    cli = parseArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`bench: ${(err as Error).message}\n`);
    return 2;
  }
  const { scenarios, targets, opts } = cli;
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const deadline = started + cli.maxMinutes * 60_000;
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ringcast-bench-'));
  log(`bench: ${scenarios.map((s) => s.id).join(', ')} × ${targets.map((t) => t.name).join(', ')} × ${opts.runs} run(s); logs in ${tmpDir}`);
  log(`machine: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? '?'}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, node ${process.version}, load ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  const wrkUsed = opts.publisher === 'wrk' && scenarios.some((s) => s.id === 'api' || s.id === 'channels');
  if (wrkUsed) log(`api and channels publish with ${wrkVersion(opts.wrkBin!)} (${opts.wrkThreads} thread(s), ${opts.apiConns} connections)`);

  const limit = openFilesLimit();
  const biggest = Math.max(...scenarios.map((s) => (s.id.startsWith('idle') ? opts.idle.conns : s.id === 'channels' ? opts.channels.conns : s.id === 'api' ? 0 : opts.fanout.subs)));
  if (biggest + 200 > limit) {
    log(`warning: ${biggest} connections need more open files than the servers may have (limit ${limit}; they inherit this process's)`);
  }

  try {
    for (const t of targets) {
      if (t.prepare) await t.prepare(log);
    }
  } catch (err) {
    fs.rmSync(tmpDir, { recursive: true, force: true });
    throw err;
  }

  const summaries: TargetSummary[] = [];
  let anyError = false;
  let runCounter = 0;
  // Rounds: every scenario × target once per round, so that if time runs out every pair
  // is hurt alike. Within a round the targets run one scenario back to back, each on a
  // fresh server, soketi last and the order reversed every other round: the ceiling's
  // and ringcast's runs whose ratio is taken sit seconds apart, not minutes, so a slow
  // spell of this shared machine lands on both sides of that ratio more often than on
  // one (docs/benchmarks.md, "Measuring on a noisy machine").
  const runOrder = [...targets.filter((t) => t.name !== 'soketi'), ...targets.filter((t) => t.name === 'soketi')];
  const results = new Map<string, { round: number; result: Result }[]>();
  const errors = new Map<string, string[]>();
  const key = (sc: Scenario, t: TargetDef): string => `${sc.id}\u0000${t.name}`;
  for (let r = 0; r < opts.runs; r++) {
    log(`round ${r + 1}/${opts.runs}`);
    for (const sc of scenarios) {
      for (const tdef of r % 2 === 0 ? runOrder : [...runOrder].reverse()) {
        const k = key(sc, tdef);
        if (!results.has(k)) results.set(k, []);
        if (!errors.has(k)) errors.set(k, []);
        if (Date.now() > deadline) {
          errors.get(k)!.push(`run ${r + 1} skipped: past --max-minutes ${cli.maxMinutes}`);
          continue;
        }
        try {
          current = await tdef.start({ port: await freePort(), tmpDir });
          const o = { ...opts, srcAddrs: rotate(opts.srcAddrs, runCounter++ * 5) };
          const res = await withTimeout(sc.run(current, o, log), sc.budgetMs(opts), `${sc.id} on ${tdef.name}`);
          // Numbers from a server that died on the way are not a result.
          const died = current.exitReport();
          if (died !== null) throw new Error(`the server died during the run: ${died}`);
          results.get(k)!.push({ round: r + 1, result: res });
          const shown = sc.metrics.map((m) => `${m.key}=${res[m.key]}`).join(' ');
          log(`  ${sc.id} × ${tdef.name} (run ${r + 1}): ${shown}`);
        } catch (err) {
          anyError = true;
          const msg = (err as Error).message;
          errors.get(k)!.push(`run ${r + 1}: ${msg}`);
          log(`  ${sc.id} × ${tdef.name} (run ${r + 1}) FAILED: ${msg}`);
          // A failed run may leave anything behind: kill it all before the next run.
          if (current) await current.stop().catch(() => undefined);
          current = null;
          killAllNow();
        }
        if (current) {
          await current.stop();
          current = null;
        }
      }
    }
  }

  for (const sc of scenarios) {
    for (const tdef of targets) {
      const k = key(sc, tdef);
      const s = summarise(sc, tdef, results.get(k) ?? [], errors.get(k) ?? []);
      summaries.push(s);
      const line = jsonLine(s);
      process.stdout.write(line + '\n');
      if (cli.jsonFile) fs.appendFileSync(cli.jsonFile, line + '\n');
    }
  }

  const o = opts;
  const setup = [
    `medians of ${o.runs} run(s)`,
    `fan-out ${o.fanout.subs} subscribers × ${o.fanout.durationS} s`,
    `latency ${o.latency.subs} subscribers × ${o.latency.rate} publishes/s × ${o.latency.durationS} s`,
    `channels ${o.channels.conns} connections × ${o.channels.perConn} channels, ${o.channels.durationS} s`,
    `idle ${o.idle.conns} connections (1 channel / ${o.idle.spread} channels)`,
    `API ${o.api.durationS} s`,
    `publisher ${o.apiConns} connection(s) × ${o.pipeline} in flight, ${o.payloadBytes}-byte data` +
      (o.publisher === 'wrk' ? ` (api and channels: wrk, ${o.wrkThreads} thread(s), pre-signed pool)` : ' (Node publisher everywhere)'),
    `warm-up ${o.warmupS} s`,
  ].join('; ');
  const machine = `${os.cpus().length} × ${os.cpus()[0]?.model.trim() ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, node ${process.version}`;
  process.stdout.write(`\n${setup}; ${os.cpus().length} cores, node ${process.version}\n\n` + markdownTable(scenarios, summaries, targets) + '\n');
  if (cli.chartFile) {
    fs.mkdirSync(path.dirname(cli.chartFile), { recursive: true });
    fs.writeFileSync(cli.chartFile, svgChart(scenarios, summaries, targets, `${machine}; ${new Date().toISOString().slice(0, 10)}; medians of ${o.runs} run(s)`));
    log(`chart written to ${cli.chartFile}`);
  }
  log(`done in ${((Date.now() - started) / 60_000).toFixed(1)} min; processes left: ${liveCount()}`);
  if (!anyError) fs.rmSync(tmpDir, { recursive: true, force: true });
  else log(`server logs kept in ${tmpDir}`);
  // A comparison target (soketi) failing is a result; ringcast or the ceiling never
  // completing a scenario means the harness or ringcast is broken: exit 1 then.
  const broken = summaries.filter((s) => s.ok_runs === 0 && s.target !== 'soketi');
  for (const b of broken) log(`no successful run: ${b.scenario} × ${b.target}`);
  return broken.length > 0 ? 1 : 0;
}

main().then(
  async (code) => {
    await cleanup();
    process.exit(code);
  },
  async (err: unknown) => {
    process.stderr.write(`bench: ${(err as Error)?.stack ?? String(err)}\n`);
    await cleanup();
    process.exit(1);
  },
);
