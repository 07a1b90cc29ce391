// What adapter.cluster_secret costs per cluster frame (adapter/signed.ts): the sender
// signs every frame (HMAC-SHA256 over subject and bytes, one copy into the signed frame),
// every receiver checks it before reading anything, but for its own publishes echoed by
// the backend (dropped by their sender id, unchecked, as without a secret). Measured
// against the same steps without a secret, for a small and a large event.
//   npx tsc -p . && node dist/bench/adapter/signed.bench.js [iterations=200000] [rounds=5]
import { createSecretKey } from 'node:crypto';
import { decodeNode, encodeNodePublish, isPublishFrom, openFrame, signedBody, signFrame } from '../../src/adapter/wire';

const N = Number(process.argv[2] ?? 200_000);
const ROUNDS = Number(process.argv[3] ?? 5);
const id = 'a1b2c3d4e5f60718';
const subject = 'ringcast.pub';
const key = createSecretKey(Buffer.from('bench-secret-0123456789'));

function median(xs: number[]): number {
  return [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
}

function time(fn: () => void): number {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) fn();
  return Number(process.hrtime.bigint() - t0) / N;
}

for (const size of [100, 10_000]) {
  const message = Buffer.from(JSON.stringify({ event: 'bench', channel: 'lat0-0', data: 'x'.repeat(size) }));
  const f = { app: 'app-id', channel: 'lat0-0', except: '', message };
  const frame = encodeNodePublish(id, f);
  const signed = signFrame(key, subject, frame);
  const check = (b: Uint8Array): Uint8Array => {
    const r = openFrame(key, subject, b);
    if (typeof r === 'string') throw new Error(r);
    return r.frame;
  };
  const steps: [string, () => void, () => void][] = [
    ['send (encode; encode + sign)', () => encodeNodePublish(id, f), () => signFrame(key, subject, encodeNodePublish(id, f))],
    ['receive another node\'s (decode; check + decode)', () => decodeNode(frame), () => decodeNode(check(signed))],
    ['receive its own echo (sender id, unchecked)', () => isPublishFrom(frame, id), () => isPublishFrom(signedBody(signed), id)],
  ];
  process.stdout.write(`event of ${message.length} bytes, node frame ${frame.length} bytes, signed ${signed.length}; ns per frame, median of ${ROUNDS} rounds of ${N}:\n`);
  for (const [name, plain, withSecret] of steps) {
    const p: number[] = [];
    const s: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      p.push(time(plain));
      s.push(time(withSecret));
    }
    process.stdout.write(`  ${name.padEnd(52)} no secret ${median(p).toFixed(0).padStart(6)}   secret ${median(s).toFixed(0).padStart(6)}   (+${(median(s) - median(p)).toFixed(0)})\n`);
  }
}
