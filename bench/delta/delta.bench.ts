// Delta compression, through a real server process (bench/README.md, "Delta compression"):
//
//  bandwidth  N subscribers of one channel, a realistic stream (1 KB order-book updates,
//             two levels changing per update), plain vs Fossil (and Xdelta3), with and
//             without a conflation key: bytes on the wire per subscriber. Filtered: the
//             same, for subscribers with a tag filter (sym = one of 8 symbols, each update
//             tagged with its symbol) against filtered plain ones: a filtered
//             subscriber's stream is the messages it receives (delta/shard.ts rule 8).
//  rate       N subscribers, closed-loop publisher for D seconds: delivered msgs/s,
//             plain vs Fossil delta subscribers, and the server's CPU per delivered message.
//
//   node dist/bench/delta/delta.bench.js [--subs 1000] [--messages 300] [--duration 10]
//        [--workers 1] [--runs 3] [--pool 1] [--interval 10] [--omit-algorithm] [--only bandwidth|rate]

import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import Pusher from 'pusher';
import { GenPool, Publisher, sleep } from '../harness/load';
import { killAllNow } from '../harness/procs';
import { APP, baseEnv, freePort, launchServer, processCpuUs, type RunningTarget } from '../harness/target';
import { ringcastRoot } from '../targets/ringcast';
import { Books, rng } from '../../test/delta/clients';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
}
const only = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1] : null;
const SUBS = arg('subs', 1000);
const MESSAGES = arg('messages', 300);
const DURATION = arg('duration', 10);
const WORKERS = arg('workers', 1);
const RUNS = arg('runs', 3);
const POOL = arg('pool', 1);
const INTERVAL = arg('interval', 10);
const OMIT = process.argv.includes('--omit-algorithm');

async function startServer(tmpDir: string): Promise<RunningTarget> {
  const port = await freePort();
  const file = path.join(tmpDir, `delta-${port}.yaml`);
  fs.writeFileSync(file, [
    'host: 127.0.0.1', `port: ${port}`, `workers: ${WORKERS}`, 'shutdown_grace_period: 3000',
    'log:', '  level: warn', 'tag_filtering:', '  enabled: true',
    'delta_compression:', `  pool_size: ${POOL}`, `  full_message_interval: ${INTERVAL}`, `  omit_delta_algorithm: ${OMIT}`,
    'apps:', `  - id: ${APP.id}`, `    key: ${APP.key}`, `    secret: ${APP.secret}`,
    '    max_client_events_per_second: 10000000',
    '    channel_delta_compression:',
    "      'keyed-*': { enabled: true, conflation_key: sym, max_messages_per_key: 10, max_conflation_keys: 100 }",
    '',
  ].join('\n'));
  const root = ringcastRoot();
  return launchServer({
    name: 'ringcast-delta', cmd: process.execPath, args: [path.join(root, 'bin', 'ringcast.js'), 'start', '--config', file],
    cwd: root, env: baseEnv(), port, tmpDir, readyPath: '/up', stopGraceMs: 6000, readyTimeoutMs: 120_000,
  });
}

type Mode = 'plain' | 'fossil' | 'xdelta3';
/** The filtered subscribers' symbol, one of SYMBOLS. */
const FILTER = { key: 'sym', cmp: 'eq', val: 'GBPUSD' };
const SYMBOLS = ['EURUSD', 'GBPUSD', 'USDJPY', 'EURGBP', 'AUDUSD', 'USDCHF', 'NZDUSD', 'USDCAD'];
const subData = (m: Mode, filtered = false) => ({ ...(m === 'plain' ? {} : { delta: m }), ...(filtered ? { filter: FILTER } : {}) });

async function pool(srv: RunningTarget, mode: Mode, channel: string, filtered = false): Promise<GenPool> {
  const g = await GenPool.start({
    host: '127.0.0.1', port: srv.port, connections: SUBS, procs: 1, minProcs: 1,
    channels: { prefix: channel, perConn: 1, mod: 1 }, latency: false, subscribeOnConnect: true,
    srcAddrs: [], concurrency: 200, socketsPerProc: 20_000, subscribeData: subData(mode, filtered),
  });
  const c = await g.connect(60_000);
  if (c.subsConfirmed < SUBS) throw new Error(`only ${c.subsConfirmed} of ${SUBS} subscribed`);
  return g;
}

const bytesOf = async (g: GenPool) => (await g.snapshot()).per.reduce((a, s) => a + s.bytes, 0);

