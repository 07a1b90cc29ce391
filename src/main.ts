// Primary thread: config → rings → shards. It never touches a client socket.

import { randomInt } from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import { createTopology, type BusTopology } from './bus/bus';
import { createDoorbell } from './bus/doorbell';
import { createRingBuffer } from './bus/ring';
import { ConnectionCounters } from './channels/counters';
import { assertSupported } from './config/support';
import type { Config } from './config/types';
import { createLogger } from './log';
import type { PrimaryCommand, ShardEvent, ShardInit } from './shard/init';

/** Bytes per SPSC ring: (shards+1)² rings of this size (256 KiB keeps 16 shards under 75 MB). */
export const RING_BYTES = 256 * 1024;
/** Writer-side spill bound per ring before the API answers 503. */
export const MAX_SPILL_BYTES = 64 * 1024 * 1024;

export interface RunningServer {
  readonly port: number;
  readonly config: Config;
  /** Closes every client with 4200 and ends every shard. Idempotent. */
  stop(): Promise<void>;
}

export class ListenError extends Error {
  readonly code = 'RC_ERR_LISTEN';
}

interface ShardHandle {
  worker: Worker;
  exited: Promise<number>;
}

/** A port that is free right now (SO_REUSEPORT needs the same fixed port for every shard). */
function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, host === '0.0.0.0' ? undefined : host, () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

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
    out.push(a);
  }
  return out;
}

function spawnShard(init: ShardInit, log: Logger): { handle: ShardHandle; ready: Promise<ShardEvent> } {
  const worker = new Worker(path.join(__dirname, 'shard', 'worker.js'), { workerData: init, execArgv: shardExecArgv() });
  const exited = new Promise<number>((resolve) => worker.once('exit', resolve));
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

async function stopShards(handles: ShardHandle[], graceMs: number, log: Logger): Promise<void> {
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

async function startOnce(config: Config, port: number, log: Logger): Promise<{ handles: ShardHandle[]; port: number } | null> {
  const shards = config.workers;
  const topology: BusTopology = createTopology(shards + 1, RING_BYTES, MAX_SPILL_BYTES, createRingBuffer, createDoorbell);
  const counters = ConnectionCounters.allocate(config.apps.length);
  const prefixes = new Set<string>();
  while (prefixes.size < shards) prefixes.add(String(randomInt(100_000_000, 999_999_999)));
  const ids = [...prefixes];
  const handles: ShardHandle[] = [];
  const readies: Promise<ShardEvent>[] = [];
  for (let s = 0; s < shards; s++) {
    const { handle, ready } = spawnShard({ config, shardId: s, shards, topology, counters, port, socketIdPrefix: ids[s] }, log);
    handles.push(handle);
    readies.push(ready);
  }
  const results = await Promise.all(readies);
  if (results.every((r) => r.type === 'ready')) return { handles, port };
  await stopShards(handles, 2000, log);
  return null;
}

/** Starts every shard on the configured port (0: a free one is picked) and resolves when all listen. */
export async function start(config: Config, log: Logger = createLogger(config.log, { thread: 'primary' })): Promise<RunningServer> {
  assertSupported(config);
  const attempts = config.port === 0 ? 5 : 1;
  for (let i = 0; i < attempts; i++) {
    const port = config.port === 0 ? await freePort(config.host) : config.port;
    const started = await startOnce(config, port, log);
    if (!started) continue;
    log.info({ host: config.host, port, shards: config.workers }, 'ringcast listening');
    let stopping: Promise<void> | null = null;
    return {
      port,
      config,
      stop() {
        stopping ??= stopShards(started.handles, config.shutdown_grace_period, log).then(() => {
          log.info('ringcast stopped');
        });
        return stopping;
      },
    };
  }
  throw new ListenError(`could not listen on ${config.host}:${config.port}`);
}
