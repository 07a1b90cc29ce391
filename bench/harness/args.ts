// `--key value` options of the single-purpose bench scripts (bench/shards/, bench/cluster/):
// --help prints the usage and exits; an unknown key, a missing value or a stray argument
// is an error naming it.

export interface Options {
  get(key: string): string | undefined;
  /** A number ≥ min, or `def` when absent. */
  num(key: string, def: number, min: number): number;
}

export function readOptions(argv: string[], usage: string, known: readonly string[]): Options {
  const kv = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--help' || a === '-h') {
      process.stdout.write(usage + '\n');
      process.exit(0);
    }
    if (!a.startsWith('--')) throw new Error(`unexpected argument "${a}"`);
    const v = argv[++i];
    if (v === undefined) throw new Error(`${a} needs a value`);
    kv.set(a.slice(2), v);
  }
  for (const k of kv.keys()) if (!known.includes(k)) throw new Error(`unknown option --${k} (see --help)`);
  return {
    get: (k) => kv.get(k),
    num(k, def, min) {
      const v = kv.get(k);
      if (v === undefined) return def;
      const n = Number(v);
      if (!Number.isFinite(n) || n < min) throw new Error(`--${k} must be a number ≥ ${min}, got "${v}"`);
      return n;
    },
  };
}
