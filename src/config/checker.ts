// The pieces every config validation step shares: ConfigError (all the issues found, each
// starting with its exact key path), the Checker that collects them, and the small
// parsers and helpers (host:port, octal modes, "did you mean" suggestions, values shown
// with secrets masked). issues.ts (schema problems), rules.ts (rules across keys),
// apps.ts and env.ts use them.

export interface ConfigIssue { key: string; message: string }

export class ConfigError extends Error {
  readonly code = 'RC_ERR_CONFIG' as const;
  /** Config key path (`adapter.driver`, `apps[1].key`) or env var name (`PORT`) at fault. */
  readonly key: string;
  /** Every problem found; `key`/`message` describe the first when there are several. */
  readonly issues: readonly ConfigIssue[];

  constructor(key: string, message: string, issues?: readonly ConfigIssue[]) {
    super(message);
    this.name = 'ConfigError';
    this.key = key;
    this.issues = issues ?? [{ key, message }];
  }

  static fromIssues(issues: readonly ConfigIssue[]): ConfigError {
    const msg = issues.length === 1
      ? issues[0].message
      : `${issues.length} configuration errors:\n` + issues.map((i) => `  - ${i.message}`).join('\n');
    return new ConfigError(issues[0].key, msg, issues);
  }
}

const SENSITIVE = /secret|password|token/i;

/** Renders a bad value for a message; secrets are described, never echoed. */
export function show(value: unknown, key = ''): string {
  if (value === undefined) return 'nothing';
  if (SENSITIVE.test(key)) return value === null ? 'null' : `a ${Array.isArray(value) ? 'list' : typeof value}`;
  // JSON.stringify answers undefined only for functions and symbols, which YAML and env never give.
  const s = JSON.stringify(value) ?? `a ${typeof value}`;
  return s.length > 60 ? s.slice(0, 57) + '...' : s;
}

export function isMapping(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Octal file mode as written in YAML/env: "660", "0660", "0o660". */
export function parseOctalMode(s: string): number | undefined {
  const m = /^(?:0o?)?([0-7]{1,4})$/i.exec(s.trim());
  return m ? parseInt(m[1], 8) : undefined;
}

/** Closest known key, for "did you mean" hints on typos. */
export function suggest(word: string, known: readonly string[]): string {
  let best = '';
  let bestD = Math.max(2, Math.floor(word.length / 3)) + 1;
  for (const k of known) {
    const d = distance(word.toLowerCase(), k.toLowerCase());
    if (d < bestD) { bestD = d; best = k; }
  }
  if (!best && word.length >= 4) best = known.find((k) => k.startsWith(word) || word.startsWith(k)) ?? '';
  return best ? ` (did you mean "${best}"?)` : '';
}

function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length];
}

/** Collects issues; rules across keys ask `ok()` so that they only judge valid inputs. */
export class Checker {
  readonly issues: ConfigIssue[] = [];
  private readonly bad = new Set<string>();

  constructor(private readonly origins: ReadonlyMap<string, string> = new Map()) {}

  /** Adds `<key> <rule>, got <value> (from <source>)`. */
  fail(key: string, rule: string, value?: unknown, withValue = true): void {
    const got = withValue ? `, got ${show(value, key)}` : '';
    this.report(key, `${key} ${rule}${got}${this.from(key)}`);
  }

  /** Adds an issue with a message of its own (it must still name the key). */
  report(key: string, message: string): void {
    this.bad.add(key);
    this.issues.push({ key, message });
  }

  throwIfAny(): void {
    if (this.issues.length > 0) throw ConfigError.fromIssues(this.issues);
  }

  /** True when none of these keys failed (cross-field rules only run on valid inputs). */
  ok(...keys: string[]): boolean {
    return keys.every((k) => !this.bad.has(k));
  }

  /** " (from env PORT)" / " (from /etc/ringcast.yaml)": where the longest matching prefix was set. */
  private from(key: string): string {
    for (let k = key; ;) {
      const src = this.origins.get(k);
      if (src) return ` (from ${src})`;
      const parent = k.replace(/(\.[^.[]*|\[\d+\])$/, '');
      if (parent === k || parent === '') return '';
      k = parent;
    }
  }
}

export function parseHostPort(s: string): { host: string; port: number } | undefined {
  const m = /^\s*(?:\[([^\]]+)\]|([^:\s]+)):(\d{1,5})\s*$/.exec(s);
  return m ? { host: m[1] ?? m[2], port: Number(m[3]) } : undefined;
}
