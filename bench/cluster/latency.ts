// Two nodes against one: end-to-end latency and fan-out through each cluster backend.
//
//   node dist/bench/cluster/latency.js [options]        (make bench-cluster)
//   node dist/bench/cluster/latency.js --help
//
// For each setup — one node; two nodes through Redis; two nodes through NATS — fresh
// `ringcast start` processes (bench/targets/ringcast.ts: one node of --workers shards, or
// two of --cluster-workers, by default half as many: both setups run the same number of
// shard threads on the machine's cores, so the difference is the cluster's) and a fresh
// backend (redis-server / nats-server on a free port). --subs subscribers of one channel,
// all on the one node, or split evenly over the two nodes. The subscribers are raw
// WebSockets of one C process (bench/harness/wsrecv.c, --gen c: connection i to node
// i mod n, so the generator's own cost has the same shape with one node and with two);
// --gen node uses the Node generator (loadgen.ts, one process per node, ~3× the CPU per
// message). The API publisher sends to node A only, so half of the two-node subscribers
// get each event through the backend.
//
// Each round also logs where the CPU went (% of one core, from /proc): each node's primary
// thread and its other threads, the backend server, the generator and the publisher.
//
//  latency   --rate publishes/s for --seconds with the send time in the payload; the
//            load generator records publish → delivery per message (p50 / p99).
//  fan-out   the publisher as fast as the API answers (closed loop) for --fanout-seconds:
//            delivered messages per second over all subscribers.
//
// Targets: p50 overhead of two nodes ≤ 2 ms over one node; fan-out with two
// nodes ≥ 0.8× one node's. Every run checks that each subscriber got every publish of
// the latency window (a lost message fails the run).
//
// --rounds: the setups run one after the other in each round (one, redis, nats, one, …);
// each two-node figure is compared with the one node of its own round, and the medians
// of those per-round differences and ratios are the result. On a small machine the
// latency window runs near saturation (1,000 × 1,000 deliveries/s plus the generator),
// so a single round moves by several ms and tenths of a ratio between runs.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { NatsServer } from '../../test/helpers/nats';
import { RedisServer } from '../../test/helpers/redis';
import { readOptions } from '../harness/args';
import { CGenPool } from '../harness/cgen';
import type { Histogram } from '../harness/histogram';
import { GenPool, Publisher, sleep } from '../harness/load';
import { killAllNow } from '../harness/procs';
import { APP, freePort, processCpuUs, threadCpuUs, type RunningTarget } from '../harness/target';
import { ringcastTarget } from '../targets/ringcast';

const USAGE = `Usage: node dist/bench/cluster/latency.js [options]

  --setups LIST      one, redis, nats                                [one,redis,nats]
  --workers N        shards per node                                 [2]
  --cluster-workers N  shards per node in the two-node setups   [--workers / 2]
                     (the one node's shards split between the two: the same threads
                     on the same cores; --cluster-workers 2 oversubscribes 2 cores)
  --subs N           subscribers of the channel                      [1000]
  --rate N           publishes per second in the latency window      [1000]
  --seconds S        latency window                                  [10]
  --fanout-seconds S closed-loop fan-out window                      [5]
  --conns N          publisher keep-alive connections                [8]
  --payload N        bytes of each event's data                      [100]
  --gen c|node       subscribers' load generator: C (wsrecv.c, needs gcc) or
                     Node (loadgen.ts, ~3× the CPU per message)         [c]
  --pace US          the C generator sleeps US µs after each round of reads
                     in the fan-out window (0: reads at once)            [1000]
  --rounds N         rounds of every setup, interleaved              [5]
  --json FILE        also append the JSON lines to FILE
  --help`;

type Setup = 'one' | 'redis' | 'nats';

interface Opts {
  setups: Setup[];
  workers: number;
  clusterWorkers: number;
  subs: number;
  rate: number;
  seconds: number;
  fanoutSeconds: number;
  conns: number;
  payload: number;
  rounds: number;
  gen: 'c' | 'node';
  pace: number;
  json: string | null;
}

