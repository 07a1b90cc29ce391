// Resident memory of the ring mesh (one SPSC ring per ordered pair of threads) at 5–33
// threads and several ring sizes, and what it adds to a process of that many threads.
//   npx tsc -p . && node --expose-gc dist/bench/bus/mesh-memory.bench.js [rings|threads|all]
//
// rings:   one child process per (threads, ring size): allocate the mesh (createTopology),
//          then push frames through every ring in this one thread until each ring's data
//          area has been passed over twice (200 B–4 KB frames, one in 20 of 30 KB), as a
//          long-running server's traffic eventually does. VmRSS / RssAnon before and after,
//          with a full GC before each reading; the mesh's share is the difference.
// threads: one child process per (threads, ring size): `threads` worker threads (a shard's
//          young generation), each a Bus endpoint, every thread publishing to every other
//          one (the same volume per ring at every ring size: 256 KiB passed over twice);
//          the process RSS with the workers idle, then after the traffic and a full GC in
//          every thread; how much the threads' JS heaps (committed + external) grew, and
//          the rest of the growth (the mesh pages touched, malloc).
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { getHeapStatistics } from 'node:v8';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { Bus, BusFullError } from '../../src/bus/bus';
import { createDoorbell } from '../../src/bus/doorbell';
import { createRingBuffer, RingReader, RingWriter } from '../../src/bus/ring';
import { createTopology, type BusTopology } from '../../src/bus/topology';

const KiB = 1024;
const MiB = 1024 * 1024;
/** Frame sizes in the order they are sent: 200 B–4 KB, and one in 20 of 30 KB. */
const SIZES = Array.from({ length: 20 }, (_, i) => (i === 19 ? 30_000 : 200 + Math.round((i * 3896) / 18)));
const AVG = SIZES.reduce((a, b) => a + b, 0) / SIZES.length;

