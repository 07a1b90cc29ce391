// Subscribers of one channel in C processes (wsrecv.c), for benchmarks whose Node load
// generator (loadgen.ts) would take too much of the machine: bench/cluster/ receives
// 1,000 × 1,000 messages per second on the same 2 cores as the servers. Same counts and
// latency histogram as GenPool, for the subset of its options that bench uses.
//
// The C source is compiled on first use (gcc -O2, into dist/, again when the source is
// newer); `make bench-deps` installs gcc when it is missing.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { Histogram } from './histogram';
import { drainQuiet, sleep } from './load';
import { track } from './procs';
import { APP } from './target';

const SOURCE = path.resolve(__dirname, '../../../bench/harness/wsrecv.c');
const BINARY = path.join(__dirname, 'wsrecv');

/** Compiles wsrecv.c when the binary is missing or older than the source; returns its path. */
export function wsrecvBinary(): string {
  const src = fs.statSync(SOURCE);
  if (fs.existsSync(BINARY) && fs.statSync(BINARY).mtimeMs >= src.mtimeMs) return BINARY;
  const r = spawnSync('gcc', ['-O2', '-Wall', '-o', BINARY, SOURCE], { encoding: 'utf8' });
  if (r.error) throw new Error(`compiling ${SOURCE}: gcc: ${r.error.message} (make bench-deps installs it)`);
  if (r.status !== 0) throw new Error(`compiling ${SOURCE} failed:\n${r.stderr}`);
  return BINARY;
}

interface Snapshot {
  msgs: number;
  bytes: number;
  t: number;
  cpuUs: number;
  closedAfterOpen: number;
  errors: Record<string, number>;
  latency?: { buckets: number[]; max: number; min: number; sum: number };
}

export interface CPoolSnapshot {
  msgs: number;
  /** Merged over the processes when asked for. */
  latency: Histogram | null;
  closedAfterOpen: number;
  errors: Record<string, number>;
  per: { msgs: number; t: number; cpuUs: number }[];
}

class Proc {
  readonly proc: ChildProcess;
  private readonly waiting: { resolve: (line: string) => void; reject: (e: Error) => void }[] = [];
  private gone: Error | null = null;
  readonly exited: Promise<void>;

  constructor(bin: string, args: string[]) {
    this.proc = spawn(bin, args, { stdio: ['pipe', 'pipe', 'inherit'] });
    track(this.proc);
    readline.createInterface({ input: this.proc.stdout! }).on('line', (line) => this.waiting.shift()?.resolve(line));
    this.exited = new Promise((resolve) => {
      this.proc.once('exit', (code, signal) => {
        this.gone = new Error(`wsrecv exited (code ${code}, signal ${signal})`);
        for (const w of this.waiting.splice(0)) w.reject(this.gone);
        resolve();
      });
    });
  }

  async ask<T>(cmd: string, timeoutMs: number): Promise<T> {
    if (this.gone) throw this.gone;
    const line = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`wsrecv: no answer to "${cmd}" in ${timeoutMs} ms`)), timeoutMs);
      this.waiting.push({
        resolve: (l) => { clearTimeout(timer); resolve(l); },
        reject: (e) => { clearTimeout(timer); reject(e); },
      });
      this.proc.stdin!.write(cmd + '\n');
    });
    return JSON.parse(line) as T;
  }
}

export class CGenPool {
  private constructor(private readonly procs: Proc[], readonly connections: number) {}

  /** pids of the generator processes (CPU accounting). */
  get pids(): number[] {
    return this.procs.map((p) => p.proc.pid).filter((p): p is number => typeof p === 'number');
  }

  /**
   * `connections` subscribers of `channel` over `procs` processes (not connected yet);
   * with several ports, connection i of each process goes to ports[i % ports.length].
   */
  static start(o: { host: string; ports: number[]; channel: string; connections: number; procs: number; concurrency: number }): CGenPool {
    const bin = wsrecvBinary();
    const n = Math.max(1, Math.min(o.procs, o.connections));
    const upgradePath = `/app/${APP.key}?protocol=7&client=js&version=8.4.0&flash=false`;
    const procs: Proc[] = [];
    for (let i = 0; i < n; i++) {
      const count = Math.floor(o.connections / n) + (i < o.connections % n ? 1 : 0);
      procs.push(new Proc(bin, [o.host, o.ports.join(','), upgradePath, o.channel, String(count), String(o.concurrency)]));
    }
    return new CGenPool(procs, o.connections);
  }

  /** Opens and subscribes every connection; resolves with the counts when done or timed out. */
  async connect(timeoutMs: number): Promise<{ established: number; failed: number; subsConfirmed: number; subsFailed: number; timedOut: boolean }> {
    type R = { established: number; failed: number; subsConfirmed: number; subsFailed: number; timedOut: boolean };
    const rs = await Promise.all(this.procs.map((p) => p.ask<R>(`connect ${timeoutMs}`, timeoutMs + 10_000)));
    return {
      established: rs.reduce((a, r) => a + r.established, 0), failed: rs.reduce((a, r) => a + r.failed, 0),
      subsConfirmed: rs.reduce((a, r) => a + r.subsConfirmed, 0), subsFailed: rs.reduce((a, r) => a + r.subsFailed, 0),
      timedOut: rs.some((r) => r.timedOut),
    };
  }

  async snapshot(latency = false, reset = false): Promise<CPoolSnapshot> {
    const rs = await Promise.all(this.procs.map((p) => p.ask<Snapshot>(`snapshot ${latency ? 1 : 0} ${reset ? 1 : 0}`, 10_000)));
    let hist: Histogram | null = null;
    if (latency) {
      hist = new Histogram();
      for (const r of rs) if (r.latency) hist.addSparse(r.latency);
    }
    const errors: Record<string, number> = {};
    for (const r of rs) for (const [k, v] of Object.entries(r.errors)) if (v > 0) errors[k] = (errors[k] ?? 0) + v;
    return {
      msgs: rs.reduce((a, r) => a + r.msgs, 0), latency: hist, errors,
      closedAfterOpen: rs.reduce((a, r) => a + r.closedAfterOpen, 0),
      per: rs.map((r) => ({ msgs: r.msgs, t: r.t, cpuUs: r.cpuUs })),
    };
  }

  /** Waits until no new message arrived for quietMs (at most maxMs); returns the last snapshot. */
  async drain(quietMs: number, maxMs: number): Promise<CPoolSnapshot> {
    return drainQuiet(() => this.snapshot(), quietMs, maxMs);
  }

  /** Sleep paceUs after each round of reads (0: read as soon as bytes arrive); see wsrecv.c. */
  async pace(paceUs: number): Promise<void> {
    await Promise.all(this.procs.map((p) => p.ask(`pace ${Math.max(0, Math.round(paceUs))}`, 10_000)));
  }

  async close(): Promise<void> {
    await Promise.all(this.procs.map(async (p) => {
      try {
        await p.ask('close', 5000);
      } catch { /* exited already */ }
      await Promise.race([p.exited, sleep(2000)]);
      p.proc.kill('SIGKILL');
    }));
  }
}
