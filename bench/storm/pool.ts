// The reconnect-storm bench's handle on its clients: a few gen.ts processes driven as one
// (each below the per-process open-files limit), their stats summed and their per-client
// times concatenated.

import { openFilesLimit } from '../harness/load';
import { Child } from '../harness/procs';
import { APP } from '../harness/target';
import type { Layout, StormCommand, StormReply, StormStats } from './protocol';

export interface StormPoolOptions {
  host: string;
  port: number;
  clients: number;
  socketsPerProc: number;
  layout: Layout;
  recoveryAnswers: boolean;
  srcAddrs: string[];
  concurrency: number;
  jitterMs: number;
  retryMs: number;
}

export interface PoolResult {
  timedOut: boolean;
  stats: StormStats;
  /** Every client's monotonic µs of connection_established / of being back (0: never). */
  tEst: Float64Array;
  tBack: Float64Array;
}

function addRecords(into: Record<string, number>, from: Record<string, number>): void {
  for (const [k, v] of Object.entries(from)) into[k] = (into[k] ?? 0) + v;
}

export function sumStats(list: StormStats[]): StormStats {
  const out: StormStats = { clients: 0, back: 0, established: 0, attempts: 0, failures: {}, closes: {}, errors: {}, subsConfirmed: 0, recovery: {}, msgs: 0, rewindMsgs: 0, serialGaps: 0, cpuUs: 0 };
  for (const s of list) {
    for (const k of ['clients', 'back', 'established', 'attempts', 'subsConfirmed', 'msgs', 'rewindMsgs', 'serialGaps', 'cpuUs'] as const) out[k] += s[k];
    for (const k of ['failures', 'closes', 'errors', 'recovery'] as const) addRecords(out[k], s[k]);
  }
  return out;
}

function concat(arrays: Float64Array[]): Float64Array {
  const out = new Float64Array(arrays.reduce((a, x) => a + x.length, 0));
  let off = 0;
  for (const a of arrays) {
    out.set(a, off);
    off += a.length;
  }
  return out;
}

export class StormPool {
  private constructor(readonly gens: Child<StormCommand, StormReply>[]) {}

  static async start(o: StormPoolOptions): Promise<StormPool> {
    const n = Math.max(2, Math.ceil(o.clients / o.socketsPerProc));
    const room = openFilesLimit() - 200;
    const gens: Child<StormCommand, StormReply>[] = [];
    const pool = new StormPool(gens);
    try {
      let first = 0;
      const inits: Promise<StormReply>[] = [];
      for (let i = 0; i < n; i++) {
        const count = Math.floor(o.clients / n) + (i < o.clients % n ? 1 : 0);
        if (count > room) throw new Error(`${count} sockets in one client process would pass its open-files limit (${openFilesLimit()}): lower --sockets-per-proc`);
        const g = new Child<StormCommand, StormReply>(`storm client ${i}`, '../storm/gen.js');
        gens.push(g);
        inits.push(g.request({
          type: 'init',
          init: {
            host: o.host, port: o.port, path: `/app/${APP.key}?protocol=7&client=js&version=8.4.0&flash=false`,
            srcAddrs: o.srcAddrs, concurrency: o.concurrency, firstIndex: first, count, layout: o.layout,
            recoveryAnswers: o.recoveryAnswers, jitterMs: o.jitterMs, retryMs: o.retryMs,
          },
        }, 10_000));
        first += count;
      }
      await Promise.all(inits);
    } catch (err) {
      await pool.close();
      throw err;
    }
    return pool;
  }

  private async all(cmd: { type: 'connect' | 'wait'; timeoutMs: number }): Promise<PoolResult> {
    const replies = await Promise.all(this.gens.map((g) => g.request(cmd, cmd.timeoutMs + 15_000)));
    return {
      timedOut: replies.some((r) => r.timedOut === true),
      stats: sumStats(replies.map((r) => r.stats)),
      tEst: concat(replies.map((r) => r.tEst ?? new Float64Array(0))),
      tBack: concat(replies.map((r) => r.tBack ?? new Float64Array(0))),
    };
  }

  /** Connects and subscribes every client; resolves when all are back or at the timeout. */
  connect(timeoutMs: number): Promise<PoolResult> {
    return this.all({ type: 'connect', timeoutMs });
  }

  /** A new phase: from now on a closed connection is part of the storm. */
  async arm(): Promise<void> {
    await Promise.all(this.gens.map((g) => g.request({ type: 'arm' }, 10_000)));
  }

  /** Resolves when every client is back in this phase, or at the timeout. */
  waitBack(timeoutMs: number): Promise<PoolResult> {
    return this.all({ type: 'wait', timeoutMs });
  }

  async snapshot(): Promise<StormStats> {
    const replies = await Promise.all(this.gens.map((g) => g.request({ type: 'snapshot' }, 10_000)));
    return sumStats(replies.map((r) => r.stats));
  }

  async close(): Promise<void> {
    await Promise.all(this.gens.map(async (g) => {
      try {
        await g.request({ type: 'close' }, 10_000);
      } catch { /* gone already */ }
      await g.kill(1000);
    }));
  }
}
