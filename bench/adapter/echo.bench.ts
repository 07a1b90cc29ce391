// What a node spends on each of its own publishes that the backend echoes back
// (adapter/cluster.ts onPublish): every node receives its own publishes on the shared
// subject and drops them. It used to decode the whole frame first
// (decodeNode: the node id, the delta byte, the publish frame's app, channel, except and
// tags); now only the sender's id bytes are compared (isPublishFrom).
//   npx tsc -p . && node dist/bench/adapter/echo.bench.js [iterations=2000000] [rounds=5]
import { decodeNode, encodeNodePublish, isPublishFrom, Kind } from '../../src/adapter/wire';

const N = Number(process.argv[2] ?? 2_000_000);
const ROUNDS = Number(process.argv[3] ?? 5);
const id = 'a1b2c3d4e5f60718';
const message = Buffer.from(JSON.stringify({ event: 'bench', channel: 'lat0-0', data: JSON.stringify({ t: Date.now(), p: 'x'.repeat(100) }) }));
const frame = encodeNodePublish(id, { app: 'app-id', channel: 'lat0-0', except: '', message });

function run(name: string, fn: (b: Uint8Array) => boolean): number {
  let drops = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) if (fn(frame)) drops++;
  const ns = Number(process.hrtime.bigint() - t0) / N;
  if (drops !== N) throw new Error(`${name}: dropped ${drops} of ${N}`);
  return ns;
}

const decodeFirst = (b: Uint8Array) => {
  const d = decodeNode(b);
  return d.kind === Kind.Publish && d.node === id;
};
const senderFirst = (b: Uint8Array) => isPublishFrom(b, id);
const results: Record<string, number[]> = { decode: [], sender: [] };
for (let r = 0; r < ROUNDS; r++) {
  results.decode.push(run('decode', decodeFirst));
  results.sender.push(run('sender', senderFirst));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
process.stdout.write(`frame ${frame.length} bytes; ns per echoed publish (median of ${ROUNDS} rounds of ${N}):\n`);
process.stdout.write(`  decode the frame, then compare the node id: ${median(results.decode).toFixed(0)} ns (${results.decode.map((x) => x.toFixed(0)).join(', ')})\n`);
process.stdout.write(`  compare the sender's id bytes only:         ${median(results.sender).toFixed(0)} ns (${results.sender.map((x) => x.toFixed(0)).join(', ')})\n`);
