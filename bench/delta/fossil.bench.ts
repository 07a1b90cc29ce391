// Our Fossil encoder (src/delta/fossil.ts) against `fossil-delta`'s createDelta on the
// issue's bandwidth stream (1 KB order-book envelopes, two levels and the seq/ts fields
// changing per update): bytes per delta and µs of CPU per delta, one symbol and eight
// (each delta against the same symbol's previous envelope). Every delta is checked with
// fossil-delta's applyDelta.
//
//   npx tsc -p . && node dist/bench/delta/fossil.bench.js [--deltas 2000] [--rounds 5]
import { applyDelta, createDelta } from 'fossil-delta';
import { fossilDelta } from '../../src/delta/fossil';
import { Books, rng } from '../../test/delta/clients';

const arg = (n: string, d: number) => (process.argv.includes(`--${n}`) ? Number(process.argv[process.argv.indexOf(`--${n}`) + 1]) : d);
const DELTAS = arg('deltas', 2000);
const ROUNDS = arg('rounds', 5);

function pairs(symbols: string[]): [Uint8Array, Uint8Array][] {
  const books = new Books(rng(1));
  const env = (d: string) => Buffer.from(JSON.stringify({ event: 'book', channel: 'book-eu', data: d }));
  const last = new Map<string, Uint8Array>();
  const out: [Uint8Array, Uint8Array][] = [];
  for (let i = 0; out.length < DELTAS; i++) {
    const s = symbols[i % symbols.length];
    const cur = env(books.update(s));
    const prev = last.get(s);
    last.set(s, cur);
    if (prev) out.push([prev, cur]);
  }
  return out;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

for (const symbols of [['X'], ['A', 'B', 'C', 'D', 'E', 'F', 'G', 'H']]) {
  const list = pairs(symbols);
  const encoders: [string, (a: Uint8Array, b: Uint8Array) => Uint8Array][] = [['fossil-delta createDelta', createDelta], ['ours (delta/fossil.ts)', fossilDelta]];
  const us: Record<string, number[]> = {};
  const bytes: Record<string, number> = {};
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, enc] of encoders) {
      let total = 0;
      const t0 = process.hrtime.bigint();
      for (const [a, b] of list) total += enc(a, b).length;
      (us[name] ??= []).push(Number(process.hrtime.bigint() - t0) / 1000 / list.length);
      bytes[name] = total / list.length;
    }
  }
  for (const [name, enc] of encoders) {
    for (const [a, b] of list) if (Buffer.compare(Buffer.from(applyDelta(a, enc(a, b))), Buffer.from(b)) !== 0) throw new Error(`${name}: a delta does not decode`);
  }
  process.stdout.write(`${symbols.length} symbol(s), ${list.length} deltas of ~${list[0][1].length}-byte envelopes (median of ${ROUNDS} rounds):\n`);
  for (const [name] of encoders) {
    process.stdout.write(`  ${name.padEnd(26)} ${bytes[name].toFixed(1)} bytes, ${median(us[name]).toFixed(1)} µs per delta (${us[name].map((x) => x.toFixed(1)).join(', ')})\n`);
  }
}
