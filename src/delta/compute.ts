// Where the deltas are computed: a piscina pool behind the sequencer
// (delta_compression.pool_size threads, default 1), or the sequencer thread itself with
// pool_size 0. Either way never a shard. Measured in docs/performance.md ("Delta
// compression"): what a pool task costs against computing inline.

import path from 'node:path';
import { Piscina } from 'piscina';
import { loadEncoders, type Encode } from './codec';
import { ALGOS } from './settings';
import type { Compute, DeltaResult, DeltaTask } from './sequencer';

export interface Computer {
  compute: Compute;
  close(): Promise<void>;
}

/**
 * Computes one task with the encoders of this thread. Fossil is loaded at once; the
 * VCDIFF encoder (a wasm compile, ~1 s here) only when a task first asks for Xdelta3.
 */
export async function inlineComputer(): Promise<(task: DeltaTask) => DeltaResult | Promise<DeltaResult>> {
  const fossil = (await loadEncoders(['fossil'])).fossil!;
  let xdelta: Encode | null = null;
  const run = (task: DeltaTask) => ALGOS.map((a, i) => (!task.algos[i] ? null : a === 'fossil' ? fossil(task.base, task.target) : xdelta!(task.base, task.target)));
  return (task) => {
    if (xdelta !== null || !task.algos[ALGOS.indexOf('xdelta3')]) return run(task);
    return loadEncoders(['xdelta3']).then((e) => {
      xdelta = e.xdelta3;
      return run(task);
    });
  };
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
  // the Fossil encoder, during which messages would queue behind it.
  const warm = Buffer.from('{"event":"warm-up","channel":"c","data":"0123456789"}');
  await pool.run({ base: warm, target: warm, algos: ALGOS.map((a) => a === 'fossil') } satisfies DeltaTask);
  return {
    compute: (task) => pool.run(task) as Promise<DeltaResult>,
    close: () => pool.destroy(),
  };
}
