// Where the deltas are computed: the sequencer thread itself (delta_compression.pool_size
// 0, the default), or a piscina pool of pool_size threads behind it. Either way never a
// shard. Measured (bench/delta/compute.bench.ts, docs/benchmarks.md "Delta
// compression"): a 1 KB Fossil delta costs ~15–55 µs inline and ~75–150 µs through a
// one-thread pool, whose per-task cost (structured clone both ways, a wake-up per task)
// is larger than the delta itself; a pool only pays when one thread cannot keep up with
// the deltas (thousands of 1 KB deltas per second per core).

import path from 'node:path';
import { Piscina } from 'piscina';
import { loadEncoders, type Encode } from './codec';
import { ALGOS } from './settings';
import { PoolFullError, type Compute, type DeltaResult, type DeltaTask } from './sequencer';

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

/**
 * `maxQueue`: tasks waiting for a pool thread (piscina's maxQueue); one more is refused
 * at once with PoolFullError (the sequencer sends that message in full and counts it).
 */
export async function createComputer(poolSize: number, maxQueue: number): Promise<Computer> {
  if (poolSize === 0) {
    const run = await inlineComputer();
    return { compute: run, close: () => Promise.resolve() };
  }
  const pool = new Piscina({
    filename: path.join(__dirname, 'pool-task.js'),
    minThreads: poolSize,
    maxThreads: poolSize,
    idleTimeout: Infinity,
    maxQueue,
  });
  // Warm up before the sequencer reports ready: the first task starts the thread and loads
  // the Fossil encoder, during which messages would queue behind it.
  const warm = Buffer.from('{"event":"warm-up","channel":"c","data":"0123456789"}');
  await pool.run({ base: warm, target: warm, algos: ALGOS.map((a) => a === 'fossil') } satisfies DeltaTask);
  return {
    compute: (task) => (pool.run(task) as Promise<DeltaResult>).catch((err: unknown) => {
      // piscina's refusal (errors.ts TaskQueueAtLimit) has no code of its own: its message
      throw err instanceof Error && err.message === 'Task queue is at limit' ? new PoolFullError(maxQueue) : err;
    }),
    close: () => pool.destroy(),
  };
}
