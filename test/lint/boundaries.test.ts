// The import-boundary check (scripts/check-boundaries.mjs with .dependency-cruiser.cjs)
// run on small source trees written to a temp directory: every rule fires on a forbidden
// import and the allowed ones pass; no violation is tolerated (a list of exceptions left
// in the tree excuses nothing). The real tree is checked by `make test` itself; this shows
// that check can fail.

import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const SCRIPT = path.join(ROOT, 'scripts', 'check-boundaries.mjs');

/** Imports the layering allows: core folders share types, wiring imports anything. */
const ALLOWED: Record<string, string> = {
  'src/protocol/p.ts': 'export const P = 1;\nexport type PT = number;\n',
  'src/config/c.ts': "import type { PT } from '../protocol/p';\nexport type C = PT;\n",
  // inline `type` on every specifier is a type-only import too
  'src/config/c2.ts': "import { type PT } from '../protocol/p';\nexport type C2 = PT;\n",
  'src/bus/b.ts': "import type { PT } from '../protocol/p';\nexport const B: PT = 2;\n",
  'src/bus/b2.ts': "import { B } from './b';\nexport const B2 = B;\n",
  'src/filter/f.ts': "import type { C } from '../config/c';\nexport type F = C;\n",
  'src/ws/w.ts': "import { B2 } from '../bus/b2';\nexport const W = B2;\n",
  'src/channels/ch.ts': "import { B2 } from '../bus/b2';\nexport const CH = B2;\n",
  'src/shard/s.ts': "import { W } from '../ws/w';\nexport const S = W;\n",
  'src/main.ts': "import { S } from './shard/s';\nexport type M = number;\nexport const M0 = S;\n",
  'src/cli.ts': "import { M0 } from './main';\nexport const CLI = M0;\n",
};

/** One forbidden import per rule and case, with the line the check must print for it. */
const FORBIDDEN: Record<string, [file: string, source: string]> = {
  'core-imports-only-core: src/protocol/bad.ts → src/ws/w.ts': ['src/protocol/bad.ts', "import { W } from '../ws/w';\nexport const X = W;\n"],
  // filter/ is covered before it exists in the real tree; type-only does not excuse leaving the core
  'core-imports-only-core: src/filter/bad.ts → src/ws/w.ts': ['src/filter/bad.ts', "import type { W } from '../ws/w';\nexport type X = typeof W;\n"],
  'core-shares-only-types: src/config/bad.ts → src/protocol/p.ts': ['src/config/bad.ts', "import { P } from '../protocol/p';\nexport const X = P;\n"],
  'core-shares-only-types: src/filter/bad2.ts → src/bus/b.ts': ['src/filter/bad2.ts', "import { B } from '../bus/b';\nexport const X = B;\n"],
  'imports-go-down: src/ws/bad.ts → src/shard/s.ts': ['src/ws/bad.ts', "import { S } from '../shard/s';\nexport const X = S;\n"],
  'imports-go-down: src/http/bad.ts → src/main.ts': ['src/http/bad.ts', "import type { M } from '../main';\nexport type X = M;\n"],
  // every folder, not only the core and the wiring: channels/ is below ws/
  'imports-go-down: src/channels/bad.ts → src/ws/w.ts': ['src/channels/bad.ts', "import type { W } from '../ws/w';\nexport type X = typeof W;\n"],
  // a folder in no layer cannot land
  'every-folder-has-a-layer: src/nowhere/n.ts → src/bus/b.ts': ['src/nowhere/n.ts', "import { B } from '../bus/b';\nexport const N = B;\n"],
};

function tree(t: Test, files: Record<string, string>, extra: Record<string, string> = {}): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-boundaries-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const [file, source] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), source);
  }
  for (const [file, text] of Object.entries(extra)) writeFileSync(path.join(dir, file), text);
  return dir;
}

function check(dir: string): { status: number | null; lines: string[] } {
  const r = spawnSync(process.execPath, [SCRIPT], { cwd: dir, encoding: 'utf8' });
  return { status: r.status, lines: (r.stdout + r.stderr).split('\n').map((l) => l.trim()).filter(Boolean) };
}

const violation = (rule: string, from: string, to: string) => ({ type: 'dependency', from, to, rule: { severity: 'error', name: rule } });

t.test('imports the layering allows pass', async (t) => {
  const r = check(tree(t, ALLOWED));
  t.equal(r.status, 0, r.lines.join('\n'));
  t.same(r.lines, ['import boundaries: 0 violations (11 modules)']);
});

t.test('an import cycle fails, type-only included', async (t) => {
  const r = check(tree(t, {
    ...ALLOWED,
    'src/ws/a.ts': "import type { BT } from './b';\nexport type AT = BT | 1;\nexport const A = 1;\n",
    'src/ws/b.ts': "import { A } from './a';\nexport type BT = typeof A;\n",
  }));
  t.equal(r.status, 1, r.lines.join('\n'));
  t.ok(r.lines.some((l) => /^error\s+no-circular: src\/ws\/a\.ts → src\/ws\/b\.ts/.test(l)), r.lines.join('\n'));
});

t.test('each forbidden import fails the check, also one a list of exceptions names', async (t) => {
  const files = { ...ALLOWED };
  for (const [file, source] of Object.values(FORBIDDEN)) files[file] = source;
  // the format the check once read its tolerated violations from
  const dir = tree(t, files, {
    '.dependency-cruiser-known-violations.json': JSON.stringify([violation('imports-go-down', 'src/http/bad.ts', 'src/main.ts')]),
  });
  const r = check(dir);
  t.equal(r.status, 1, r.lines.join('\n'));
  t.same(r.lines.filter((l) => l.startsWith('error')).map((l) => l.replace(/^error\s+/, '')).sort(), Object.keys(FORBIDDEN).sort());
  t.equal(r.lines.at(-1), `import boundaries: ${Object.keys(FORBIDDEN).length} violations (${Object.keys(files).length} modules)`);
});
