// What a delta costs where it is computed (docs/benchmarks.md, "Delta compression"):
// the same 1 KB order-book deltas computed inline (pool_size 0: on the sequencer thread)
// and through the piscina pool (pool_size 1, 2), one at a time (a quiet channel: each
// message waits for its delta) and with 64 in flight (a busy one).
//
//   node dist/bench/delta/compute.bench.js [--tasks 3000] [--runs 5]

import { createComputer } from '../../src/delta/compute';
import type { DeltaTask } from '../../src/delta/sequencer';
import { Books, rng } from '../../test/delta/clients';

const arg = (n: string, d: number) => (process.argv.includes(`--${n}`) ? Number(process.argv[process.argv.indexOf(`--${n}`) + 1]) : d);
const TASKS = arg('tasks', 3000);
const RUNS = arg('runs', 5);

function tasks(): DeltaTask[] {
  const books = new Books(rng(1), 1000);
  const env = (d: string) => Buffer.from('{"event":"book","channel":"ticker","data":' + JSON.stringify(d) + '}');
  let prev = env(books.update('A'));
  const out: DeltaTask[] = [];
  for (let i = 0; i < TASKS; i++) {
    const cur = env(books.update('A'));
    out.push({ base: prev, target: cur, algos: [true, false] });
    prev = cur;
  }
  return out;
}

async function measure(pool: number, inFlight: number, list: DeltaTask[]): Promise<number> {
  const c = await createComputer(pool, 256);
  try {
    for (let i = 0; i < 200; i++) await c.compute(list[i]); // warm
    const t0 = process.hrtime.bigint();
    let next = 0;
    const lane = async () => {
      while (next < list.length) await c.compute(list[next++]);
    };
    await Promise.all(Array.from({ length: inFlight }, lane));
    return Number(process.hrtime.bigint() - t0) / 1000 / list.length;
  } finally {
    await c.close();
  }
}

async function main(): Promise<void> {
  const list = tasks();
  const rows: Record<string, number[]> = {};
  for (let r = 0; r < RUNS; r++) {
    for (const pool of [0, 1, 2]) {
      for (const inFlight of [1, 64]) {
        const k = `pool_size ${pool}, ${inFlight} in flight`;
        (rows[k] ??= []).push(await measure(pool, inFlight, list));
      }
    }
  }
  for (const [k, v] of Object.entries(rows)) {
    const s = [...v].sort((a, b) => a - b);
    process.stdout.write(`${k}: median ${s[Math.floor(s.length / 2)].toFixed(1)} µs per delta (runs: ${v.map((x) => x.toFixed(1)).join(', ')})\n`);
  }
}

void main();
