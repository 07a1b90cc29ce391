// The CPU a cross-thread wake-up costs at a low, paced rate: the part of a cross-shard
// publish hop that a single shard never pays (docs/benchmarks.md, "CPU per publish
// against the shard count"). A producer thread sends one wake-up every `gapMs` (as a
// publish at 1,000/s does); the consumer thread drains a counter and goes back to sleep.
// CPU is read per thread from /proc/thread-self/schedstat (nanoseconds on the CPU), so
// it includes the kernel's share (futex, eventfd, epoll, the scheduler), not only JS.
//   npx tsc -p . && node dist/bench/bus/wake.bench.js [wakes=3000] [gapMs=1] [rounds=3]
// Variants:
//   waitAsync  the bus's doorbell (src/bus/doorbell.ts): Atomics.notify → Atomics.waitAsync
//   port       a MessagePort message per wake-up (libuv async handle + structured clone)
//   none       the producer's pacing alone, the consumer asleep (the floor to subtract)
import { readFileSync } from 'node:fs';
import { isMainThread, MessageChannel, MessagePort, parentPort, Worker, workerData } from 'node:worker_threads';
import { DoorbellListener, DoorbellRinger, createDoorbell } from '../../src/bus/doorbell';

type Variant = 'waitAsync' | 'port' | 'none';
interface Job { variant: Variant; doorbell: SharedArrayBuffer; port: MessagePort; wakes: number; }

/** CPU time of the calling thread in nanoseconds (kernel + user). */
function threadCpuNs(): number {
  return Number(readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]);
}

function consumer(job: Job): void {
  const start = threadCpuNs();
  let seen = 0;
  const done = (): void => {
    parentPort!.postMessage({ cpuNs: threadCpuNs() - start, seen });
  };
  if (job.variant === 'waitAsync') {
    const counter = new Int32Array(job.doorbell, 0, 1);
    const keepAlive = setInterval(() => {}, 1 << 30);
    const listener = new DoorbellListener(job.doorbell, () => {
      seen = Atomics.load(counter, 0);
      if (seen >= job.wakes) { listener.stop(); clearInterval(keepAlive); done(); }
    });
    listener.start();
  } else if (job.variant === 'port') {
    job.port.on('message', () => {
      if (++seen >= job.wakes) { job.port.close(); done(); }
    });
  } else {
    job.port.on('message', () => { seen = job.wakes; job.port.close(); done(); });
  }
}

async function run(variant: Variant, wakes: number, gapMs: number): Promise<{ consumerUs: number; producerUs: number; }> {
  const doorbell = createDoorbell();
  const { port1, port2 } = new MessageChannel();
  const worker = new Worker(__filename, { workerData: { variant, doorbell, port: port2, wakes }, transferList: [port2] });
  const result = new Promise<{ cpuNs: number; }>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  await new Promise(r => setTimeout(r, 200)); // the worker is up and asleep
  const ringer = new DoorbellRinger(doorbell);
  const start = threadCpuNs();
  for (let i = 0; i < wakes; i++) {
    if (variant === 'waitAsync') ringer.ringNow();
    else if (variant === 'port') port1.postMessage(0);
    await new Promise(r => setTimeout(r, gapMs));
  }
  const producerNs = threadCpuNs() - start;
  if (variant === 'none') port1.postMessage(0);
  const { cpuNs } = await result;
  port1.close();
  await worker.terminate();
  return { consumerUs: cpuNs / 1000 / wakes, producerUs: producerNs / 1000 / wakes };
}

async function main(): Promise<void> {
  const [wakes = 3000, gapMs = 1, rounds = 3] = process.argv.slice(2).map(Number);
  console.log(`${wakes} wake-ups, one every ${gapMs} ms, ${rounds} rounds; µs of CPU per wake-up (consumer / producer)`);
  const variants: Variant[] = ['none', 'waitAsync', 'port'];
  const rows = new Map<Variant, string[]>(variants.map(v => [v, []]));
  for (let r = 0; r < rounds; r++) {
    for (const v of r % 2 === 0 ? variants : [...variants].reverse()) {
      const { consumerUs, producerUs } = await run(v, wakes, gapMs);
      rows.get(v)!.push(`${consumerUs.toFixed(1)} / ${producerUs.toFixed(1)}`);
    }
  }
  for (const [v, cells] of rows) console.log(`${v.padEnd(10)} ${cells.join('   ')}`);
}

if (isMainThread) void main();
else consumer(workerData as Job);
