// Starting, rewiring and stopping the delta sequencer's thread (delta/thread.ts) from the
// primary. The thread holds no uWS socket, so terminating it is safe (unlike a shard).

import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { SequencerCommand, SequencerEvent, SequencerInit } from './init';

export interface SequencerHandle {
  readonly index: number;
  /** Its thread (the /metrics scrape asks it like a shard). */
  readonly worker: Worker;
  /** Shard `shard` was replaced: the sequencer talks to it over the fresh rings; resolves when it has. */
  rewire(cmd: Extract<SequencerCommand, { type: 'rewire' }>, timeoutMs: number): Promise<boolean>;
  stop(timeoutMs: number): Promise<void>;
  /**
   * Tests only (SequencerInit.testHooks, else the thread ignores it and this resolves
   * false after timeoutMs): the thread stops reading its rings for `ms`; resolves true
   * once the pause is in force.
   */
  testPauseBus(ms: number, timeoutMs: number): Promise<boolean>;
}

function next(worker: Worker, pred: (e: SequencerEvent) => boolean, ms: number): Promise<SequencerEvent | null> {
  return new Promise((resolve) => {
    const on = (e: SequencerEvent) => {
      if (pred(e)) done(e);
    };
    const exit = () => done(null);
    const done = (v: SequencerEvent | null) => {
      clearTimeout(timer);
      worker.off('message', on);
      worker.off('exit', exit);
      resolve(v);
    };
    const timer = setTimeout(() => done(null), ms);
    worker.on('message', on);
    worker.once('exit', exit);
  });
}

/** Starts the sequencer; resolves once it reads its rings, rejects if it could not start. */
export async function spawnSequencer(init: SequencerInit, log: Logger): Promise<SequencerHandle> {
  const worker = new Worker(path.join(__dirname, 'thread.js'), { workerData: init });
  worker.on('error', (err) => log.fatal({ err }, 'delta sequencer thread failed: deltas stop until the server restarts'));
  const ready = await next(worker, (e) => e.type === 'ready' || e.type === 'failed', 30_000);
  if (ready?.type !== 'ready') {
    await worker.terminate();
    throw new Error(`the delta sequencer did not start${ready?.type === 'failed' ? `: ${ready.error}` : ''}`);
  }
  let stopped: Promise<void> | null = null;
  return {
    index: init.index,
    worker,
    async rewire(cmd, timeoutMs) {
      const ack = next(worker, (e) => e.type === 'rewired' && e.shard === cmd.shard, timeoutMs);
      worker.postMessage(cmd);
      return (await ack) !== null;
    },
    async testPauseBus(ms, timeoutMs) {
      const ack = next(worker, (e) => e.type === 'test_bus_paused', timeoutMs);
      const cmd: SequencerCommand = { type: 'test_pause_bus', ms };
      worker.postMessage(cmd);
      return (await ack) !== null;
    },
    stop(timeoutMs) {
      stopped ??= (async () => {
        const done = next(worker, (e) => e.type === 'stopped', timeoutMs);
        const cmd: SequencerCommand = { type: 'shutdown' };
        worker.postMessage(cmd);
        await done;
        await worker.terminate();
      })();
      return stopped;
    },
  };
}
