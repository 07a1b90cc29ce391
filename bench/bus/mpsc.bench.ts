// One ring per consumer (multi-producer, bench/bus/mpsc-ring.ts, a prototype) against one
// SPSC ring per producer (src/bus/ring.ts, what the bus uses), at the same memory.
//   npx tsc -p . && node dist/bench/bus/mpsc.bench.js [frames per producer=100000] [runs=3]
//
// 1. One thread, no contention: CPU ns per frame of write + drain, both rings.
// 2. P producer threads (1, 2, 4, 8; this machine has 2 cores, so from 2 on they also
//    contend for cores, as shards do when threads outnumber cores) → one consumer:
//      spsc  P rings of 64 KiB, one doorbell (the bus's shape)
//      mpsc  one ring of P × 64 KiB (the same memory)
//    Each producer writes 64 frames per event-loop turn; a full ring makes it wait for
//    the reader to move HEAD (no spill queue in either, to compare the rings alone). Figures: frames/s,
//    CPU µs per frame of all threads (process.cpuUsage), lost compareExchange races per
//    1000 frames, and drains that stopped at a reserved, uncommitted frame (a stalled
//    producer holds up every frame reserved after its own). Medians of `runs`.
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { DoorbellListener, DoorbellRinger, createDoorbell, waitAsync } from '../../src/bus/doorbell';
import { HEAD, WAITING } from '../../src/bus/layout';
import { createRingBuffer, RingReader, RingWriter } from '../../src/bus/ring';
import { createMpscRing, MpscReader, MpscWriter } from './mpsc-ring';

const KiB = 1024;
const SIZES: Record<string, number[]> = {
  '200 B': [200],
  mix: Array.from({ length: 20 }, (_, i) => (i === 19 ? 30_000 : 200 + Math.round((i * 3800) / 18))),
};
const PER_TURN = 64;
/** Atomics.waitAsync with its timeout argument (doorbell.ts types it without). */
const waitFor = waitAsync as unknown as (ta: Int32Array, i: number, v: number, ms: number) => ReturnType<typeof waitAsync>;

interface Job { kind: 'spsc' | 'mpsc'; ring: SharedArrayBuffer; doorbell: SharedArrayBuffer; sizes: number[]; frames: number }

function producer(job: Job): void {
  const ringer = new DoorbellRinger(job.doorbell);
  const w = job.kind === 'mpsc' ? new MpscWriter(job.ring) : new RingWriter(job.ring, { maxSpillBytes: 0 });
  const payloads = job.sizes.map((n) => new Uint8Array(n).fill(7));
  const i32 = new Int32Array(job.ring);
  let sent = 0;
  const pump = (): void => {
    let wrote = false;
    for (let i = 0; i < PER_TURN && sent < job.frames; i++) {
      if (!w.write(1, payloads[sent % payloads.length])) break;
      wrote = true;
      sent++;
    }
    if (wrote) ringer.request();
    if (sent >= job.frames) {
      clearInterval(keepAlive);
      parentPort!.postMessage(w instanceof MpscWriter ? w.retries : 0);
    } else if (wrote) {
      setImmediate(pump);
    } else {
      // full: wait for the reader to move HEAD (it notifies when WAITING is set), as the bus's writer does
      Atomics.store(i32, WAITING, 1);
      const r = waitFor(i32, HEAD, Atomics.load(i32, HEAD), 20);
      if (r.async) void r.value.then(() => setImmediate(pump));
      else setImmediate(pump);
    }
  };
  const keepAlive = setInterval(() => {}, 1000); // a pending waitAsync alone lets the thread end
  pump();
}

