// Tag filtering under load: N subscribers (default 10,000) on one channel, each with an
// equality filter {key: 'v', cmp: 'eq', val: String(i % 100)}, against the same N
// subscribers without a filter, on a fresh ringcast (tag_filtering.enabled) per run.
//
// Both variants deliver N messages per API request, so the publisher's work per delivered
// message is the same and the figure compares the server's delivery paths:
//   filtered    POST /batch_events with 100 events, event j tagged v=j: each event reaches
//               its 100 subscribers through the filter index and a ws.send each
//               (channels/filtered.ts); N deliveries per request;
//   unfiltered  POST /batch_events with 1 event tagged v=0: uWS's native topic publish to
//               all N; N deliveries per request.
// delivered_per_s is counted by the load generators (bench/harness/loadgen.ts); the issue's
// target is filtered ≥ 0.5 × unfiltered. Runs alternate (unfiltered, filtered, …), so a
// slow spell of this shared machine lands on both.
//
//   npx tsc -p . && node dist/bench/filters/filters.bench.js [--subs 10000] [--runs 3]
//     [--duration 6] [--warmup 1] [--workers 1] [--values 100] [--api-conns 16] [--shape eq|and]
// Bounded: each run has a 90 s connect / subscribe deadline and the publisher's own
// safety stop; --max-minutes (default 8) stops starting runs after that.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_SOCKETS_PER_PROC, GenPool } from '../harness/load';
import { measurePublish } from '../harness/measure';
import { killAllNow } from '../harness/procs';
import type { BenchOptions, Result } from '../harness/scenarios';
import { freePort } from '../harness/target';
import { ringcastTarget } from '../targets/ringcast';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return def;
  const v = Number(process.argv[i + 1]);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`--${name} needs a positive number`);
  return v;
}

const subs = arg('subs', 10_000);
const values = arg('values', 100);
const runs = arg('runs', 3);
const workers = arg('workers', 1);
const durationS = arg('duration', 6);
const maxMinutes = arg('max-minutes', 8);
/** --shape and: and(eq, ex) filters, served by the JavaScript index instead of native pair topics. */
const shape = (process.argv.includes('--shape') ? process.argv[process.argv.indexOf('--shape') + 1] : 'eq') as 'eq' | 'and';
if (shape !== 'eq' && shape !== 'and') throw new Error('--shape must be eq or and');
if (subs > 19_000) throw new Error('--subs: at most 19,000 connections per process on this machine');
if (values > 1000) throw new Error('--values: at most 1,000 (max_event_batch_size of the bench app)');

const opts = {
  host: '127.0.0.1',
  warmupS: arg('warmup', 1),
  apiConns: arg('api-conns', 16),
  pipeline: 1,
  pubProcs: 1,
  payloadBytes: 100,
  genProcs: 0,
  srcAddrs: Array.from({ length: 8 }, (_, i) => `127.0.0.${2 + i}`),
  concurrency: 256,
  socketsPerProc: DEFAULT_SOCKETS_PER_PROC,
} as BenchOptions;

const target = ringcastTarget(workers, {
  yaml: ['tag_filtering:', '  enabled: true'],
  appYaml: [`max_event_batch_size: ${values}`],
});

function log(m: string): void {
  process.stderr.write(`[filters] ${m}\n`);
}

async function oneRun(filtered: boolean, tmpDir: string): Promise<Result> {
  const srv = await target.start({ port: await freePort(), tmpDir });
  try {
    const pool = await GenPool.start({
      host: opts.host, port: srv.port, connections: subs, procs: 0, minProcs: 2,
      channels: { prefix: 'flt', perConn: 1, mod: 1, ...(filtered ? { filter: { key: 'v', values, shape } } : {}) },
      latency: false, subscribeOnConnect: true, srcAddrs: opts.srcAddrs, concurrency: opts.concurrency, socketsPerProc: opts.socketsPerProc,
    });
    try {
      const c = await pool.connect(90_000);
      if (c.subsConfirmed < subs) throw new Error(`subscribed ${c.subsConfirmed} of ${subs}; errors ${JSON.stringify(c.errors)}`);
      return await measurePublish(srv, opts, pool, {
        rate: 0, maxDurationMs: (opts.warmupS + durationS + 30) * 1000,
        channelPrefix: 'flt0-', channelCount: 1, timestamp: false, payloadBytes: opts.payloadBytes, event: 'bench',
        batch: filtered ? { size: values, tagKey: 'v' } : { size: 1, tagKey: 'v' },
      }, durationS, subs, false);
    } finally {
      await pool.close();
    }
  } finally {
    await srv.stop();
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

async function main(): Promise<void> {
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ringcast-filters-'));
  const started = Date.now();
  const got: Record<'filtered' | 'unfiltered', Result[]> = { filtered: [], unfiltered: [] };
  for (let r = 0; r < runs; r++) {
    for (const filtered of r % 2 === 0 ? [false, true] : [true, false]) {
      if (Date.now() - started > maxMinutes * 60_000) { log('time guard: no more runs'); break; }
      const kind = filtered ? 'filtered' : 'unfiltered';
      const res = await oneRun(filtered, tmpDir);
      got[kind].push(res);
      log(`run ${r + 1} ${kind}: ${Math.round(res.delivered_per_s)} delivered/s, ${Math.round(res.api_req_per_s)} req/s, ` +
        `delivery ratio ${res.delivery_ratio}, server CPU ${res.server_cpu_pct}%`);
      console.log(JSON.stringify({ bench: 'filters', kind, shape, run: r + 1, subs, values, workers, ...res }));
    }
  }
  const med = (k: 'filtered' | 'unfiltered', key: string) => median(got[k].map((x) => x[key]));
  const f = med('filtered', 'delivered_per_s');
  const u = med('unfiltered', 'delivered_per_s');
  console.log(`\n${subs} subscribers on one channel, filters: ${shape}, workers: ${workers}, ${durationS} s windows, medians of ${got.filtered.length} / ${got.unfiltered.length} runs`);
  // Server CPU per delivered message: every request delivers `subs` messages in both
  // variants. On a machine shared with other jobs the server gets what the scheduler
  // leaves it, so this ratio is steadier than the throughput one.
  const cpuPer1k = (k: 'filtered' | 'unfiltered') => med(k, 'server_cpu_us_per_publish') / (subs / 1000);
  console.log('| variant | delivered msgs/s | API req/s | events/s | server CPU % | server CPU µs per 1,000 delivered |');
  console.log('|---|---|---|---|---|---|');
  for (const k of ['unfiltered', 'filtered'] as const) {
    const events = med(k, 'api_req_per_s') * (k === 'filtered' ? values : 1);
    console.log(`| ${k} | ${Math.round(med(k, 'delivered_per_s'))} | ${Math.round(med(k, 'api_req_per_s'))} | ${Math.round(events)} | ${Math.round(med(k, 'server_cpu_pct') * 10) / 10} | ${Math.round(cpuPer1k(k))} |`);
  }
  console.log(`delivered msgs/s, filtered / unfiltered: ${(f / u).toFixed(2)}x (target >= 0.5x)`);
  console.log(`deliveries per server CPU second, filtered / unfiltered: ${(cpuPer1k('unfiltered') / cpuPer1k('filtered')).toFixed(2)}x`);
  fs.rmSync(tmpDir, { recursive: true, force: true });
}

main().catch((err: unknown) => {
  console.error(err);
  killAllNow();
  process.exit(1);
});
