// The orchestrator's handles on its load: a pool of load-generator processes (each its
// own fd table, so each stays below the per-process open-files limit) and a publisher.

import { Histogram } from './histogram';
import { Child } from './procs';
import type { ChannelSpec, GenCommand, GenReply, GenStats, PubCommand, PubInit, PubReply, PubRun, PubStats } from './protocol';
import { APP } from './target';

import fs from 'node:fs';

/** The soft open-files limit of this process (children inherit it); Infinity if unknown. */
export function openFilesLimit(): number {
  try {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
    return m === null || m[1] === 'unlimited' ? Infinity : Number(m[1]);
  } catch {
    return Infinity;
  }
}

/**
 * Sockets one generator process holds by default: 9,500, so that 19,000 connections take
 * two processes (also the most that fits twice under this machine's 20,000 open files).
 * --sockets-per-proc raises it on hosts with a higher limit.
 */
export const DEFAULT_SOCKETS_PER_PROC = 9_500;

export interface GenPoolOptions {
  host: string;
  port: number;
  connections: number;
  /** Processes; 0 = enough for socketsPerProc each, at least minProcs. */
  procs: number;
  minProcs: number;
  channels: ChannelSpec;
  latency: boolean;
  subscribeOnConnect: boolean;
  srcAddrs: string[];
  concurrency: number;
  socketsPerProc: number;
  /** Extra fields of every subscribe's data (GenInit.subscribeData). */
  subscribeData?: Record<string, unknown>;
}

export interface PoolSnapshot {
  per: GenStats[];
  msgs: number;
  established: number;
  failed: number;
  closedAfterOpen: number;
  subsConfirmed: number;
  subsFailed: number;
  errors: Record<string, number>;
  latency: Histogram | null;
}

function sumErrors(list: Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const e of list) for (const [k, v] of Object.entries(e)) out[k] = (out[k] ?? 0) + v;
  return out;
}

export class GenPool {
  readonly gens: Child<GenCommand, GenReply>[] = [];

  private constructor(readonly opts: GenPoolOptions) {}

  static async start(o: GenPoolOptions): Promise<GenPool> {
    const procs = o.procs > 0 ? o.procs : Math.max(o.minProcs, Math.ceil(o.connections / o.socketsPerProc));
    const n = Math.max(1, Math.min(procs, o.connections));
    const room = openFilesLimit() - 200; // fds a Node process uses besides its sockets, with margin
    const pool = new GenPool(o);
    let first = 0;
    const inits: Promise<GenReply>[] = [];
    for (let i = 0; i < n; i++) {
      const count = Math.floor(o.connections / n) + (i < o.connections % n ? 1 : 0);
      if (count > room) throw new Error(`${count} sockets in one generator process would pass its open-files limit (${openFilesLimit()}): use more --gen-procs`);
      const g = new Child<GenCommand, GenReply>(`loadgen ${i}`, 'loadgen.js');
      pool.gens.push(g);
      inits.push(g.request({
        type: 'init',
        init: {
          host: o.host, port: o.port,
          path: `/app/${APP.key}?protocol=7&client=js&version=8.4.0&flash=false`,
          srcAddrs: o.srcAddrs, concurrency: o.concurrency, latency: o.latency,
          subscribeOnConnect: o.subscribeOnConnect, channels: o.channels, subscribeData: o.subscribeData, firstIndex: first, count,
        },
      }, 10_000));
      first += count;
    }
    await Promise.all(inits);
    return pool;
  }

  private summarise(replies: GenReply[], withLatency: boolean): PoolSnapshot {
    const per = replies.map((r) => r.stats);
    let latency: Histogram | null = null;
    if (withLatency) {
      latency = new Histogram();
      for (const r of replies) if (r.latency) latency.addSparse(r.latency);
    }
    return {
      per,
      msgs: per.reduce((a, s) => a + s.msgs, 0),
      established: per.reduce((a, s) => a + s.established, 0),
      failed: per.reduce((a, s) => a + s.failed, 0),
      closedAfterOpen: per.reduce((a, s) => a + s.closedAfterOpen, 0),
      subsConfirmed: per.reduce((a, s) => a + s.subsConfirmed, 0),
      subsFailed: per.reduce((a, s) => a + s.subsFailed, 0),
      errors: sumErrors(per.map((s) => s.errors)),
      latency,
    };
  }

  /** Opens every connection (and subscribes if subscribeOnConnect); resolves when done or timed out. */
  async connect(timeoutMs: number): Promise<PoolSnapshot & { timedOut: boolean }> {
    const replies = await Promise.all(this.gens.map((g) => g.request({ type: 'connect', timeoutMs }, timeoutMs + 10_000)));
    return { ...this.summarise(replies, false), timedOut: replies.some((r) => r.timedOut === true) };
  }

