#!/usr/bin/env node
// Which compiled test files (dist/test/**/*.test.js) scripts/test.sh runs in which suite
// run (RINGCAST_TEST_WORKERS = 1, 4, …). A file runs in every run, unless
//  - it never reaches test/helpers/server (the one reader of RINGCAST_TEST_WORKERS),
//    following its relative requires: unit tests of pure modules, config, lint, and tests
//    that start `bin/ringcast` with their own config; or its header says
//    `// test-modes: once (why)`: it starts its servers with fixed shard counts (the
//    cluster suites, the 4-shard fault tests). It runs in one run: the coverage run;
//  - its header says `// test-modes: workers N (why)`: it runs in the run with N shards
//    only (the fuzzers and the redis rate limiter, whose subject is the same on every shard
//    but whose checks span shards).
// A run list without the run a file wants (make test-1, make test-4) runs it in the first.
//   node scripts/test-plan.mjs RUN COVERAGE "MODES" FILE...   prints the files of run RUN

import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

const ONCE = /^\/\/ test-modes: once\b/m;
const ONLY = /^\/\/ test-modes: workers (\d+)\b/m;
const SERVER = path.resolve('dist/test/helpers/server.js');

const [run, coverage, modesArg, ...files] = process.argv.slice(2);
const modes = (modesArg ?? '').split(/\s+/).filter(Boolean);
if (!run || !coverage || !modes.includes(run)) {
  console.error('usage: test-plan.mjs RUN COVERAGE "MODES" FILE...  (RUN one of MODES)');
  process.exit(2);
}

const reach = new Map(); // resolved file → reaches helpers/server
function reachesServer(file, seen = new Set()) {
  if (file === SERVER) return true;
  if (reach.has(file)) return reach.get(file);
  if (seen.has(file) || !existsSync(file)) return false;
  seen.add(file);
  const src = readFileSync(file, 'utf8');
  let hit = false;
  for (const m of src.matchAll(/require\("(\.{1,2}\/[^"]+)"\)/g)) {
    let dep = path.resolve(path.dirname(file), m[1]);
    if (!dep.endsWith('.js')) dep += '.js';
    if (reachesServer(dep, seen)) {
      hit = true;
      break;
    }
  }
  reach.set(file, hit);
  return hit;
}

/** The run a file belongs to, or null for every run. */
function wanted(file) {
  const head = readFileSync(file, 'utf8').slice(0, 4000);
  const only = ONLY.exec(head);
  if (only) return only[1];
  if (ONCE.test(head) || !reachesServer(path.resolve(file))) return coverage;
  return null;
}

for (const f of files) {
  const w = wanted(f);
  if (w === null || w === run || (!modes.includes(w) && run === modes[0])) console.log(f);
}
