// Ring throughput: one producer thread → one consumer thread, doorbell wake-ups.
//   npx tsc -p . && node dist/bench/bus/ring.bench.js [frames=1000000] [ringKiB=256]
// Also: the same ring in one thread (CPU cost per frame, no cross-core traffic),
// and the reader's copy-out strategies side by side.
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { DoorbellListener, DoorbellRinger, createDoorbell } from '../../src/bus/doorbell';
import { createRingBuffer, RingReader, RingWriter } from '../../src/bus/ring';

interface Job { ring: SharedArrayBuffer; doorbell: SharedArrayBuffer; size: number; frames: number; }

function producer(job: Job): void {
  const ringer = new DoorbellRinger(job.doorbell);
  const w = new RingWriter(job.ring, { onWritten: () => ringer.request() });
  const payload = new Uint8Array(job.size).fill(7);
  let sent = 0;
  if (job.size > job.ring.byteLength / 2) {
    // chunked payloads always pass through the spill queue; the writer streams them
    // itself (waitAsync on HEAD), so just keep it fed up to its bound
    const feed = (): void => {
      while (sent < job.frames && w.write(1, payload)) sent++;
      if (sent < job.frames) setTimeout(feed, 1);
    };
    return feed();
  }
  const pump = (): void => {
    if (w.spilledFrames > 0) w.flushSpill();
    // keep the spill empty: measure the ring, not an ever-growing queue
    for (let i = 0; i < 4096 && sent < job.frames && w.spilledFrames === 0; i++) {
      w.write(1, payload);
      sent++;
    }
    if (sent < job.frames || w.spilledFrames > 0) setImmediate(pump);
    else w.close();
  };
  pump();
}

async function crossThread(size: number, frames: number, ringBytes: number): Promise<void> {
  const job: Job = { ring: createRingBuffer(ringBytes), doorbell: createDoorbell(), size, frames };
  const reader = new RingReader(job.ring);
  let got = 0;
  let wakes = 0;
  const keepAlive = setInterval(() => {}, 1000); // waitAsync alone does not keep the loop alive
  const start = process.hrtime.bigint();
  const worker = new Worker(__filename, { workerData: job });
  await new Promise<void>(resolve => {
    const listener = new DoorbellListener(job.doorbell, () => {
      wakes++;
      got += reader.drain(() => {});
      if (got === frames) { listener.stop(); resolve(); }
    });
    listener.start();
  });
  const s = Number(process.hrtime.bigint() - start) / 1e9;
  clearInterval(keepAlive);
  await worker.terminate();
  report(`2 threads  ${String(size).padStart(8)} B`, frames, size, s, `${wakes} consumer wake-ups`);
}

function oneThread(size: number, frames: number, ringBytes: number): void {
  const sab = createRingBuffer(ringBytes);
  const w = new RingWriter(sab);
  const r = new RingReader(sab);
  const payload = new Uint8Array(size).fill(7);
  const batch = Math.max(1, Math.floor(ringBytes / 2 / (size + 8)));
  const start = process.hrtime.bigint();
  for (let sent = 0; sent < frames;) {
    for (let i = 0; i < batch && sent < frames; i++, sent++) w.write(1, payload);
    r.drain(() => {});
  }
  w.close();
  report(`1 thread   ${String(size).padStart(8)} B`, frames, size, Number(process.hrtime.bigint() - start) / 1e9);
}

/** The reader's choice: copy each payload out of shared memory, or hand out a view. */
function copyStrategies(size: number, frames: number): void {
  const sab = new SharedArrayBuffer(1 << 20);
  const u8 = new Uint8Array(sab);
  const buf = Buffer.from(sab);
  let sink = 0;
  const run = (name: string, f: (at: number) => Uint8Array): void => {
    const start = process.hrtime.bigint();
    for (let i = 0; i < frames; i++) sink += f((i * 64) & 0x7ffff).length;
    const ns = Number(process.hrtime.bigint() - start) / frames;
    console.log(`  ${name.padEnd(40)} ${String(size).padStart(5)} B  ${ns.toFixed(0).padStart(5)} ns/frame`);
  };
  run('view: u8.subarray (no copy)', at => u8.subarray(at, at + size));
  run('Buffer.allocUnsafe + set(subarray)', at => { const b = Buffer.allocUnsafe(size); b.set(u8.subarray(at, at + size)); return b; });
  run('Buffer.allocUnsafe + buf.copy', at => { const b = Buffer.allocUnsafe(size); buf.copy(b, 0, at, at + size); return b; });
  run('u8.slice', at => u8.slice(at, at + size));
  run('new Uint8Array + set(subarray)', at => { const b = new Uint8Array(size); b.set(u8.subarray(at, at + size)); return b; });
  if (sink < 0) console.log(sink);
}

function report(name: string, frames: number, size: number, s: number, extra = ''): void {
  const fps = frames / s;
  const rate = fps >= 1e4 ? `${(fps / 1e6).toFixed(2)} M` : `${fps.toFixed(1)}  `;
  console.log(`${name}  ${rate.padStart(7)} frames/s  ${((fps * size) / 1e6).toFixed(0).padStart(5)} MB/s  ${extra}`);
}

async function main(): Promise<void> {
  const frames = Number(process.argv[2] ?? 1_000_000);
  const ringBytes = Number(process.argv[3] ?? 256) * 1024;
  console.log(`ring ${ringBytes / 1024} KiB, ${frames} frames per run, node ${process.version}`);
  for (const size of [64, 1024]) oneThread(size, frames, ringBytes);
  for (const size of [64, 1024]) await crossThread(size, frames, ringBytes);
  await crossThread(10 * 1024 * 1024, 50, ringBytes); // a max-size publish, chunked
  console.log('reader copy-out, per frame (RingReader uses Buffer.allocUnsafe + set):');
  for (const size of [64, 256, 1024]) copyStrategies(size, 1_000_000);
}

if (isMainThread) void main();
else if (parentPort !== null) producer(workerData as Job);