/** Bytes per subscriber for MESSAGES updates (symbols: 1 = no conflation key needed). */
async function bandwidth(srv: RunningTarget, mode: Mode, keyed: boolean): Promise<{ perSub: number; msgs: number }> {
  // a channel of its own per run: every run starts without sequencer state
  const channel = `${keyed ? 'keyed-' : 'open-'}${mode}-`;
  const full = `${channel}0-0`;
  const g = await pool(srv, mode, channel);
  try {
    const before = await bytesOf(g);
    const msgs0 = (await g.snapshot()).msgs;
    const sdk = new Pusher({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1', port: String(srv.port), useTLS: false, agent: new http.Agent({ keepAlive: true }) });
    const books = new Books(rng(42), 1000);
    const symbols = keyed ? ['EURUSD', 'GBPUSD', 'USDJPY', 'EURGBP', 'AUDUSD', 'USDCHF', 'NZDUSD', 'USDCAD'] : ['BTCUSD'];
    for (let i = 0; i < MESSAGES; i++) await sdk.trigger(full, 'book', books.update(symbols[i % symbols.length]));
    const end = await g.drain(500, 30_000);
    const after = await bytesOf(g);
    return { perSub: (after - before) / SUBS, msgs: (end.msgs - msgs0) / SUBS };
  } finally {
    await g.close();
  }
}

/**
 * Bytes per filtered subscriber: MESSAGES updates of each of SYMBOLS, interleaved and
 * tagged with their symbol, to subscribers that filter one symbol (no conflation key).
 */
async function bandwidthFiltered(srv: RunningTarget, mode: Mode): Promise<{ perSub: number; msgs: number }> {
  const channel = `filt-${mode}-`;
  const g = await pool(srv, mode, channel, true);
  try {
    const before = await bytesOf(g);
    const msgs0 = (await g.snapshot()).msgs;
    const sdk = new Pusher({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1', port: String(srv.port), useTLS: false, agent: new http.Agent({ keepAlive: true }) });
    const books = new Books(rng(42), 1000);
    for (let i = 0; i < MESSAGES * SYMBOLS.length; i++) {
      const sym = SYMBOLS[i % SYMBOLS.length];
      // the SDK's trigger has no `tags`: its signed POST to the events endpoint
      const body = { name: 'book', channel: `${channel}0-0`, data: books.update(sym), tags: { sym } };
      await sdk.post({ path: '/events', body: body as unknown as string }); // the SDK serialises it
    }
    const end = await g.drain(500, 30_000);
    const after = await bytesOf(g);
    return { perSub: (after - before) / SUBS, msgs: (end.msgs - msgs0) / SUBS };
  } finally {
    await g.close();
  }
}

/** Delivered msgs/s and server CPU µs per delivered message, closed-loop publisher. */
async function rate(srv: RunningTarget, mode: Mode): Promise<{ delivered: number; cpuPerMsgUs: number; published: number }> {
  const g = await pool(srv, mode, 'rate-');
  const pub = await Publisher.start({ host: '127.0.0.1', port: srv.port, appId: APP.id, key: APP.key, secret: APP.secret, conns: 2, pipeline: 2 });
  try {
    await pub.run({ rate: 0, maxDurationMs: (DURATION + 30) * 1000, channelPrefix: 'rate-0-', channelCount: 1, timestamp: false, payloadBytes: 1000, event: 'tick' });
    await sleep(1000); // warm-up
    const s0 = await g.snapshot();
    const c0 = processCpuUs(srv.pid);
    const th0 = threadCpu(srv.pid);
    const t0 = Date.now();
    await sleep(DURATION * 1000);
    const s1 = await g.snapshot();
    const c1 = processCpuUs(srv.pid);
    if (process.env.DELTA_BENCH_THREADS) process.stderr.write(`${mode} threads: ${busiest(th0, threadCpu(srv.pid)).join(', ')}\n`);
    const dt = (Date.now() - t0) / 1000;
    const st = await pub.stop();
    const delivered = (s1.msgs - s0.msgs) / dt;
    return { delivered, cpuPerMsgUs: (c1 - c0) / (s1.msgs - s0.msgs), published: st.ok };
  } finally {
    await pub.close();
    await g.close();
  }
}

/** CPU µs of each thread of a process by tid, with its name (/proc/<pid>/task). */
function threadCpu(pid: number): Map<string, { name: string; us: number }> {
  const out = new Map<string, { name: string; us: number }>();
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const s = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name = s.slice(s.indexOf('(') + 1, s.lastIndexOf(')'));
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      out.set(tid, { name, us: (Number(f[11]) + Number(f[12])) * 10_000 });
    } catch { /* thread gone */ }
  }
  return out;
}

/** The busiest threads between two threadCpu() snapshots: "name:tid µs". */
function busiest(a: Map<string, { name: string; us: number }>, b: Map<string, { name: string; us: number }>): string[] {
  return [...b].map(([tid, v]) => ({ tid, name: v.name, us: v.us - (a.get(tid)?.us ?? 0) }))
    .filter((x) => x.us > 0).sort((x, y) => y.us - x.us).slice(0, 6).map((x) => `${x.name}:${x.tid} ${Math.round(x.us / 1000)}ms`);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main(): Promise<void> {
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ringcast-delta-bench-'));
  const out: Record<string, unknown> = { subs: SUBS, messages: MESSAGES, duration: DURATION, workers: WORKERS, pool: POOL, full_message_interval: INTERVAL, omit_delta_algorithm: OMIT };
  const srv = await startServer(tmpDir);
  try {
    if (only !== 'rate') {
      for (const keyed of [false, true]) {
        const plain = await bandwidth(srv, 'plain', keyed);
        const fossil = await bandwidth(srv, 'fossil', keyed);
        const xdelta = await bandwidth(srv, 'xdelta3', keyed);
        const k = keyed ? 'bandwidth_keyed' : 'bandwidth';
        out[k] = {
          plain_bytes_per_sub: Math.round(plain.perSub), fossil_bytes_per_sub: Math.round(fossil.perSub), xdelta3_bytes_per_sub: Math.round(xdelta.perSub),
          fossil_ratio: +(fossil.perSub / plain.perSub).toFixed(3), xdelta3_ratio: +(xdelta.perSub / plain.perSub).toFixed(3),
          msgs_per_sub: [plain.msgs, fossil.msgs, xdelta.msgs],
        };
        process.stderr.write(`${k}: ${JSON.stringify(out[k])}\n`);
      }
      const plain = await bandwidthFiltered(srv, 'plain');
      const fossil = await bandwidthFiltered(srv, 'fossil');
      const xdelta = await bandwidthFiltered(srv, 'xdelta3');
      const open = out.bandwidth as { fossil_ratio: number; xdelta3_ratio: number };
      const fr = fossil.perSub / plain.perSub;
      const xr = xdelta.perSub / plain.perSub;
      out.bandwidth_filtered = {
        plain_bytes_per_sub: Math.round(plain.perSub), fossil_bytes_per_sub: Math.round(fossil.perSub), xdelta3_bytes_per_sub: Math.round(xdelta.perSub),
        fossil_ratio: +fr.toFixed(3), xdelta3_ratio: +xr.toFixed(3),
        // against the unfiltered subscribers' ratio (1 = the same compression)
        fossil_vs_unfiltered: +(fr / open.fossil_ratio).toFixed(3), xdelta3_vs_unfiltered: +(xr / open.xdelta3_ratio).toFixed(3),
        msgs_per_sub: [plain.msgs, fossil.msgs, xdelta.msgs],
      };
      process.stderr.write(`bandwidth_filtered: ${JSON.stringify(out.bandwidth_filtered)}\n`);
    }
    if (only !== 'bandwidth') {
      const rows: { plain: number; fossil: number; cpuPlain: number; cpuFossil: number }[] = [];
      for (let r = 0; r < RUNS; r++) {
        // alternate the order: a slow spell of this shared machine hits both alike
        const first: Mode = r % 2 === 0 ? 'plain' : 'fossil';
        const a = await rate(srv, first);
        const b = await rate(srv, first === 'plain' ? 'fossil' : 'plain');
        const [p, f] = first === 'plain' ? [a, b] : [b, a];
        rows.push({ plain: p.delivered, fossil: f.delivered, cpuPlain: p.cpuPerMsgUs, cpuFossil: f.cpuPerMsgUs });
        process.stderr.write(`rate run ${r + 1}: plain ${Math.round(p.delivered)}/s (${p.cpuPerMsgUs.toFixed(2)} µs CPU/msg), fossil ${Math.round(f.delivered)}/s (${f.cpuPerMsgUs.toFixed(2)} µs CPU/msg)\n`);
      }
      out.rate = {
        plain_msgs_per_s: Math.round(median(rows.map((x) => x.plain))),
        fossil_msgs_per_s: Math.round(median(rows.map((x) => x.fossil))),
        ratio: +median(rows.map((x) => x.fossil / x.plain)).toFixed(3),
        server_cpu_us_per_msg: { plain: +median(rows.map((x) => x.cpuPlain)).toFixed(3), fossil: +median(rows.map((x) => x.cpuFossil)).toFixed(3) },
        runs: rows,
      };
    }
  } finally {
    await srv.stop();
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  killAllNow();
  process.exit(1);
});