  /** Sends every connection's subscribes; resolves when all are answered or timed out. */
  async subscribe(timeoutMs: number): Promise<PoolSnapshot & { timedOut: boolean }> {
    const replies = await Promise.all(this.gens.map((g) => g.request({ type: 'subscribe', timeoutMs }, timeoutMs + 10_000)));
    return { ...this.summarise(replies, false), timedOut: replies.some((r) => r.timedOut === true) };
  }

  async snapshot(latency = false, resetLatency = false): Promise<PoolSnapshot> {
    const replies = await Promise.all(this.gens.map((g) => g.request({ type: 'snapshot', latency, resetLatency }, 10_000)));
    return this.summarise(replies, latency);
  }

  /** Waits until no new message arrived for quietMs (at most maxMs); returns the last snapshot. */
  async drain(quietMs: number, maxMs: number): Promise<PoolSnapshot> {
    return drainQuiet(() => this.snapshot(), quietMs, maxMs);
  }

  async close(): Promise<void> {
    await Promise.all(this.gens.map(async (g) => {
      try {
        await g.request({ type: 'close' }, 15_000);
      } catch { /* exited already */ }
      await Promise.race([g.exited, sleep(3000)]);
      await g.kill(1000);
    }));
  }
}

/** One or more publisher processes driven as one (their counts add up; t and cpuUs of a
 *  merged PubStats are the latest / the busiest process's). */
export class Publisher {
  private constructor(readonly children: Child<PubCommand, PubReply>[]) {}

  /** procs processes share init.conns connections (at least one each). */
  static async start(init: PubInit, procs = 1): Promise<Publisher> {
    const n = Math.max(1, Math.min(procs, init.conns));
    const children: Child<PubCommand, PubReply>[] = [];
    for (let i = 0; i < n; i++) children.push(new Child<PubCommand, PubReply>(`publisher ${i}`, 'publisher.js'));
    const pub = new Publisher(children);
    try {
      await Promise.all(children.map((c, i) => c.request({
        type: 'init',
        init: { ...init, conns: Math.floor(init.conns / n) + (i < init.conns % n ? 1 : 0) },
      }, 10_000)));
    } catch (err) {
      await pub.close();
      throw err;
    }
    return pub;
  }

  /** A rate is split evenly over the processes. */
  async run(r: PubRun): Promise<void> {
    const n = this.children.length;
    await Promise.all(this.children.map((c) => c.request({ type: 'start', run: { ...r, rate: r.rate / n } }, 10_000)));
  }

  /** Each process's stats, their sum, and the merged round-trip histogram. */
  async snapshot(resetLatency: boolean): Promise<{ per: PubStats[]; stats: PubStats; latency: Histogram }> {
    const replies = await Promise.all(this.children.map((c) => c.request({ type: 'snapshot', resetLatency }, 10_000)));
    const h = new Histogram();
    for (const r of replies) if (r.latency) h.addSparse(r.latency);
    const per = replies.map((r) => r.stats);
    return { per, stats: mergePubStats(per), latency: h };
  }

  /** Stops publishing; resolves once in-flight requests are answered (≤ 2 s). */
  async stop(): Promise<PubStats> {
    const replies = await Promise.all(this.children.map((c) => c.request({ type: 'stop' }, 15_000)));
    return mergePubStats(replies.map((r) => r.stats));
  }

  async close(): Promise<void> {
    await Promise.all(this.children.map((c) => c.kill(1000)));
  }
}

function mergePubStats(list: PubStats[]): PubStats {
  const out: PubStats = { sent: 0, ok: 0, status: {}, errors: {}, inFlight: 0, lagging: 0, cpuUs: 0, t: 0 };
  for (const s of list) {
    out.sent += s.sent;
    out.ok += s.ok;
    out.inFlight += s.inFlight;
    out.lagging += s.lagging;
    out.t = Math.max(out.t, s.t);
    out.cpuUs = Math.max(out.cpuUs, s.cpuUs);
  }
  out.status = sumErrors(list.map((s) => s.status));
  out.errors = sumErrors(list.map((s) => s.errors));
  return out;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Snapshots every 100 ms until no new message arrived for quietMs (at most maxMs); returns the last. */
export async function drainQuiet<S extends { msgs: number }>(snapshot: () => Promise<S>, quietMs: number, maxMs: number): Promise<S> {
  const until = Date.now() + maxMs;
  let last = await snapshot();
  let stableSince = Date.now();
  while (Date.now() < until) {
    await sleep(100);
    const s = await snapshot();
    if (s.msgs !== last.msgs) stableSince = Date.now();
    last = s;
    if (Date.now() - stableSince >= quietMs) break;
  }
  return last;
}
