#!/usr/bin/env node
// The import-boundary check of `make test` (rules: .dependency-cruiser.cjs; layering:
// docs/architecture.md). Runs dependency-cruiser over ./src of the current directory and
// compares its violations with the known ones listed in
// ./.dependency-cruiser-known-violations.json (absent = none):
//   - a violation not listed fails the check;
//   - a listed one still present is printed as known (it stays visible in every run);
//   - a listed one that no longer occurs fails too, so the list only shrinks and an edge
//     removed once cannot come back unnoticed.
// test/lint/boundaries.test.ts runs this script on a fixture tree to show it fails.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const config = path.join(root, '.dependency-cruiser.cjs');
const knownFile = '.dependency-cruiser-known-violations.json';
const bin = path.join(root, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');

const run = spawnSync(process.execPath, [bin, 'src', '--config', config, '--output-type', 'json'], { encoding: 'utf8', maxBuffer: 64 << 20 });
if (run.status !== 0 && !run.stdout) {
  process.stderr.write(run.stderr);
  console.error(`import boundaries: dependency-cruiser failed to run (exit ${run.status})`);
  process.exit(2);
}
const found = JSON.parse(run.stdout).summary.violations;
const known = existsSync(knownFile) ? JSON.parse(readFileSync(knownFile, 'utf8')) : [];

const key = (v) => `${v.rule.name}: ${v.from} → ${v.to}`;
const knownKeys = new Set(known.map(key));
const foundKeys = new Set(found.map(key));
const fresh = [...foundKeys].filter((k) => !knownKeys.has(k));
const tolerated = [...foundKeys].filter((k) => knownKeys.has(k));
const stale = [...knownKeys].filter((k) => !foundKeys.has(k));

for (const k of tolerated) console.log(`  known  ${k}`);
for (const k of fresh) console.log(`  error  ${k}`);
for (const k of stale) console.log(`  stale  ${k} (no longer occurs: remove it from ${knownFile})`);
const modules = JSON.parse(run.stdout).summary.totalCruised;
console.log(`import boundaries: ${fresh.length} new, ${tolerated.length} known, ${stale.length} stale (${modules} modules)`);
process.exit(fresh.length + stale.length > 0 ? 1 : 0);
