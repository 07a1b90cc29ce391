// Seeded generators for the fuzz tests (test/fuzz/*.fuzz.test.ts): a small PRNG
// (mulberry32) and generators / mutators of JSON values, strings and bytes. Everything
// is a pure function of the seed, so a failing run is reproduced with FUZZ_SEED=<seed>.

/** The seed of a fuzz file: FUZZ_SEED (decimal or 0x hex) when set, else the file's fixed one. */
export function fuzzSeed(fixed: number): number {
  const env = process.env.FUZZ_SEED;
  if (env === undefined || env.trim() === '') return fixed >>> 0;
  const n = Number(env.trim());
  if (!Number.isFinite(n)) throw new Error(`FUZZ_SEED=${env} is not a number`);
  return n >>> 0;
}

/** Case count scaled by FUZZ_SCALE (default 1), at least 1. */
export function fuzzCases(base: number): number {
  const scale = Number(process.env.FUZZ_SCALE ?? '1');
  return Math.max(1, Math.round(base * (Number.isFinite(scale) && scale > 0 ? scale : 1)));
}

export class Rng {
  private s: number;

  constructor(readonly seed: number) {
    this.s = seed >>> 0;
  }

  /** mulberry32: uniform in [0, 1). */
  next(): number {
    this.s = (this.s + 0x6d2b79f5) >>> 0;
    let t = this.s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** Integer in [lo, hi]. */
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  bool(p = 0.5): boolean {
    return this.next() < p;
  }

  pick<T>(arr: readonly T[]): T {
    return arr[this.int(arr.length)];
  }

  /** Picks by weight: [[weight, value], …]. */
  weighted<T>(items: readonly (readonly [number, T])[]): T {
    let total = 0;
    for (const [w] of items) total += w;
    let r = this.next() * total;
    for (const [w, v] of items) {
      r -= w;
      if (r < 0) return v;
    }
    return items[items.length - 1][1];
  }

  /** A child generator (its own stream), so that one case's draws do not shift the others. */
  fork(): Rng {
    return new Rng(Math.floor(this.next() * 4294967296));
  }

  bytes(n: number): Buffer {
    const b = Buffer.allocUnsafe(n);
    for (let i = 0; i < n; i++) b[i] = this.int(256);
    return b;
  }
}

/** Strings that tend to break parsers, validators and encoders. */
export const NASTY_STRINGS: readonly string[] = [
  '', ' ', '\u0000', 'a\u0000b', '\n', '\r\n', '\t', '"', '\\', "'", '{}', '[]', 'null', 'true', '0', '-0', '1e400',
  'NaN', 'Infinity', '__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty',
  '💩', '\ud800', '\udfff', 'ǅ', '\u202e', '\ufeff', 'é', 'e\u0301', '日本語', '\u2028\u2029',
  '%', '%zz', '%00', '%ff', '%e2%82', '%25', '+', '&', '=', '?', '#', '/', '..', '../..', '*', ';', ',', ':',
  'private-', 'presence-', 'private-encrypted-', 'cache-', '#cache-0', '#cache-', 'x#cache-99999999999999999999',
  '#server-to-user-', '#server-to-user-u1', 'client-', 'pusher:', 'pusher_internal:', 'proto:', 'proto_internal:',
  '123.456', '1.2.3', '.', '-1.-1', 'app-key', 'app-id', '<script>alert(1)</script>', '${x}', '%s%s%n',
];

/** Numbers that tend to break numeric code (as JSON can carry them; -0 becomes 0). */
export const NASTY_NUMBERS: readonly number[] = [
  0, -1, 1, 0.5, -0.5, 1e21, -1e21, 1.7976931348623157e308, -1.7976931348623157e308, 5e-324,
  2 ** 31, 2 ** 32, 2 ** 53, 2 ** 53 + 2, -(2 ** 63), 4000, 4009, 4301, 65535, 123.456,
];

/** Characters channel names may use, plus a few they may not. */
const NAME_CHARS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-=@,.;';
const BAD_CHARS = '#/ ?%&+:<>"\'\\\u0000\u007fé💩\u00a0\ud800';

/** A random string: short, of nasty parts, unicode, long or very long. */
export function randString(rng: Rng, maxLen = 300): string {
  switch (rng.int(8)) {
    case 0: return rng.pick(NASTY_STRINGS);
    case 1: return randName(rng, rng.range(1, 40));
    case 2: return rng.pick(NASTY_STRINGS) + randName(rng, rng.range(0, 10)) + rng.pick(NASTY_STRINGS);
    case 3: {
      let s = '';
      const n = rng.range(0, 30);
      for (let i = 0; i < n; i++) s += String.fromCharCode(rng.bool(0.7) ? rng.range(0, 0x7f) : rng.range(0x80, 0xffff));
      return s;
    }
    case 4: return rng.pick(['a', '0', '#', '%', '💩', 'é', '\u0000']).repeat(rng.range(1, maxLen));
    case 5: return randName(rng, rng.range(180, 220));
    case 6: return String(rng.pick(NASTY_NUMBERS));
    default: return randName(rng, rng.range(1, 12));
  }
}

/** `n` characters, mostly from the channel-name set. */
export function randName(rng: Rng, n: number, badP = 0.03): string {
  let s = '';
  for (let i = 0; i < n; i++) s += rng.bool(badP) ? rng.pick([...BAD_CHARS]) : NAME_CHARS[rng.int(NAME_CHARS.length)];
  return s;
}

/** A channel name: mostly valid, of every type, sometimes invalid or odd. */
export function randChannel(rng: Rng, pool: readonly string[] = []): string {
  if (pool.length > 0 && rng.bool(0.4)) return rng.pick(pool);
  const prefix = rng.weighted<string>([
    [4, ''], [3, 'private-'], [3, 'presence-'], [1, 'private-encrypted-'], [1, 'cache-'],
    [1, 'private-cache-'], [1, 'presence-cache-'], [1, '#server-to-user-'],
  ]);
  let name = prefix + randName(rng, rng.range(0, 12), 0.02);
  if (rng.bool(0.1)) name += '#cache-' + rng.pick(['1', '0', '60', '', 'x', '99999999999999999999', '-5']);
  if (rng.bool(0.05)) name = name + 'x'.repeat(rng.range(150, 260));
  if (rng.bool(0.05)) name = randString(rng);
  return name;
}

/** A random JSON value (no undefined; non-finite numbers never appear). */
export function randJson(rng: Rng, depth = 3): unknown {
  const leaf = depth <= 0 || rng.bool(0.45);
  if (leaf) {
    switch (rng.int(6)) {
      case 0: return null;
      case 1: return rng.bool();
      case 2: return rng.pick(NASTY_NUMBERS);
      case 3: return rng.int(1000);
      default: return randString(rng, 200);
    }
  }
  if (rng.bool()) {
    const n = rng.range(0, 5);
    const a: unknown[] = [];
    for (let i = 0; i < n; i++) a.push(randJson(rng, depth - 1));
    return a;
  }
  const o: Record<string, unknown> = {};
  const n = rng.range(0, 5);
  for (let i = 0; i < n; i++) {
    const k = rng.bool(0.3) ? rng.pick(['event', 'data', 'channel', 'name', 'channels', 'auth', 'channel_data', 'user_id', 'user_info', 'socket_id', 'info', 'batch', '__proto__', 'constructor']) : randString(rng, 20);
    o[k] = randJson(rng, depth - 1);
  }
  return o;
}

/** JSON text nested `depth` levels: arrays, objects or a mix. */
export function deepJson(rng: Rng, depth: number, kind: 'array' | 'object' | 'mixed' = rng.pick(['array', 'object', 'mixed'])): string {
  if (kind === 'array') return '['.repeat(depth) + ']'.repeat(depth);
  if (kind === 'object') return '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
  let open = '';
  let close = '';
  for (let i = 0; i < depth; i++) {
    if (i % 2 === 0) {
      open += '[';
      close = ']' + close;
    } else {
      open += '{"k":';
      close = '}' + close;
    }
  }
  return open + '0' + close;
}

/** A value of the wrong kind for a field, or an odd one of the right kind. */
export function junkValue(rng: Rng): unknown {
  switch (rng.int(12)) {
    case 0: return null;
    case 1: return rng.bool();
    case 2: return rng.pick(NASTY_NUMBERS);
    case 3: return [];
    case 4: return {};
    case 5: return '';
    case 6: return 'x'.repeat(rng.range(1000, 20000));
    case 7: return randJson(rng, 4);
    case 8: return JSON.parse(deepJson(rng, rng.range(10, 200)));
    case 9: return [randString(rng), randJson(rng, 2)];
    case 10: return JSON.stringify(randJson(rng, 3));
    default: return randString(rng);
  }
}

/** Returns a copy of an object with one to three fields changed, removed or added. */
export function mutateObject(rng: Rng, obj: Record<string, unknown>, keys: readonly string[] = Object.keys(obj)): Record<string, unknown> {
  const out: Record<string, unknown> = { ...obj };
  const n = rng.range(1, 3);
  for (let i = 0; i < n; i++) {
    const k = rng.bool(0.85) && keys.length > 0 ? rng.pick(keys) : randString(rng, 20);
    switch (rng.int(5)) {
      case 0: delete out[k]; break;
      case 1: {
        const v = out[k];
        if (v !== null && typeof v === 'object' && !Array.isArray(v)) out[k] = mutateObject(rng, v as Record<string, unknown>);
        else out[k] = junkValue(rng);
        break;
      }
      default: out[k] = junkValue(rng);
    }
  }
  return out;
}

/** Damages JSON text: cut short, a byte flipped, characters inserted or removed. */
export function mutateText(rng: Rng, text: string): string {
  if (text.length === 0) return rng.pick(NASTY_STRINGS);
  switch (rng.int(6)) {
    case 0: return text.slice(0, rng.int(text.length)); // truncated
    case 1: {
      const i = rng.int(text.length);
      return text.slice(0, i) + String.fromCharCode(rng.int(0x80)) + text.slice(i + 1);
    }
    case 2: {
      const i = rng.int(text.length);
      return text.slice(0, i) + rng.pick(['"', '{', '}', '[', ']', ',', ':', '\\', '\u0000', '\\u', '\\ud800', 'e999']) + text.slice(i);
    }
    case 3: {
      const i = rng.int(text.length);
      return text.slice(0, i) + text.slice(i + rng.range(1, 10));
    }
    case 4: return text + rng.pick(['', ' ', 'x', '}', ',{}', '\u0000', '\n']);
    default: return ' \t\n' + text + ' \r\n';
  }
}

/** Keeps the first `n` characters of a long value for a failure message. */
export function clip(s: string, n = 300): string {
  return s.length <= n ? s : `${s.slice(0, n)}… (${s.length} chars)`;
}

/** encodeURIComponent that does not throw on lone surrogates (they become U+FFFD). */
export function encode(s: string): string {
  return encodeURIComponent(Buffer.from(s, 'utf8').toString('utf8'));
}
