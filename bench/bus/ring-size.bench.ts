// Throughput of one ring (producer thread → consumer thread, doorbell wake-ups) by ring
// size, with the frame sizes publishes have: 200 B, 1 KB, 4 KB, 30 KB and a mix (200 B–
// 4 KB, one in 20 of 30 KB).
//   npx tsc -p . && node dist/bench/bus/ring-size.bench.js [MB per run=200] [runs=3]
//
// Two producers, both writing 256 frames per event-loop turn (a busy shard's turn):
//   ring   writes only while its spill queue is empty (else waits for the reader to move
//          HEAD, without spinning): the ring alone
//   spill  writes whatever the ring takes, the rest into the spill queue (bounded at
//          64 MiB, as the bus does): what a shard does when a reader falls behind
// Then fan-in: 8 producers, each with its own ring, into one consumer (one doorbell), the
// shape a thread's incoming rings have at 9+ threads.
// Figures: frames/s and MB/s (wall clock), CPU µs per frame of both threads together
// (process.cpuUsage: the machine is shared, CPU time is the steadier figure) and the
// share of frames that passed through the spill queue. Medians of `runs`.
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { DoorbellListener, DoorbellRinger, createDoorbell, waitAsync } from '../../src/bus/doorbell';
import { HEAD, WAITING } from '../../src/bus/layout';
import { createRingBuffer, RingReader, RingWriter } from '../../src/bus/ring';

const KiB = 1024;
const PROFILES: Record<string, number[]> = {
  '200 B': [200],
  '1 KB': [1000],
  '4 KB': [4000],
  '30 KB': [30_000],
  mix: Array.from({ length: 20 }, (_, i) => (i === 19 ? 30_000 : 200 + Math.round((i * 3800) / 18))),
};
const RING_SIZES = [32, 64, 128, 256].map((k) => k * KiB);
const PER_TURN = 256;
const FAN_IN = 8;
/** Atomics.waitAsync with its timeout argument (doorbell.ts types it without). */
const waitFor = waitAsync as unknown as (ta: Int32Array, i: number, v: number, ms: number) => ReturnType<typeof waitAsync>;

interface Job { ring: SharedArrayBuffer; doorbell: SharedArrayBuffer; sizes: number[]; frames: number; mode: 'ring' | 'spill' }

function producer(job: Job): void {
  const ringer = new DoorbellRinger(job.doorbell);
  const w = new RingWriter(job.ring, { onWritten: () => ringer.request(), maxSpillBytes: 64 << 20 });
  const i32 = new Int32Array(job.ring);
  const payloads = job.sizes.map((n) => new Uint8Array(n).fill(7));
  let sent = 0;
  let spilled = 0;
  const keepAlive = setInterval(() => {}, 1000); // a pending waitAsync alone lets the thread end
  const pump = (): void => {
    let blocked = false;
    for (let i = 0; i < PER_TURN && sent < job.frames; i++) {
      if (job.mode === 'ring' && w.spilledFrames > 0) { blocked = true; break; }
      const before = w.spilledFrames;
      if (!w.write(1, payloads[sent % payloads.length])) { blocked = true; break; } // spill bound
      if (w.spilledFrames > before) spilled++;
      sent++;
    }
    if (sent >= job.frames) {
      clearInterval(keepAlive);
      parentPort!.postMessage(spilled); // the writer streams what is left in its spill queue (its timer keeps the thread)
    } else if (!blocked) {
      setImmediate(pump);
    } else {
      // no spinning: wait for the reader to move HEAD (it notifies when WAITING is set; the
      // writer's own flush may have cleared it already)
      Atomics.store(i32, WAITING, 1);
      const r = waitFor(i32, HEAD, Atomics.load(i32, HEAD), 50);
      if (r.async) void r.value.then(() => setImmediate(pump));
      else setImmediate(pump);
    }
  };
  pump();
}

async function run(sizes: number[], ringBytes: number, mode: Job['mode'], mb: number, producers = 1): Promise<{ fps: number; mbps: number; cpu: number; spilled: number }> {
  const avg = sizes.reduce((a, b) => a + b, 0) / sizes.length;
  const frames = Math.ceil((mb * 1e6) / avg / producers); // per producer
  const doorbell = createDoorbell();
  const jobs: Job[] = Array.from({ length: producers }, () => ({ ring: createRingBuffer(ringBytes), doorbell, sizes, frames, mode }));
  const readers = jobs.map((j) => new RingReader(j.ring));
  const total = frames * producers;
  let got = 0;
  const keepAlive = setInterval(() => {}, 1000); // waitAsync alone does not keep the loop alive
  const workers = jobs.map((job) => new Worker(__filename, { workerData: job }));
  await Promise.all(workers.map((w) => new Promise((r) => w.once('online', r))));
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const spilled = Promise.all(workers.map((w) => new Promise<number>((r) => w.once('message', r))));
  await new Promise<void>((resolve) => {
    const listener = new DoorbellListener(doorbell, () => {
      for (const r of readers) got += r.drain(() => {});
      if (got === total) { listener.stop(); resolve(); }
    });
    listener.start();
  });
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  clearInterval(keepAlive);
  const nSpilled = (await spilled).reduce((a, b) => a + b, 0);
  await Promise.all(workers.map((w) => w.terminate()));
  return { fps: total / s, mbps: (total * avg) / s / 1e6, cpu: (cpu.user + cpu.system) / total, spilled: nSpilled / total };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

async function main(): Promise<void> {
  const mb = Number(process.argv[2] ?? 200);
  const runs = Number(process.argv[3] ?? 3);
  console.log(`${mb} MB per run, ${PER_TURN} frames per producer turn, median of ${runs}; node ${process.version}`);
  const row = async (label: string, sizes: number[], ringBytes: number, mode: Job['mode'], producers: number): Promise<void> => {
    const rs = [];
    for (let i = 0; i < runs; i++) rs.push(await run(sizes, ringBytes, mode, mb, producers));
    const fps = median(rs.map((r) => r.fps));
    console.log(`${label}  ${String(ringBytes / KiB).padStart(8)}  ${(fps / 1e3).toFixed(0).padStart(7)} k  ${median(rs.map((r) => r.mbps)).toFixed(0).padStart(6)}   ${median(rs.map((r) => r.cpu)).toFixed(2).padStart(8)}      ${(100 * median(rs.map((r) => r.spilled))).toFixed(1).padStart(5)} %`);
  };
  console.log('mode   frames  ring KiB   frames/s     MB/s   CPU µs/frame  spilled');
  for (const mode of ['ring', 'spill'] as const) {
    for (const [name, sizes] of Object.entries(PROFILES)) {
      for (const ringBytes of RING_SIZES) await row(`${mode.padEnd(5)}  ${name.padStart(6)}`, sizes, ringBytes, mode, 1);
    }
  }
  console.log(`\nfan-in: ${FAN_IN} producer threads, a ring each, one doorbell → one consumer (mode ring)`);
  for (const name of ['200 B', 'mix']) {
    for (const ringBytes of RING_SIZES) await row(`fan-in ${name.padStart(6)}`, PROFILES[name], ringBytes, 'ring', FAN_IN);
  }
}

if (isMainThread) void main();
else producer(workerData as Job);
