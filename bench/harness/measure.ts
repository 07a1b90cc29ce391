// How a publishing window is measured, with either publisher: the harness's Node
// publisher (publisher.ts: every scenario) or wrk replaying pre-signed requests
// (wrk.ts: the API-only and many-channels scenarios unless --publisher node).
//
// Timing: every window is measured by the processes that count (load generators, the
// publisher) with the machine's monotonic clock, between two snapshots the orchestrator
// asks for after a warm-up. Rates are per process (count delta / own time delta), summed.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Histogram } from './histogram';
import { Publisher, sleep, type GenPool, type PoolSnapshot } from './load';
import type { PubRun } from './protocol';
import { nowUs } from './protocol';
import type { BenchOptions, Result } from './scenarios';
import { APP, machineJiffies, processCpuUs, type RunningTarget } from './target';
import { signedPublishes, startWrk, writePool, type WrkResult } from './wrk';

export function round(v: number, digits = 3): number {
  if (!Number.isFinite(v)) return v;
  const p = 10 ** digits;
  return Math.round(v * p) / p;
}

function sumRate(a: PoolSnapshot, b: PoolSnapshot): number {
  let r = 0;
  for (let i = 0; i < a.per.length; i++) {
    const dt = (b.per[i].t - a.per[i].t) / 1e6;
    if (dt > 0) r += (b.per[i].msgs - a.per[i].msgs) / dt;
  }
  return r;
}

function maxCpuPct(a: { cpuUs: number; t: number }[], b: { cpuUs: number; t: number }[]): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    const dt = b[i].t - a[i].t;
    if (dt > 0) m = Math.max(m, ((b[i].cpuUs - a[i].cpuUs) / dt) * 100);
  }
  return m;
}

function ms(h: Histogram, q: number): number {
  return round(h.quantile(q) / 1000, 3);
}

/**
 * Server CPU µs per accepted publish in the window (all its threads). On this shared
 * machine a target's throughput is often the share of the cores the scheduler gave it
 * (machine_cpu_pct at 100); its CPU per publish is much steadier and says what it costs.
 */
function cpuPerPublish(r: Result): number {
  return r.api_req_per_s > 0 ? round((r.server_cpu_pct / 100) * 1e6 / r.api_req_per_s, 2) : NaN;
}

function errorCount(e: Record<string, number>): number {
  return Object.values(e).reduce((a, b) => a + b, 0);
}


/**
 * Publishes with run for warmup + duration and measures the window after the warm-up:
 * delivered messages/s (sum over generator processes), API requests/s, API round trip,
 * and (when latency) end-to-end latency; then drains and checks nothing was lost.
 */
export async function measurePublish(
  t: RunningTarget, o: BenchOptions, pool: GenPool | null, run: PubRun, durationS: number,
  recipientsPerPublish: number, latency: boolean,
): Promise<Result> {
  const pub = await Publisher.start({
    host: o.host, port: t.port, appId: APP.id, key: APP.key, secret: APP.secret,
    conns: o.apiConns, pipeline: o.pipeline, srcAddr: '127.0.0.1',
  }, o.pubProcs);
  try {
    const base = pool ? await pool.snapshot() : null;
    await pub.run(run);
    await sleep(o.warmupS * 1000);
    const cpu0 = processCpuUs(t.pid);
    const m0 = machineJiffies();
    const t0 = nowUs();
    const [g0, p0] = await Promise.all([pool ? pool.snapshot(latency, true) : null, pub.snapshot(true)]);
    await sleep(durationS * 1000);
    const [g1, p1] = await Promise.all([pool ? pool.snapshot(latency, false) : null, pub.snapshot(false)]);
    const cpu1 = processCpuUs(t.pid);
    const m1 = machineJiffies();
    const t1 = nowUs();
    const fin = await pub.stop();
    const drained = pool ? await pool.drain(300, 3000) : null;

    let apiRate = 0;
    for (let i = 0; i < p0.per.length; i++) apiRate += (p1.per[i].ok - p0.per[i].ok) / ((p1.per[i].t - p0.per[i].t) / 1e6);
    const r: Result = {
      api_req_per_s: round(apiRate, 1),
      api_p50_ms: ms(p1.latency, 0.5),
      api_p99_ms: ms(p1.latency, 0.99),
      api_ok_total: fin.ok,
      api_non2xx: errorCount(fin.status),
      api_errors: errorCount(fin.errors),
      server_cpu_pct: round(((cpu1 - cpu0) / (t1 - t0)) * 100, 1),
      machine_cpu_pct: round(((m1[0] - m0[0]) / (m1[1] - m0[1])) * 100, 1),
      publisher_cpu_pct: round(maxCpuPct(p0.per, p1.per), 1),
    };
    r.server_cpu_us_per_publish = cpuPerPublish(r);
    if (run.rate > 0) r.publisher_max_backlog = fin.lagging;
    for (const [k, v] of Object.entries(fin.status)) r[`api_status_${k}`] = v;
    for (const [k, v] of Object.entries(fin.errors)) r[`api_error_${k}`] = v;
    if (pool && g0 && g1 && drained && base) {
      r.delivered_per_s = round(sumRate(g0, g1), 1);
      const expected = fin.ok * recipientsPerPublish;
      r.delivered_total = drained.msgs - base.msgs;
      r.delivery_ratio = expected > 0 ? round(r.delivered_total / expected, 4) : NaN;
      r.loadgen_cpu_pct_max = round(maxCpuPct(g0.per, g1.per), 1);
      r.ws_closed = drained.closedAfterOpen;
      if (latency && g1.latency) {
        r.p50_ms = ms(g1.latency, 0.5);
        r.p90_ms = ms(g1.latency, 0.9);
        r.p99_ms = ms(g1.latency, 0.99);
        r.max_ms = ms(g1.latency, 1);
        r.mean_ms = round(g1.latency.mean() / 1000, 3);
        r.latency_samples = g1.latency.total;
      }
    }
    return r;
  } finally {
    await pub.close();
  }
}


