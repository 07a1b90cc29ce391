// Claims the documents make that the code can check: config.yaml names every key of the
// schema, every metric ringcast registers is documented in docs/, and the package ships
// the client plug-ins (client/*.js) that docs/ tell users to import from `ringcast/client`.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { leaves } from '../../src/config/issues';
import { AppManagerSchema, GlobalSchema } from '../../src/config/schema';
import { PromMetrics } from '../../src/metrics/registry';

const ROOT = path.resolve(__dirname, '../../..');

/** The dotted key paths config.yaml shows, set or commented out (`# workers: 8`). */
export function yamlKeyPaths(text: string): Set<string> {
  const out = new Set<string>();
  const stack: { indent: number; key: string }[] = [];
  for (const line of text.split('\n')) {
    const m = /^(\s*)(?:#\s?)?(\s*)([a-z_][a-z0-9_]*):(\s|$)/.exec(line);
    if (!m) continue;
    const indent = m[1].length + m[2].length;
    while (stack.length > 0 && stack[stack.length - 1].indent >= indent) stack.pop();
    stack.push({ indent, key: m[3] });
    out.add(stack.map((s) => s.key).join('.'));
  }
  return out;
}

t.test('yamlKeyPaths reads set and commented keys by indentation', async (t) => {
  t.same([...yamlKeyPaths('a: 1\n# b: 2\nc:\n  d: 3   # e: 4\n  # f: 5\ng: x\n')], ['a', 'b', 'c', 'c.d', 'c.f', 'g']);
});

t.test('config.yaml names every key of the schema', async (t) => {
  const shown = yamlKeyPaths(fs.readFileSync(path.join(ROOT, 'config.yaml'), 'utf8'));
  const keys = [...leaves(GlobalSchema).map(([p]) => p), ...leaves(AppManagerSchema, 'app_manager.').map(([p]) => p)];
  t.ok(keys.length > 100, `${keys.length} keys`);
  const missing = keys.filter((k) => !shown.has(k));
  t.same(missing, [], 'keys of the schema config.yaml does not show');
});

/** Every Markdown text users get: README.md and docs/*.md. */
function allDocs(): string {
  const files = ['README.md', ...fs.readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  return files.map((f) => fs.readFileSync(path.join(ROOT, f), 'utf8')).join('\n');
}

t.test('every registered metric is documented', async (t) => {
  const names = new PromMetrics('').registry.getMetricsAsArray().map((m) => m.name);
  t.ok(names.length > 40, `${names.length} metrics`);
  const text = allDocs();
  const missing = names.filter((n) => !new RegExp(`\\b(ringcast_)?${n}\\b`).test(text));
  t.same(missing, [], 'metrics named nowhere in README.md or docs/');
});

t.test('the package ships the client plug-ins', async (t) => {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^(npm_|TAP|NODE_OPTIONS$|NODE_V8_COVERAGE$)/i.test(k)) env[k] = v;
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ROOT, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const files = (JSON.parse(out) as { files: { path: string }[] }[])[0].files.map((f) => f.path);
  const client = fs.readdirSync(path.join(ROOT, 'client')).filter((f) => f.endsWith('.js') || f.endsWith('.d.ts'));
  t.ok(client.length >= 5, `client/ has ${client.join(', ')}`);
  for (const f of client) t.ok(files.includes(`client/${f}`), `the package has client/${f}`);
  t.ok(files.includes('CHANGELOG.md'), 'the package has CHANGELOG.md');
});