function parseArgs(argv: string[]): Opts {
  const o = readOptions(argv, USAGE, ['setups', 'workers', 'cluster-workers', 'subs', 'rate', 'seconds', 'fanout-seconds', 'conns', 'payload', 'rounds', 'gen', 'pace', 'json']);
  const num = (k: string, def: number, min: number): number => o.num(k, def, min);
  const setups = (o.get('setups') ?? 'one,redis,nats').split(',').map((s) => s.trim()) as Setup[];
  for (const s of setups) if (!['one', 'redis', 'nats'].includes(s)) throw new Error(`--setups: "${s}" is not one, redis or nats`);
  const gen = o.get('gen') ?? 'c';
  if (gen !== 'c' && gen !== 'node') throw new Error(`--gen: "${gen}" is not c or node`);
  return {
    setups, workers: Math.floor(num('workers', 2, 1)), clusterWorkers: Math.floor(num('cluster-workers', Math.max(1, Math.floor(num('workers', 2, 1) / 2)), 1)), subs: Math.floor(num('subs', 1000, 2)),
    rate: num('rate', 1000, 1), seconds: num('seconds', 10, 1), fanoutSeconds: num('fanout-seconds', 5, 1),
    conns: Math.floor(num('conns', 8, 1)), payload: Math.floor(num('payload', 100, 30)), rounds: Math.floor(num('rounds', 5, 1)),
    gen, pace: num('pace', 1000, 0), json: o.get('json') ?? null,
  };
}

