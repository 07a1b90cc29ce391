// CPU cost of Bus.publishAll / publishTo on the publishing thread, in one thread: the
// readers of the other threads are drained here every 32 publishes (the same work in
// every variant), so the figure is encode + capacity checks + stamps + ring copies.
//   npx tsc -p . && node dist/bench/bus/publish.bench.js [publishes=400000] [bytes=200]
import { Bus } from '../../src/bus/bus';
import { createDoorbell } from '../../src/bus/doorbell';
import { createRingBuffer, RingReader } from '../../src/bus/ring';
import { createTopology } from '../../src/bus/topology';

function run(shards: number, publishes: number, size: number, targets: 'all' | 'one'): number {
  const topo = createTopology(shards + 1, 256 * 1024, 64 << 20, createRingBuffer, createDoorbell);
  const bus = new Bus(0, topo);
  let delivered = 0;
  bus.start({ onPublish: () => { delivered++; }, onControl: () => {}, onError: (err) => { throw err; } });
  const readers = Array.from({ length: shards }, (_, peer) => (peer === 0 ? null : new RingReader(topo.rings[0][peer]!)));
  const message = new Uint8Array(size).fill(65);
  const one = [shards > 1 ? 1 : 0];
  const pub = bus as unknown as { publishTo?(t: ArrayLike<number>, a: string, c: string, e: string, m: Uint8Array): void };
  const start = process.cpuUsage(); // CPU time, not wall time: the machine is shared
  for (let i = 0; i < publishes; i++) {
    if (targets === 'all') bus.publishAll('app-id', 'my-channel', '', message);
    else if (pub.publishTo) pub.publishTo(one, 'app-id', 'my-channel', '', message);
    else bus.publish(one[0], 'app-id', 'my-channel', '', message);
    if ((i & 31) === 31) for (const r of readers) r?.drain(() => {});
  }
  const used = process.cpuUsage(start);
  const ns = ((used.user + used.system) * 1000) / publishes;
  bus.stop();
  if (delivered < 0) console.log(delivered);
  return ns;
}

function main(): void {
  const publishes = Number(process.argv[2] ?? 400_000);
  const size = Number(process.argv[3] ?? 200);
  console.log(`${publishes} publishes of ${size} B per run, node ${process.version}; CPU ns per call, median of 5`);
  for (const [shards, targets] of [[1, 'all'], [4, 'all'], [16, 'all'], [4, 'one']] as const) {
    const runs = Array.from({ length: 5 }, () => run(shards, publishes, size, targets)).sort((a, b) => a - b);
    console.log(`  ${String(shards).padStart(2)} shards, ${targets === 'all' ? 'publishAll     ' : 'to one (other)'}  ${runs[2].toFixed(0).padStart(6)} ns   (runs ${runs.map((r) => r.toFixed(0)).join(' ')})`);
  }
}

main();
