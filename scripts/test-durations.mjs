#!/usr/bin/env node
// Records the time of each test file of one suite run, from its tap output (`ok N - FILE #
// time=…ms`), in dist/test-durations.json (started from the committed
// scripts/test-durations.json), which scripts/test-plan.mjs reads to start the longest
// files first. Copy it over scripts/test-durations.json after a full run on a quiet machine
// to refresh the committed times.
//
//   node scripts/test-durations.mjs RUN TAP-LOG

import { existsSync, readFileSync, writeFileSync } from 'node:fs';

const [run, log] = process.argv.slice(2);
if (!run || !log) {
  console.error('usage: test-durations.mjs RUN TAP-LOG');
  process.exit(2);
}
const out = 'dist/test-durations.json';
const from = existsSync(out) ? out : 'scripts/test-durations.json';
const all = existsSync(from) ? JSON.parse(readFileSync(from, 'utf8')) : {};
const times = (all[run] ??= {});
for (const m of readFileSync(log, 'utf8').matchAll(/^(?:not )?ok \d+ - dist\/test\/(\S+)\.js\b.*# time=([0-9.]+)ms/gm)) {
  times[m[1]] = Math.round(Number(m[2]) / 100) / 10;
}
// one file per line, sorted, so that a refresh of the committed copy diffs line by line
const sorted = Object.fromEntries(Object.keys(all).sort().map((r) => [r, Object.fromEntries(Object.entries(all[r]).sort(([a], [b]) => a.localeCompare(b)))]));
writeFileSync(out, `${JSON.stringify(sorted, null, 1)}\n`);
