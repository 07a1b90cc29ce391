// CPU cost of one publish through a shard's publish pipeline (channels/publisher.ts
// publishOne), in one thread: shard 0 publishes to a channel with a subscriber on shard 1,
// with the pipeline's real outbound stages. The rings of the other threads are drained here
// every 32 publishes (the same work in every variant), so the figure is the pipeline: the
// stages, the bus writes (one all-or-nothing publishTo, or one batch when a stage writes)
// and the ring copies.
//   npx tsc -p . && node dist/bench/bus/stages.bench.js [publishes=200000] [bytes=200]
//
//   no stages      delta on, no delta subscriber: the delta route looks and writes nothing
//   delta route    a delta subscriber of the channel: a copy to the sequencer as well
//   adapter out    a cluster adapter: a copy to the primary as well
import { Bus } from '../../src/bus/bus';
import { createDoorbell } from '../../src/bus/doorbell';
import { createRingBuffer, RingReader } from '../../src/bus/ring';
import { createTopology } from '../../src/bus/topology';
import { bridgeOut } from '../../src/channels/bridge';
import { allocateInterest, Interest } from '../../src/channels/interest';
import { createPublisher, type OutboundStage } from '../../src/channels/publisher';
import { deltaRoute } from '../../src/delta/stage';

const SHARDS = 2;
const PRIMARY = SHARDS;
const SEQUENCER = SHARDS + 1;
const noLog = { error: () => undefined, warn: () => undefined, info: () => undefined, debug: () => undefined } as never;
type Variant = 'no stages' | 'delta route' | 'adapter out';

function run(variant: Variant, publishes: number, size: number): number {
  const topo = createTopology(SHARDS + 2, 256 * 1024, 64 << 20, createRingBuffer, createDoorbell);
  const bus = new Bus(0, topo);
  const interest = allocateInterest(SHARDS, 1 << 10);
  const fossil = allocateInterest(SHARDS, 1 << 10);
  const xdelta3 = allocateInterest(SHARDS, 1 << 10);
  new Interest(interest, SHARDS, 1).add('app-id', 'my-channel');
  if (variant === 'delta route') new Interest(fossil, SHARDS, 1).add('app-id', 'my-channel');
  const delta = deltaRoute(SEQUENCER, { fossil: new Interest(fossil, SHARDS, 0), xdelta3: new Interest(xdelta3, SHARDS, 0) });
  const stages: { delta: OutboundStage[]; adapter: OutboundStage[] } = { delta: [delta], adapter: variant === 'adapter out' ? [bridgeOut(PRIMARY)] : [] };
  const publisher = createPublisher({ bus, interest: new Interest(interest, SHARDS, 0), shards: SHARDS, uws: null, sockets: new Map(), log: noLog, out: (e) => e, stages });
  bus.start({ onPublish: () => undefined, onControl: () => undefined, onError: (err) => { throw err; } });
  const readers = [1, PRIMARY, SEQUENCER].map((peer) => new RingReader(topo.rings[0][peer]!));
  const message = JSON.stringify({ event: 'e', channel: 'my-channel', data: 'x'.repeat(size) });
  const start = process.cpuUsage(); // CPU time, not wall time: the machine is shared
  for (let i = 0; i < publishes; i++) {
    publisher.publishOne({ kind: 'api', app: 'app-id', channel: 'my-channel', except: '', message });
    if ((i & 31) === 31) for (const r of readers) r.drain(() => {});
  }
  const used = process.cpuUsage(start);
  bus.stop();
  return ((used.user + used.system) * 1000) / publishes;
}

function main(): void {
  const publishes = Number(process.argv[2] ?? 200_000);
  const size = Number(process.argv[3] ?? 200);
  console.log(`${publishes} publishes of ${size} B data per run, node ${process.version}; CPU ns per publish, median of 7 (variants interleaved)`);
  const variants: Variant[] = ['no stages', 'delta route', 'adapter out'];
  const runs = new Map<Variant, number[]>(variants.map((v) => [v, []]));
  for (let round = 0; round < 7; round++) for (const v of variants) runs.get(v)!.push(run(v, publishes, size));
  for (const v of variants) {
    const r = runs.get(v)!.sort((a, b) => a - b);
    console.log(`  ${v.padEnd(12)} ${r[3].toFixed(0).padStart(6)} ns   (runs ${r.map((x) => x.toFixed(0)).join(' ')})`);
  }
}

main();
