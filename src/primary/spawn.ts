// Starting and stopping shard threads: the Worker options a shard gets (its node flags,
// its young generation), a free port for SO_REUSEPORT, and a stop that waits for each
// thread to end by itself (a thread holding uWS sockets must never be terminated).

import net from 'node:net';
import path from 'node:path';
import { MessageChannel, Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import { relayLogs } from '../log';
import type { PrimaryCommand, ShardEvent, ShardInit } from '../shard/init';

export interface ShardHandle {
  worker: Worker;
  exited: Promise<number>;
}

/** A port that is free right now (SO_REUSEPORT needs the same fixed port for every shard). */
export function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, host === '0.0.0.0' ? undefined : host, () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** V8 options a server may be started with (profiling, GC tuning); not node options. */
const V8_FLAG = /^--(expose[-_]gc|perf[-_]|trace[-_]gc|(max|min)[-_]semi[-_]space[-_]size|max[-_]old[-_]space[-_]size|interpreted[-_]frames[-_]native[-_]stack|stack[-_]size)/;

/**
 * Node flags for shard threads: the process's own, minus module loaders (--import,
 * --require, --loader). Shards are compiled JS; a test runner's TypeScript/mock hooks
 * would otherwise be loaded again in every shard (measured: 4-shard start 2.8 s → 0.25 s).
 */
function shardExecArgv(): string[] {
  const out: string[] = [];
  const argv = process.execArgv;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (/^--(import|require|loader|experimental-loader)=/.test(a)) continue;
    if (/^(--import|--require|-r|--loader|--experimental-loader)$/.test(a)) { i++; continue; }
    // V8 flags are process-wide (a shard sees `gc` when the process has --expose-gc, a
    // semi-space size applies to every heap) and Worker refuses them in execArgv.
    if (V8_FLAG.test(a)) continue;
    out.push(a);
  }
  return out;
}

/**
 * Young generation of a shard's heap: 12 MB, i.e. semi-spaces of 4 MB (V8's default lets
 * them grow to 16 MB). A connection storm keeps many objects alive while young, so V8
 * grows the semi-spaces to their maximum and keeps them: with the default, 19,000 idle
 * connections cost 2.69 KiB of RSS each, with 4 MB semi-spaces 1.60 KiB, and the API's
 * throughput is the same within noise (1 MB: 1.63 KiB but API −12 %; 8 MB: 2.05 KiB).
 * A node flag for the semi-space size given to the server (experiments) wins.
 */
const SHARD_YOUNG_GENERATION_MB = 12;
const shardResourceLimits = process.execArgv.some((a) => /semi[-_]space/.test(a))
  ? undefined : { maxYoungGenerationSizeMb: SHARD_YOUNG_GENERATION_MB };

/** The shard's next event that `pred` accepts; null after ms, or when the shard exits first. */
export function eventOf<E extends ShardEvent>(h: ShardHandle, pred: (e: ShardEvent) => e is E, ms: number): Promise<E | null>;
export function eventOf(h: ShardHandle, pred: (e: ShardEvent) => boolean, ms: number): Promise<ShardEvent | null>;
export function eventOf(h: ShardHandle, pred: (e: ShardEvent) => boolean, ms: number): Promise<ShardEvent | null> {
  return new Promise((resolve) => {
    const on = (e: ShardEvent) => {
      if (pred(e)) done(e);
    };
    const done = (v: ShardEvent | null) => {
      clearTimeout(timer);
      h.worker.off('message', on);
      resolve(v);
    };
    const timer = setTimeout(() => done(null), ms);
    h.worker.on('message', on);
    void h.exited.then(() => done(null));
  });
}

/** Posts `cmd` to every shard and resolves with each one's next event that `pred` accepts (null as eventOf), in shard order. */
export function askEvery<E extends ShardEvent>(handles: readonly ShardHandle[], cmd: PrimaryCommand, pred: (e: ShardEvent) => e is E, ms: number): Promise<(E | null)[]> {
  return Promise.all(handles.map((h) => {
    const answer = eventOf(h, pred, ms);
    h.worker.postMessage(cmd);
    return answer;
  }));
}

export function spawnShard(init: ShardInit, log: Logger): { handle: ShardHandle; ready: Promise<ShardEvent> } {
  // The shard's log lines come back whole over their own port (log.ts); the port closes with the thread.
  const logs = new MessageChannel();
  const drainLogs = relayLogs(init.config.log, logs.port1);
  const worker = new Worker(path.join(__dirname, '..', 'shard', 'worker.js'), {
    workerData: { ...init, logPort: logs.port2 }, transferList: [logs.port2],
    execArgv: shardExecArgv(), resourceLimits: shardResourceLimits,
  });
  const exited = new Promise<number>((resolve) => worker.once('exit', (code) => {
    drainLogs();
    resolve(code);
  }));
  const ready = new Promise<ShardEvent>((resolve) => {
    worker.on('message', (e: ShardEvent) => {
      if (e.type === 'ready' || e.type === 'listen_failed') resolve(e);
    });
    worker.once('error', (err) => {
      log.error({ err, shard: init.shardId }, 'shard crashed');
      resolve({ type: 'listen_failed', port: init.port });
    });
    void exited.then(() => resolve({ type: 'listen_failed', port: init.port }));
  });
  return { handle: { worker, exited }, ready };
}

/**
 * The drain's two phases within shutdown_grace_period: together at most half of it (the
 * other half is the stop's own: close handshakes, then the cut).
 */
export function drainPlan(graceMs: number, unreadyMs: number, windowMs: number): { unreadyMs: number; windowMs: number } {
  const budget = Math.floor(graceMs / 2);
  const unready = Math.min(unreadyMs, budget);
  return { unreadyMs: unready, windowMs: Math.min(windowMs, budget - unready) };
}

/**
 * The paced drain of every shard (shard/drain.ts); resolves when each answered `drained`
 * or exited, or at the plan's end plus a second (a stuck shard is then stopped as usual).
 */
export async function drainShards(handles: ShardHandle[], plan: { unreadyMs: number; windowMs: number }): Promise<void> {
  const cmd: PrimaryCommand = { type: 'drain', ...plan };
  await Promise.all(handles.map((h) => new Promise<void>((resolve) => {
    const onMessage = (e: ShardEvent) => {
      if (e.type === 'drained') finish();
    };
    const timer = setTimeout(finish, plan.unreadyMs + plan.windowMs + 1000);
    function finish() {
      clearTimeout(timer);
      h.worker.off('message', onMessage);
      resolve();
    }
    h.worker.on('message', onMessage);
    void h.exited.then(finish);
    h.worker.postMessage(cmd);
  })));
}

export async function stopShards(handles: ShardHandle[], graceMs: number, log: Logger): Promise<void> {
  const cmd: PrimaryCommand = { type: 'shutdown' };
  for (const h of handles) h.worker.postMessage(cmd);
  await Promise.all(handles.map(async (h) => {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((r) => { timer = setTimeout(() => r('timeout'), graceMs); });
    // A thread holding uWS sockets must not be terminated (the process would abort): the
    // shard ends by itself once its last socket is closed (see shard/worker.ts).
    const first = await Promise.race([h.exited.then(() => 'exited' as const), timedOut]);
    clearTimeout(timer);
    if (first === 'timeout') {
      log.warn({ threadId: h.worker.threadId }, 'shard still has open sockets after the grace period; waiting for them to close');
      await h.exited;
    }
  }));
}

