// A Fossil delta encoder (the format of fossil-scm's delta.c, which every Fossil decoder
// reads, `fossil-delta`'s applyDelta and our client's included) that finds shorter matches
// than the reference encoder. Why our own: the reference encoder (and `fossil-delta`, a
// port of it) only starts a copy where a whole 16-byte block of the base, at a multiple of
// 16, recurs in the target, so the short unchanged stretches between the fields a small
// update changes (`,"ts":17000000000` between a sequence number and a timestamp) go out
// as literals. On the bandwidth stream (bench/delta/delta.bench.ts) that is a
// third of each delta and keeps a conflation-keyed stream above the 0.2× target; see
// docs/benchmarks.md "Delta compression" for the measurement.
//
// Format: `<target length>\n`, then commands — `<n>@<offset>,` copies n bytes of the base
// from offset, `<n>:<n bytes>` inserts n literal bytes — then `<checksum>;`. Integers are
// written in Fossil's base-64 digits, most significant first.
//
// The search: every position of the base is indexed by its first MIN_MATCH bytes (a hash
// table of chains); at each position of the target the chain is walked (at most MAX_CHAIN
// candidates), each candidate extended forward and backward into the pending literal, and
// the longest taken if it saves bytes over leaving it literal (a copy command costs its
// digits plus two, and splits the literal run: one more insert header).

const DIGITS = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz~';
const DIGIT_CODES = Uint8Array.from(DIGITS, (c) => c.charCodeAt(0));

/**
 * Bytes a match must share to be found (the index key). A shorter match would not pay for
 * its copy command (its digits + 2) and the insert header it adds; a longer key keeps the
 * chains short on repetitive data.
 */
const MIN_MATCH = 8;
/** Candidates looked at per target position (bounds the work on repetitive input). */
const MAX_CHAIN = 64;
/**
 * Base positions indexed: every STEP-th. A match of MIN_MATCH + STEP − 1 bytes or more
 * still contains an indexed position, met as the scan of the target passes over it (and
 * extended back to its start); a quarter of the hashing.
 */
const STEP = 4;
/** A match shorter than this is compared with those starting in the next STEP − 1 positions. */
const LAZY = 32;

/** The index's arrays, kept between calls (the encoder runs synchronously, one call at a time per thread). */
let headBuf = new Int32Array(0);
let prevBuf = new Int32Array(0);

/** Digits of `v` in Fossil's base 64. */
function intLen(v: number): number {
  let n = 1;
  while (v >= 64) {
    v = Math.floor(v / 64);
    n++;
  }
  return n;
}

class Out {
  buf: Uint8Array;
  len = 0;
  constructor(size: number) {
    this.buf = new Uint8Array(Math.max(64, size));
  }

  private room(n: number): void {
    if (this.len + n <= this.buf.length) return;
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.len + n));
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }

  int(v: number): void {
    const n = intLen(v);
    this.room(n);
    for (let i = n - 1; i >= 0; i--) {
      this.buf[this.len + i] = DIGIT_CODES[v % 64];
      v = Math.floor(v / 64);
    }
    this.len += n;
  }

  byte(b: number): void {
    this.room(1);
    this.buf[this.len++] = b;
  }

  bytes(src: Uint8Array, from: number, to: number): void {
    this.room(to - from);
    this.buf.set(src.subarray(from, to), this.len);
    this.len += to - from;
  }
}

/** Fossil's checksum of the target: four byte lanes summed over 32-bit words, the tail folded in. */
export function fossilChecksum(z: Uint8Array): number {
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let i = 0;
  const n = z.length;
  for (; i + 4 <= n; i += 4) {
    s0 = (s0 + z[i]) | 0;
    s1 = (s1 + z[i + 1]) | 0;
    s2 = (s2 + z[i + 2]) | 0;
    s3 = (s3 + z[i + 3]) | 0;
  }
  let sum = (s3 + (s2 << 8) + (s1 << 16) + (s0 << 24)) | 0;
  const rest = n - i;
  if (rest >= 3) sum = (sum + (z[i + 2] << 8)) | 0;
  if (rest >= 2) sum = (sum + (z[i + 1] << 16)) | 0;
  if (rest >= 1) sum = (sum + (z[i] << 24)) | 0;
  return sum >>> 0;
}

