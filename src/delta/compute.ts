// Where the deltas are computed: a piscina pool behind the sequencer
// (delta_compression.pool_size threads, default 1), or the sequencer thread itself with
// pool_size 0. Either way never a shard. Measured in docs/performance.md ("Delta
// compression"): what a pool task costs against computing inline.

import path from 'node:path';
import { Piscina } from 'piscina';
import { loadEncoders } from './codec';
import { ALGOS } from './settings';
import type { Compute, DeltaResult, DeltaTask } from './sequencer';

export interface Computer {
  compute: Compute;
  close(): Promise<void>;
}

/** Computes one task with the encoders of this thread. */
export async function inlineComputer(): Promise<(task: DeltaTask) => DeltaResult> {
  const enc = await loadEncoders(ALGOS);
  return (task) => ALGOS.map((a, i) => (task.algos[i] ? enc[a]!(task.base, task.target) : null));
}

export async function createComputer(poolSize: number): Promise<Computer> {
  if (poolSize === 0) {
    const run = await inlineComputer();
    return { compute: run, close: () => Promise.resolve() };
  }
  const pool = new Piscina({
    filename: path.join(__dirname, 'pool-task.js'),
    minThreads: poolSize,
    maxThreads: poolSize,
    idleTimeout: Infinity,
  });
  // Warm up before the sequencer reports ready: the first task starts the thread and loads
  // the encoders (vcdiff-wasm compiles its wasm), ~1 s on this machine, during which
  // messages would queue behind it.
  const warm = Buffer.from('{"event":"warm-up","channel":"c","data":"0123456789"}');
  await pool.run({ base: warm, target: warm, algos: ALGOS.map(() => true) } satisfies DeltaTask);
  return {
    compute: (task) => pool.run(task) as Promise<DeltaResult>,
    close: () => pool.destroy(),
  };
}