/** The publishes of a wrk run: request i goes to channelOf(i); poolSize distinct requests. */
export interface WrkPublish {
  channelOf: (i: number) => string;
  poolSize: number;
}

function wrkOk(r: WrkResult): number {
  return r.requests - r.status_errors;
}

/**
 * The same measurement with wrk as the publisher. wrk counts whole runs only (no window
 * of its own) and whole seconds, so: a warm-up run of warmupS (rounded up), then the
 * measured run of durationS + 1 s; the server's CPU, the machine's, wrk's and the
 * subscribers' deliveries are read over [0.5 s, 0.5 s + durationS] of it, the API rate
 * and round trip over the whole measured run (both are steady after the warm-up).
 * `api_req_per_s` counts answers wrk did not count as errors (status < 400): every
 * target answers a publish it accepted with 200.
 */
export async function measureWrk(
  t: RunningTarget, o: BenchOptions, pool: GenPool | null, pub: WrkPublish, durationS: number,
  recipientsPerPublish: number,
): Promise<Result> {
  if (o.wrkBin === null) throw new Error('wrk is not installed (make bench-deps, or --publisher node)');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ringcast-wrk-'));
  try {
    const poolFile = path.join(dir, 'pool.bin');
    writePool(poolFile, signedPublishes({
      host: o.host, port: t.port, appId: APP.id, key: APP.key, secret: APP.secret, event: 'bench',
      payloadBytes: o.payloadBytes, channelOf: pub.channelOf, size: pub.poolSize,
    }));
    const common = { bin: o.wrkBin, url: `http://${o.host}:${t.port}`, poolFile, threads: o.wrkThreads, conns: o.apiConns };
    const base = pool ? await pool.snapshot() : null;
    const warm = o.warmupS > 0 ? await startWrk({ ...common, durationS: o.warmupS }).done : null;
    const run = startWrk({ ...common, durationS: durationS + 1 });
    await sleep(500);
    const cpu0 = processCpuUs(t.pid);
    const w0 = processCpuUs(run.pid);
    const m0 = machineJiffies();
    const t0 = nowUs();
    const g0 = pool ? await pool.snapshot() : null;
    await sleep(durationS * 1000);
    const g1 = pool ? await pool.snapshot() : null;
    const cpu1 = processCpuUs(t.pid);
    const w1 = processCpuUs(run.pid);
    const m1 = machineJiffies();
    const t1 = nowUs();
    const res = await run.done;
    const drained = pool ? await pool.drain(300, 3000) : null;

    const both = warm ? [warm, res] : [res];
    const sum = (f: (r: WrkResult) => number): number => both.reduce((a, r) => a + f(r), 0);
    const r: Result = {
      api_req_per_s: round(wrkOk(res) / (res.duration_us / 1e6), 1),
      api_p50_ms: round(res.p50_us / 1000, 3),
      api_p99_ms: round(res.p99_us / 1000, 3),
      api_ok_total: sum(wrkOk),
      api_non2xx: sum((x) => x.status_errors),
      api_errors: sum((x) => x.connect_errors + x.read_errors + x.write_errors + x.timeouts),
      server_cpu_pct: round(((cpu1 - cpu0) / (t1 - t0)) * 100, 1),
      machine_cpu_pct: round(((m1[0] - m0[0]) / (m1[1] - m0[1])) * 100, 1),
      // wrk is one process: all its threads, % of one core
      publisher_cpu_pct: round(((w1 - w0) / (t1 - t0)) * 100, 1),
      wrk_threads: Math.max(1, Math.min(o.wrkThreads, o.apiConns)),
    };
    r.server_cpu_us_per_publish = cpuPerPublish(r);
    for (const [k, v] of [['connect', sum((x) => x.connect_errors)], ['read', sum((x) => x.read_errors)],
      ['write', sum((x) => x.write_errors)], ['timeout', sum((x) => x.timeouts)]] as const) {
      if (v > 0) r[`api_error_${k}`] = v;
    }
    if (pool && g0 && g1 && drained && base) {
      r.delivered_per_s = round(sumRate(g0, g1), 1);
      const expected = r.api_ok_total * recipientsPerPublish;
      r.delivered_total = drained.msgs - base.msgs;
      r.delivery_ratio = expected > 0 ? round(r.delivered_total / expected, 4) : NaN;
      r.loadgen_cpu_pct_max = round(maxCpuPct(g0.per, g1.per), 1);
      r.ws_closed = drained.closedAfterOpen;
    }
    return r;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