function oneThread(sizes: number[], frames: number): { spsc: number; mpsc: number } {
  const payloads = sizes.map((n) => new Uint8Array(n).fill(7));
  const time = (write: (p: Uint8Array) => boolean, drain: () => void): number => {
    const c0 = process.cpuUsage();
    for (let i = 0; i < frames;) {
      for (let k = 0; k < PER_TURN && i < frames; k++, i++) if (!write(payloads[i % payloads.length])) throw new Error('full');
      drain();
    }
    const c = process.cpuUsage(c0);
    return ((c.user + c.system) * 1000) / frames;
  };
  const s = createRingBuffer(4096 * KiB);
  const sw = new RingWriter(s, { maxSpillBytes: 0 });
  const sr = new RingReader(s);
  const m = createMpscRing(4096 * KiB);
  const mw = new MpscWriter(m);
  const mr = new MpscReader(m);
  const spsc = time((p) => sw.write(1, p), () => sr.drain(() => {}));
  const mpsc = time((p) => mw.write(1, p), () => mr.drain(() => {}));
  sw.close();
  return { spsc, mpsc };
}

async function manyThreads(kind: Job['kind'], producers: number, sizes: number[], frames: number) {
  const doorbell = createDoorbell();
  const rings = kind === 'mpsc' ? [createMpscRing(producers * 64 * KiB)] : Array.from({ length: producers }, () => createRingBuffer(64 * KiB));
  const readers = kind === 'mpsc' ? [new MpscReader(rings[0])] : rings.map((r) => new RingReader(r));
  const keepAlive = setInterval(() => {}, 1000);
  const workers = Array.from({ length: producers }, (_, p) => new Worker(__filename, {
    workerData: { kind, ring: rings[kind === 'mpsc' ? 0 : p], doorbell, sizes, frames } satisfies Job,
  }));
  await Promise.all(workers.map((w) => new Promise((r) => w.once('online', r))));
  const retries = Promise.all(workers.map((w) => new Promise<number>((r) => w.once('message', r))));
  const total = producers * frames;
  let got = 0;
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  await new Promise<void>((resolve) => {
    const listener = new DoorbellListener(doorbell, () => {
      for (const r of readers) got += r.drain(() => {});
      if (got === total) { listener.stop(); resolve(); }
    });
    listener.start();
  });
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  const c = process.cpuUsage(c0);
  clearInterval(keepAlive);
  const lost = (await retries).reduce((a, b) => a + b, 0);
  await Promise.all(workers.map((w) => w.terminate()));
  const stalls = kind === 'mpsc' ? (readers[0] as MpscReader).stalls : 0;
  return { fps: total / s, cpu: (c.user + c.system) / total, racesPerK: (1000 * lost) / total, stalls };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

async function main(): Promise<void> {
  const frames = Number(process.argv[2] ?? 100_000);
  const runs = Number(process.argv[3] ?? 3);
  console.log(`${frames} frames per producer, ${PER_TURN} per turn, median of ${runs}; node ${process.version}`);
  console.log('\none thread, write + drain, CPU ns per frame');
  for (const [name, sizes] of Object.entries(SIZES)) {
    const rs = Array.from({ length: runs }, () => oneThread(sizes, frames * 4));
    console.log(`  ${name.padStart(6)}  spsc ${median(rs.map((r) => r.spsc)).toFixed(0).padStart(6)}   mpsc ${median(rs.map((r) => r.mpsc)).toFixed(0).padStart(6)}`);
  }
  console.log('\nP producer threads → 1 consumer');
  console.log('frames   P  kind   frames/s  CPU µs/frame  races/1000  stalls');
  for (const [name, sizes] of Object.entries(SIZES)) {
    const n = name === 'mix' ? Math.ceil(frames / 5) : frames;
    for (const producers of [1, 2, 4, 8]) {
      for (const kind of ['spsc', 'mpsc'] as const) {
        const rs = [];
        for (let i = 0; i < runs; i++) rs.push(await manyThreads(kind, producers, sizes, n));
        console.log(`${name.padStart(6)}  ${String(producers).padStart(2)}  ${kind}  ${(median(rs.map((r) => r.fps)) / 1e3).toFixed(0).padStart(7)} k  ${median(rs.map((r) => r.cpu)).toFixed(2).padStart(10)}  ${median(rs.map((r) => r.racesPerK)).toFixed(1).padStart(10)}  ${String(median(rs.map((r) => r.stalls))).padStart(6)}`);
      }
    }
  }
}

if (isMainThread) void main();
else producer(workerData as Job);
