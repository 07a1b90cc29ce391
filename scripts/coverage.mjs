#!/usr/bin/env node
// Line coverage of src/ from one suite run, and the floor `make test` enforces.
//
//   node scripts/coverage.mjs <dir> [--floor 85] [--label 'workers: 4']
//
// <dir> is where the run's processes and worker threads wrote V8 coverage
// (NODE_V8_COVERAGE=<dir>, set by scripts/test.sh). c8 maps it back through dist/'s
// source maps to src/*.ts; files no test loaded count as 0 % (c8 --all). Files with no
// code at run time (only types: their .js is the CommonJS preamble) are left out, as V8
// can never see them run. Prints lines per folder of src/ and the total; exits 1 below
// the floor. The per-file table goes to <dir>/report/coverage.txt.
import { readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { floor: { type: 'string', default: '85' }, label: { type: 'string', default: '' } },
});
if (positionals.length !== 1) {
  console.error('usage: node scripts/coverage.mjs <coverage dir> [--floor 85] [--label text]');
  process.exit(2);
}
const floor = Number(values.floor);
if (!(floor >= 0 && floor <= 100)) {
  console.error(`--floor must be a percentage from 0 to 100, got ${values.floor}`);
  process.exit(2);
}
const root = path.resolve(import.meta.dirname, '..');
process.chdir(root); // c8 matches include/exclude against paths relative to the cwd
const tempDirectory = path.resolve(positionals[0]);
const reportsDirectory = path.join(tempDirectory, 'report');
const { Report } = createRequire(import.meta.url)('c8');

/** dist/src/**.js files that compile to the CommonJS preamble and comments only (type-only modules). */
function typeOnly(dir) {
  const out = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...typeOnly(p));
    else if (e.name.endsWith('.js')) {
      const code = readFileSync(p, 'utf8')
        .replace(/\/\*[\s\S]*?\*\//g, '') // tsc keeps comments; a file with code keeps its code
        .replace(/^\s*\/\/.*$/gm, '')
        .replace(/^"use strict";/m, '')
        .replace(/^Object\.defineProperty\(exports, "__esModule", \{ value: true \}\);/m, '');
      if (code.trim() === '') out.push(path.relative(root, p));
    }
  }
  return out;
}

const excluded = typeOnly(path.join(root, 'dist', 'src'));
await new Report({
  include: ['dist/src/**/*.js'],
  exclude: excluded,
  all: true,
  src: [path.join(root, 'dist', 'src')],
  excludeNodeModules: true,
  reporter: ['json-summary', 'text'],
  reporterOptions: { text: { file: 'coverage.txt' } },
  reportsDirectory,
  tempDirectory,
}).run();

const summary = JSON.parse(readFileSync(path.join(reportsDirectory, 'coverage-summary.json'), 'utf8'));
const folders = new Map();
for (const [file, s] of Object.entries(summary)) {
  if (file === 'total') continue;
  const rel = path.relative(path.join(root, 'src'), file);
  const folder = rel.includes(path.sep) ? `src/${rel.split(path.sep)[0]}/` : 'src/*.ts';
  const f = folders.get(folder) ?? { covered: 0, total: 0, files: 0 };
  f.covered += s.lines.covered;
  f.total += s.lines.total;
  f.files++;
  folders.set(folder, f);
}
const pct = (c, t) => (t === 0 ? 100 : (100 * c) / t);
const row = (name, f) => `  ${name.padEnd(16)} ${pct(f.covered, f.total).toFixed(1).padStart(5)} %  ${String(f.covered).padStart(5)} / ${String(f.total).padEnd(5)} lines  (${f.files} files)`;
const total = { covered: summary.total.lines.covered, total: summary.total.lines.total, files: Object.keys(summary).length - 1 };
console.log(`coverage of src/ (lines${values.label ? `, ${values.label}` : ''}; ${excluded.length} type-only files left out):`);
for (const name of [...folders.keys()].sort()) console.log(row(name, folders.get(name)));
console.log(row('total', total));
console.log(`  per file: ${path.relative(root, path.join(reportsDirectory, 'coverage.txt'))}`);
const got = pct(total.covered, total.total);
if (got < floor) {
  console.log(`coverage floor: FAIL, ${got.toFixed(2)} % of lines of src/ is below ${floor} %`);
  process.exit(1);
}
console.log(`coverage floor: ok, ${got.toFixed(2)} % of lines of src/ (floor ${floor} %)`);