const started = Date.now();
function log(msg: string): void {
  process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${msg}\n`);
}

interface Result {
  round: number;
  setup: Setup;
  nodes: number;
  workers: number;
  subs: number;
  rate: number;
  p50_ms: number;
  p99_ms: number;
  delivered: number;
  expected: number;
  fanout_msgs_per_s: number;
  /** % of a core per role over the latency window, then over the fan-out window. */
  cpu_latency: Record<string, number>;
  cpu_fanout: Record<string, number>;
}

/**
 * Where the machine's CPU goes in a window, per role: each node's primary thread and its
 * other threads (shards, libuv), the backend, the load generators, the publisher.
 */
class CpuProbe {
  constructor(private readonly roles: [string, number[], 'all' | 'main' | 'others'][]) {}

  take(): { t: number; us: Record<string, number> } {
    const us: Record<string, number> = {};
    for (const [role, pids, part] of this.roles) {
      let sum = 0;
      for (const pid of pids) {
        if (part === 'all') { sum += processCpuUs(pid); continue; }
        const main = threadCpuUs(pid, pid);
        sum += part === 'main' ? main : processCpuUs(pid) - main;
      }
      us[role] = sum;
    }
    return { t: performance.now() * 1000, us };
  }

  static pct(a: { t: number; us: Record<string, number> }, b: { t: number; us: Record<string, number> }): Record<string, number> {
    const out: Record<string, number> = {};
    let total = 0;
    for (const k of Object.keys(a.us)) {
      out[k] = Math.round(((b.us[k] - a.us[k]) / (b.t - a.t)) * 1000) / 10;
      total += out[k];
    }
    out.total = Math.round(total * 10) / 10;
    return out;
  }
}

const servers: RunningTarget[] = [];
const backends: { stop(): Promise<void>; readonly pid: number | null }[] = [];

async function backendEnv(setup: Setup): Promise<Record<string, string>> {
  if (setup === 'redis') {
    const r = await RedisServer.start();
    backends.push(r);
    return { ADAPTER_DRIVER: 'redis', DATABASE_REDIS_HOST: '127.0.0.1', DATABASE_REDIS_PORT: String(r.port) };
  }
  if (setup === 'nats') {
    const n = await NatsServer.start(undefined, { jetstream: false });
    backends.push(n);
    return { ADAPTER_DRIVER: 'nats', NATS_SERVERS: n.url };
  }
  return {};
}

/** The subscribers of one node, in one generator process of either kind. */
interface Subscribers {
  readonly pids: number[];
  snapshot(latency: boolean, reset: boolean): Promise<{ msgs: number; latency: Histogram | null }>;
  /** The C generator batches its reads in the fan-out window (wsrecv.c "pace"); the Node one cannot. */
  pace(us: number): Promise<void>;
  drain(quietMs: number, maxMs: number): Promise<unknown>;
  close(): Promise<void>;
}

/**
 * The subscribers, split evenly over the nodes' ports. The C generator is one process in
 * every setup (connection i to node i mod n), so the generator's own cost per message is
 * the same with one node and with two; the Node generator runs one process per node.
 */
async function subscribers(gen: 'c' | 'node', ports: number[], subs: number): Promise<Subscribers[]> {
  if (gen === 'c') {
    const p = CGenPool.start({ host: '127.0.0.1', ports, channel: 'lat0-0', connections: subs, procs: 1, concurrency: 100 });
    try {
      const c = await p.connect(30_000);
      if (c.subsConfirmed !== subs) throw new Error(`${c.subsConfirmed} of ${subs} subscribers subscribed (${c.established} connected, ${c.failed} failed)`);
    } catch (err) {
      await p.close();
      throw err;
    }
    return [p];
  }
  const out: Subscribers[] = [];
  try {
    for (let i = 0; i < ports.length; i++) {
      out.push(await nodePool(ports[i], Math.floor(subs / ports.length) + (i < subs % ports.length ? 1 : 0)));
    }
  } catch (err) {
    for (const p of out) await p.close();
    throw err;
  }
  return out;
}

async function nodePool(port: number, subs: number): Promise<Subscribers> {
  const p = await GenPool.start({
    host: '127.0.0.1', port, connections: subs, procs: 1, minProcs: 1, channels: { prefix: 'lat', perConn: 1, mod: 1 },
    latency: true, subscribeOnConnect: true, srcAddrs: [], concurrency: 100, socketsPerProc: subs,
  });
  const c = await p.connect(30_000);
  if (c.subsConfirmed !== subs) throw new Error(`${c.subsConfirmed} of ${subs} subscribers subscribed: ${JSON.stringify(c.errors)}`);
  return {
    pids: p.gens.map((g) => g.proc.pid).filter((x): x is number => typeof x === 'number'),
    snapshot: (latency, reset) => p.snapshot(latency, reset),
    pace: async () => {},
    drain: (q, m) => p.drain(q, m),
    close: () => p.close(),
  };
}

async function snap(pools: Subscribers[], latency: boolean, reset: boolean): Promise<{ msgs: number; latency: Histogram | null }[]> {
  return Promise.all(pools.map((p) => p.snapshot(latency, reset)));
}

async function oneSetup(setup: Setup, o: Opts, tmpDir: string, round: number): Promise<Result> {
  const env = await backendEnv(setup);
  const nodes = setup === 'one' ? 1 : 2;
  const workers = nodes === 1 ? o.workers : o.clusterWorkers;
  const ports: number[] = [];
  for (let i = 0; i < nodes; i++) {
    const port = await freePort();
    servers.push(await ringcastTarget(workers, { env }).start({ port, tmpDir }));
    ports.push(port);
  }
  if (nodes === 2) await sleep(500); // the nodes' first heartbeats
  const pools: Subscribers[] = [];
  let pub: Publisher | null = null;
  try {
    pools.push(...await subscribers(o.gen, ports, o.subs));
    pub = await Publisher.start({ host: '127.0.0.1', port: ports[0], appId: APP.id, key: APP.key, secret: APP.secret, conns: o.conns, pipeline: 1, srcAddr: '127.0.0.1' });
    const pids = (xs: { pid?: number | null }[]): number[] => xs.map((x) => x.pid).filter((p): p is number => typeof p === 'number');
    const roles: [string, number[], 'all' | 'main' | 'others'][] = [];
    servers.forEach((srv, i) => {
      roles.push([`node${i} primary`, [srv.pid], 'main'], [`node${i} other threads`, [srv.pid], 'others']);
    });
    if (backends.length > 0) roles.push(['backend', pids(backends), 'all']);
    roles.push(['generators', pools.flatMap((p) => p.pids), 'all']);
    roles.push(['publisher', pids(pub.children.map((c) => c.proc)), 'all']);
    const probe = new CpuProbe(roles);
    const run = { channelPrefix: 'lat0-', channelCount: 1, timestamp: true, payloadBytes: o.payload, event: 'bench' };
    // warm-up: JIT, connections, the backend path
    await pub.run({ ...run, rate: o.rate, maxDurationMs: 30_000 });
    await sleep(1000);
    const warm = await pub.stop(); // the publisher's counts add up over its runs
    for (const p of pools) await p.drain(300, 5000);
    const before = (await snap(pools, true, true)).reduce((a, s) => a + s.msgs, 0);
    await pub.run({ ...run, rate: o.rate, maxDurationMs: o.seconds * 1000 + 30_000 });
    const l0 = probe.take();
    await sleep(o.seconds * 1000);
    const l1 = probe.take();
    const sent = await pub.stop();
    for (const p of pools) await p.drain(500, 10_000);
    const after = await snap(pools, true, false);
    const delivered = after.reduce((a, s) => a + s.msgs, 0) - before;
    const expected = (sent.ok - warm.ok) * o.subs;
    const lat = after[0].latency!;
    for (const s of after.slice(1)) lat.addSparse(s.latency!.toSparse());
    if (delivered < expected) throw new Error(`${setup}: ${expected - delivered} of ${expected} deliveries missing`);

    // fan-out: closed loop
    for (const p of pools) await p.pace(o.pace);
    const f0 = (await snap(pools, false, false)).reduce((a, s) => a + s.msgs, 0);
    const t0 = Date.now();
    const c0 = probe.take();
    await pub.run({ ...run, timestamp: false, rate: 0, maxDurationMs: o.fanoutSeconds * 1000 + 30_000 });
    await sleep(o.fanoutSeconds * 1000);
    const f1 = (await snap(pools, false, false)).reduce((a, s) => a + s.msgs, 0);
    const t1 = Date.now();
    const c1 = probe.take();
    await pub.stop();
    return {
      round, setup, nodes, workers, subs: o.subs, rate: o.rate,
      p50_ms: lat.quantile(0.5) / 1000, p99_ms: lat.quantile(0.99) / 1000,
      delivered, expected, fanout_msgs_per_s: Math.round(((f1 - f0) / (t1 - t0)) * 1000),
      cpu_latency: CpuProbe.pct(l0, l1), cpu_fanout: CpuProbe.pct(c0, c1),
    };
  } finally {
    await pub?.close();
    for (const p of pools) await p.close();
    for (const s of servers.splice(0)) await s.stop();
    for (const b of backends.splice(0)) await b.stop();
  }
}

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ringcast-bench-cluster-'));
  const results: Result[] = [];
  try {
    for (let round = 1; round <= o.rounds; round++) {
      for (const setup of o.setups) {
        log(`round ${round}/${o.rounds}, ${setup}: ${setup === 'one' ? `1 node × ${o.workers}` : `2 nodes × ${o.clusterWorkers}`} shards, ${o.subs} subscribers, ${o.rate} publishes/s`);
        const r = await oneSetup(setup, o, tmpDir, round);
        results.push(r);
        log(`${setup}: p50 ${r.p50_ms.toFixed(2)} ms, p99 ${r.p99_ms.toFixed(2)} ms, fan-out ${r.fanout_msgs_per_s} msgs/s`);
        log(`  % of a core, latency window: ${JSON.stringify(r.cpu_latency)}`);
        log(`  % of a core, fan-out window: ${JSON.stringify(r.cpu_fanout)}`);
        if (o.json) fs.appendFileSync(o.json, JSON.stringify(r) + '\n');
      }
    }
  } finally {
    fs.rmSync(tmpDir, { recursive: true, force: true });
  }
  const median = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  };
  const list = (xs: number[], f: (x: number) => string) => xs.map(f).join(' / ');
  process.stdout.write(`\nPer round (${o.rounds}), then the median; overhead and ratio against the one node of the same round.\n\n`);
  process.stdout.write('| setup | nodes × shards | p50 ms | p99 ms | fan-out msgs/s | p50 − one node | fan-out ÷ one node |\n|---|---|---|---|---|---|---|\n');
  for (const setup of o.setups) {
    const rs = results.filter((r) => r.setup === setup);
    const ones = rs.map((r) => results.find((x) => x.setup === 'one' && x.round === r.round));
    const over = ones.every((x) => x) ? rs.map((r, i) => r.p50_ms - ones[i]!.p50_ms) : null;
    const ratio = ones.every((x) => x) ? rs.map((r, i) => r.fanout_msgs_per_s / ones[i]!.fanout_msgs_per_s) : null;
    const p50 = rs.map((r) => r.p50_ms);
    const p99 = rs.map((r) => r.p99_ms);
    const fan = rs.map((r) => r.fanout_msgs_per_s);
    process.stdout.write(`| ${setup} | ${rs[0].nodes} × ${rs[0].workers} | ${list(p50, (x) => x.toFixed(1))} (**${median(p50).toFixed(1)}**) | ${list(p99, (x) => x.toFixed(0))} (**${median(p99).toFixed(0)}**) | ` +
      `${list(fan, (x) => `${(x / 1000).toFixed(0)} k`)} (**${(median(fan) / 1000).toFixed(0)} k**) | ` +
      `${over && setup !== 'one' ? `${list(over, (x) => x.toFixed(1))} (**${median(over).toFixed(1)} ms**)` : '–'} | ` +
      `${ratio && setup !== 'one' ? `${list(ratio, (x) => x.toFixed(2))} (**${median(ratio).toFixed(2)}×**)` : '–'} |\n`);
  }
}

main().catch((err: Error) => {
  process.stderr.write(`bench/cluster: ${err.stack ?? err.message}\n`);
  killAllNow();
  process.exit(1);
});