function status(): { rss: number; anon: number } {
  const s = readFileSync('/proc/self/status', 'utf8');
  const kb = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+) kB`).exec(s)![1]) * KiB;
  return { rss: kb('VmRSS'), anon: kb('RssAnon') };
}
const gc = (): void => (globalThis as { gc?: () => void }).gc?.();
const mib = (n: number) => (n / MiB).toFixed(1).padStart(7);

/** Frames per ring so that its data area is passed over twice. */
const framesPerRing = (ringBytes: number) => Math.ceil((2 * ringBytes) / AVG);

// ── rings: the mesh alone, in one thread ─────────────────────────────────────────────
function passOver(ring: SharedArrayBuffer, frames: number, payloads: Uint8Array[]): void {
  const w = new RingWriter(ring);
  const r = new RingReader(ring);
  for (let i = 0; i < frames; i++) {
    w.write(1, payloads[i % payloads.length]);
    if (w.spilledFrames > 0) { r.drain(() => {}); w.flushSpill(); }
  }
  r.drain(() => {});
  while (w.spilledFrames > 0) { w.flushSpill(); r.drain(() => {}); }
  w.close();
}

function ringsChild(threads: number, ringBytes: number): Record<string, number> {
  const payloads = SIZES.map((n) => new Uint8Array(n).fill(7));
  const frames = framesPerRing(ringBytes);
  // the same traffic through a scratch ring first, so the JS heap and the allocator have
  // grown to what that much traffic needs: the readings below then differ by the mesh only
  const scratch = createRingBuffer(ringBytes);
  for (let i = 0; i < threads * (threads - 1); i++) passOver(scratch, frames, payloads);
  gc();
  const r0 = status();
  const topo = createTopology(threads, ringBytes, 64 * MiB, createRingBuffer, createDoorbell);
  gc();
  const r1 = status();
  for (let from = 0; from < threads; from++) {
    for (let to = 0; to < threads; to++) if (from !== to) passOver(topo.rings[from][to]!, frames, payloads);
  }
  gc();
  const r2 = status();
  passOver(scratch, 1, payloads); // kept alive until here: freeing it would move the allocator's baseline
  const rings = threads * (threads - 1);
  return ({ threads, ringBytes, rings, allocated: rings * (ringBytes + 128), beforeTraffic: r1.anon - r0.anon, afterTraffic: r2.anon - r0.anon, rssAfter: r2.rss });
}

// ── threads: the mesh in a process of that many Bus endpoints ────────────────────────
interface Job { self: number; topo: BusTopology; frames: number }

function endpoint(job: Job): void {
  const bus = new Bus(job.self, job.topo);
  const threads = job.topo.threads;
  let received = 0;
  const expected = (threads - 1) * job.frames;
  let sent = 0;
  let peakSpill = 0;
  let refused = 0;
  const done = () => { if (received === expected && sent === (threads - 1) * job.frames) parentPort!.postMessage({ type: 'done', peakSpill, refused }); };
  bus.start({ onPublish: () => { received++; done(); }, onControl: () => {}, onError: (err) => { throw err; } });
  const payloads = SIZES.map((n) => new Uint8Array(n).fill(7));
  const next = new Array<number>(threads).fill(0);
  parentPort!.on('message', (m: { type: string }) => {
    if (m.type === 'gc' || m.type === 'heap') {
      if (m.type === 'gc') gc();
      const h = getHeapStatistics();
      parentPort!.postMessage({ type: m.type === 'gc' ? 'gced' : 'heaped', heap: h.total_heap_size, external: h.external_memory });
      return;
    }
    if (m.type !== 'go') return;
    const pump = (): void => {
      // a few frames to each peer per turn, like API publishes spread over the shards
      for (let to = 0; to < threads; to++) {
        if (to === job.self) continue;
        for (let k = 0; k < 4 && next[to] < job.frames; k++) {
          try {
            bus.publish(to, 'app', 'ch', '', payloads[next[to] % payloads.length]);
            next[to]++;
            sent++;
          } catch (err) {
            if (!(err instanceof BusFullError)) throw err;
            refused++;
            break;
          }
        }
      }
      peakSpill = Math.max(peakSpill, bus.spilledBytes());
      if (sent < (threads - 1) * job.frames) setImmediate(pump);
      else done();
    };
    pump();
  });
  parentPort!.postMessage({ type: 'ready' });
}

async function threadsChild(threads: number, ringBytes: number): Promise<Record<string, number>> {
  gc();
  const r0 = status();
  const topo = createTopology(threads, ringBytes, 64 * MiB, createRingBuffer, createDoorbell);
  const frames = framesPerRing(256 * KiB); // the same traffic whatever the ring size
  // young generation as a shard's (main.ts: SHARD_YOUNG_GENERATION_MB)
  const workers = Array.from({ length: threads }, (_, self) => new Worker(__filename, { workerData: { self, topo, frames } satisfies Job, resourceLimits: { maxYoungGenerationSizeMb: 12 } }));
  const events = (type: string) => Promise.all(workers.map((w) => new Promise<Record<string, number>>((resolve) => {
    const on = (m: { type: string }) => { if (m.type === type) { w.off('message', on); resolve(m as unknown as Record<string, number>); } };
    w.on('message', on);
  })));
  await events('ready');
  await new Promise((r) => setTimeout(r, 500));
  const heaped = events('heaped');
  for (const w of workers) w.postMessage({ type: 'heap' });
  const heap1 = (await heaped).reduce((a, h) => a + h.heap + h.external, 0);
  const r1 = status();
  const start = Date.now();
  const finished = events('done');
  for (const w of workers) w.postMessage({ type: 'go' });
  const results = await finished;
  const ms = Date.now() - start;
  const gced = events('gced');
  for (const w of workers) w.postMessage({ type: 'gc' });
  const heap2 = (await gced).reduce((a, h) => a + h.heap + h.external, 0);
  gc();
  await new Promise((r) => setTimeout(r, 500));
  const r2 = status();
  await Promise.all(workers.map((w) => w.terminate()));
  const rings = threads * (threads - 1);
  return {
    threads, ringBytes, rings, allocated: rings * (ringBytes + 128), idle: r1.rss - r0.rss, afterTraffic: r2.rss - r0.rss, ms,
    peakSpill: Math.max(...results.map((r) => r.peakSpill)), refused: results.reduce((a, r) => a + r.refused, 0),
    heapGrowth: heap2 - heap1,
    mb: (rings * frames * AVG) / MiB,
  };
}

function child(kind: string, threads: number, ringBytes: number): Promise<Record<string, number>> {
  return new Promise((resolve, reject) => {
    const c = fork(__filename, ['--child', kind, String(threads), String(ringBytes)], { execArgv: ['--expose-gc'] });
    c.once('message', (m) => resolve(m as Record<string, number>));
    c.once('exit', (code) => { if (code !== 0) reject(new Error(`${kind} ${threads}×${ringBytes}: exit ${code}`)); });
  });
}

async function main(): Promise<void> {
  const what = process.argv[2] ?? 'all';
  console.log(`frames ${SIZES[0]} B–${SIZES[18]} B and one in 20 of ${SIZES[19]} B (mean ${AVG.toFixed(0)} B); node ${process.version}`);
  if (what === 'rings' || what === 'all') {
    console.log('\nthe mesh alone (one thread; each ring passed over twice); MiB');
    console.log('threads  ring KiB  rings  allocated  resident before traffic  resident after');
    for (const threads of [5, 17, 33]) {
      for (const ringBytes of [256 * KiB, 128 * KiB, 64 * KiB, 32 * KiB]) {
        const r = await child('rings', threads, ringBytes);
        console.log(`${String(threads).padStart(7)}  ${String(ringBytes / KiB).padStart(8)}  ${String(r.rings).padStart(5)}  ${mib(r.allocated)}    ${mib(r.beforeTraffic)}                ${mib(r.afterTraffic)}`);
      }
    }
  }
  if (what === 'threads' || what === 'all') {
    console.log('\nBus endpoints in worker threads, every thread to every other; process RSS over the bare process, MiB');
    console.log('threads  ring KiB  allocated  RSS idle  RSS after traffic  JS heaps grew  rest  traffic MiB  ms  peak spill KiB  refused');
    for (const threads of [17, 33]) {
      for (const ringBytes of [256 * KiB, 128 * KiB, 64 * KiB]) {
        const r = await child('threads', threads, ringBytes);
        const rest = r.afterTraffic - r.idle - r.heapGrowth;
        console.log(`${String(threads).padStart(7)}  ${String(ringBytes / KiB).padStart(8)}  ${mib(r.allocated)}   ${mib(r.idle)}   ${mib(r.afterTraffic)}           ${mib(r.heapGrowth)}  ${mib(rest)}      ${r.mb.toFixed(0).padStart(6)}  ${String(r.ms).padStart(6)}  ${(r.peakSpill / KiB).toFixed(0).padStart(8)}  ${r.refused}`);
      }
    }
  }
}

if (!isMainThread) endpoint(workerData as Job);
else if (process.argv[2] === '--child') {
  const [kind, threads, ringBytes] = [process.argv[3], Number(process.argv[4]), Number(process.argv[5])];
  void (kind === 'rings' ? Promise.resolve(ringsChild(threads, ringBytes)) : threadsChild(threads, ringBytes))
    .then((r) => process.send!(r, () => process.exit(0)));
} else void main();
