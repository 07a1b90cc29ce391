// Our Fossil delta encoder (delta/fossil.ts) against the reference decoder (`fossil-delta`'s
// applyDelta, which checks the target length and Fossil's checksum): a differential fuzz
// test over random bases and targets of the shapes deltas meet (edits of the base, moved
// blocks, repetitive and binary data, empty and tiny inputs, unrelated pairs). Every delta
// must decode to the target byte for byte; it must not be longer than the reference
// encoder's by more than a few bytes; on the stream of small updates the encoder exists
// for, it must be shorter.

import { applyDelta, createDelta } from 'fossil-delta';
import t, { type Test } from 'tap';
import { fossilChecksum, fossilDelta } from '../../src/delta/fossil';
import { Books, rng } from './clients';

const SEED = Number(process.env.FOSSIL_SEED ?? Date.now() % 100_000);

function bytes(rand: () => number, n: number, alphabet: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = alphabet >= 256 ? Math.floor(rand() * 256) : 97 + Math.floor(rand() * alphabet);
  return out;
}

/** A target made from `base` by random edits: replaced, inserted, deleted and moved stretches. */
function edit(rand: () => number, base: Uint8Array, edits: number, alphabet: number): Uint8Array {
  let cur = Array.from(base);
  for (let e = 0; e < edits; e++) {
    const at = Math.floor(rand() * (cur.length + 1));
    const len = 1 + Math.floor(rand() * 12);
    const kind = rand();
    if (kind < 0.3) cur.splice(at, len, ...bytes(rand, len, alphabet));
    else if (kind < 0.55) cur.splice(at, 0, ...bytes(rand, len, alphabet));
    else if (kind < 0.8) cur.splice(at, len);
    else {
      const moved = cur.splice(at, len * 4);
      const to = Math.floor(rand() * (cur.length + 1));
      cur = [...cur.slice(0, to), ...moved, ...cur.slice(to)];
    }
  }
  return Uint8Array.from(cur);
}

function check(t: Test, base: Uint8Array, target: Uint8Array, what: string): { ours: number; ref: number } {
  const d = fossilDelta(base, target);
  const back = applyDelta(base, d);
  if (Buffer.compare(Buffer.from(back), Buffer.from(target)) !== 0) {
    t.fail(`${what}: the delta does not decode to the target`);
  }
  return { ours: d.length, ref: createDelta(base, target).length };
}

t.test(`random pairs decode byte for byte (seed ${SEED})`, async (t) => {
  const rand = rng(SEED);
  let worst = 0;
  let cases = 0;
  for (let i = 0; i < 600; i++) {
    const alphabet = [2, 4, 26, 256][i % 4];
    const n = [0, 1, 3, 4, 5, 17, 100, 1200, 5000][Math.floor(rand() * 9)];
    const base = bytes(rand, n, alphabet);
    const shapes: [string, Uint8Array][] = [
      ['edited', edit(rand, base, 1 + Math.floor(rand() * 8), alphabet)],
      ['unrelated', bytes(rand, Math.floor(rand() * 300), alphabet)],
      ['identical', base],
      ['empty', new Uint8Array(0)],
    ];
    for (const [shape, target] of shapes) {
      const { ours, ref } = check(t, base, target, `case ${i} ${shape} (${n} bytes, alphabet ${alphabet})`);
      worst = Math.max(worst, ours - ref);
      cases++;
    }
  }
  t.ok(worst <= 8, `never more than 8 bytes longer than the reference encoder (worst: ${worst}, ${cases} cases)`);
});

t.test('the stream it is for: small updates of an order book are shorter than the reference encoder\'s', async (t) => {
  const books = new Books(rng(SEED + 1));
  const env = (data: string) => Buffer.from(JSON.stringify({ event: 'book', channel: 'book-eu', data }));
  let prev = env(books.update('X'));
  let ours = 0;
  let ref = 0;
  for (let i = 0; i < 200; i++) {
    const cur = env(books.update('X'));
    const r = check(t, prev, cur, `update ${i}`);
    ours += r.ours;
    ref += r.ref;
    prev = cur;
  }
  t.ok(ours < ref * 0.95, `${(ours / 200).toFixed(1)} bytes per delta against the reference's ${(ref / 200).toFixed(1)}`);
});

t.test('Fossil\'s checksum, against the reference encoder\'s trailer', async (t) => {
  const rand = rng(SEED + 2);
  for (const n of [0, 1, 2, 3, 4, 5, 15, 16, 17, 1000]) {
    const z = bytes(rand, n, 256);
    const ref = Buffer.from(createDelta(new Uint8Array(0), z)).toString('latin1');
    t.ok(ref.endsWith(`${encode(fossilChecksum(z))};`), `${n} bytes`);
  }
});

const DIGITS = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz~';
function encode(v: number): string {
  let s = '';
  do {
    s = DIGITS[v % 64] + s;
    v = Math.floor(v / 64);
  } while (v > 0);
  return s;
}