const CODE = { NL: 10, AT: 64, COMMA: 44, COLON: 58, SEMI: 59 } as const;

function word(z: Uint8Array, i: number): number {
  return ((z[i] << 24) | (z[i + 1] << 16) | (z[i + 2] << 8) | z[i + 3]) | 0;
}

/** The MIN_MATCH bytes at `i`, hashed to `bits` bits. */
function hash(z: Uint8Array, i: number, shift: number): number {
  return (Math.imul(word(z, i), 0x9e3779b1) ^ Math.imul(word(z, i + 4), 0x85ebca6b)) >>> shift;
}

function same(a: Uint8Array, i: number, b: Uint8Array, j: number): boolean {
  return word(a, i) === word(b, j) && word(a, i + 4) === word(b, j + 4);
}

/** The Fossil delta that turns `base` into `target`. */
export function fossilDelta(base: Uint8Array, target: Uint8Array): Uint8Array {
  const out = new Out(target.length + 32);
  out.int(target.length);
  out.byte(CODE.NL);
  const n = target.length;
  const m = base.length;
  let lit = 0; // start of the literal run not yet written
  const insert = (to: number) => {
    if (to <= lit) return;
    out.int(to - lit);
    out.byte(CODE.COLON);
    out.bytes(target, lit, to);
  };
  if (m >= MIN_MATCH && n >= MIN_MATCH) {
    let bits = 8;
    while (1 << bits < m && bits < 20) bits++;
    const shift = 32 - bits;
    if (headBuf.length < 1 << bits) headBuf = new Int32Array(1 << bits);
    if (prevBuf.length < m) prevBuf = new Int32Array(Math.max(m, prevBuf.length * 2));
    const head = headBuf.subarray(0, 1 << bits).fill(-1);
    const prev = prevBuf;
    // later positions first in each chain: on a tie the nearest offset is the one kept
    for (let p = 0; p + MIN_MATCH <= m; p += STEP) {
      const h = hash(base, p, shift);
      prev[p] = head[h];
      head[h] = p;
    }
    let i = 0;
    /** base offset − target offset of the last copy: the first candidate tried (edits keep the rest aligned). */
    let diag = 0;
    let best = 0;
    let bestOff = 0;
    let bestStart = 0;
    /** The longest match found at target position `at`, each candidate extended both ways. */
    const search = (at: number) => {
      const consider = (c: number) => {
        let len = MIN_MATCH;
        while (at + len < n && c + len < m && target[at + len] === base[c + len]) len++;
        let back = 0;
        while (back < at - lit && back < c && target[at - back - 1] === base[c - back - 1]) back++;
        if (len + back > best) {
          best = len + back;
          bestOff = c - back;
          bestStart = at - back;
        }
      };
      const d = at + diag;
      if (d >= 0 && d + MIN_MATCH <= m && same(base, d, target, at)) consider(d);
      let steps = 0;
      for (let c = head[hash(target, at, shift)]; c >= 0 && steps < MAX_CHAIN; c = prev[c], steps++) {
        if (c !== d && same(base, c, target, at)) consider(c);
      }
    };
    while (i + MIN_MATCH <= n) {
      best = 0;
      search(i);
      // a short match may be a chance one (low-entropy data) while the true alignment
      // starts a few bytes on, at the next indexed position: look that far before taking it
      if (best > 0 && best < LAZY) for (let k = 1; k < STEP && i + k + MIN_MATCH <= n; k++) search(i + k);
      // a copy pays for its command and for splitting the literal run (one more insert header)
      const cost = intLen(best) + intLen(bestOff) + 4;
      if (best > cost) {
        insert(bestStart);
        out.int(best);
        out.byte(CODE.AT);
        out.int(bestOff);
        out.byte(CODE.COMMA);
        diag = bestOff - bestStart;
        i = bestStart + best;
        lit = i;
      } else {
        i++;
      }
    }
  }
  insert(n);
  out.int(fossilChecksum(target));
  out.byte(CODE.SEMI);
  return out.buf.slice(0, out.len);
}
