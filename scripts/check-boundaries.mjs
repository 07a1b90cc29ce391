#!/usr/bin/env node
// The import-boundary check of `make test` (rules: .dependency-cruiser.cjs; layering:
// docs/architecture.md). Runs dependency-cruiser over ./src of the current directory;
// every violation fails the check (there is no list of tolerated ones).
// test/lint/boundaries.test.ts runs this script on a fixture tree to show it fails.
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const config = path.join(root, '.dependency-cruiser.cjs');
const bin = path.join(root, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');

const run = spawnSync(process.execPath, [bin, 'src', '--config', config, '--output-type', 'json'], { encoding: 'utf8', maxBuffer: 64 << 20 });
if (run.status !== 0 && !run.stdout) {
  process.stderr.write(run.stderr);
  console.error(`import boundaries: dependency-cruiser failed to run (exit ${run.status})`);
  process.exit(2);
}
const { violations, totalCruised } = JSON.parse(run.stdout).summary;
const found = [...new Set(violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`))];
for (const k of found) console.log(`  error  ${k}`);
console.log(`import boundaries: ${found.length} violations (${totalCruised} modules)`);
process.exit(found.length > 0 ? 1 : 0);
