// Which compiled test files (dist/test/**/*.test.js) `make test` runs with which shard
// count (RINGCAST_TEST_WORKERS = 1, 4, …), and which of them it runs once per backend.
// A file runs with every shard count, unless
//  - it never reaches test/helpers/server (the one reader of RINGCAST_TEST_WORKERS),
//    following its relative requires: unit tests of pure modules, config, lint, and tests
//    that start `bin/ringcast` with their own config; or its header says
//    `// test-modes: once (why)`: it starts its servers with fixed shard counts (the
//    cluster suites, the 4-shard fault tests). It runs once: with the coverage shard count;
//  - its header says `// test-modes: workers N (why)`: it runs with N shards only (the
//    fuzzers and the redis rate limiter, whose subject is the same on every shard but whose
//    checks span shards).
// A mode list without the count a file wants (make test-1, make test-4) runs it in the first.
// A file headed `// test-split: LOGIC_BACKENDS (why)` (or `BACKENDS`) has every test inside
// a loop over that list of test/adapter/backends.ts: it runs as one process per backend
// (RINGCAST_TEST_BACKENDS=name), so its backends go at once.
//   node scripts/test-plan.mjs RUN COVERAGE "MODES" FILE...   prints the files of run RUN

import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const ONCE = /^\/\/ test-modes: once\b/m;
const ONLY = /^\/\/ test-modes: workers (\d+)\b/m;
const SPLIT = /^\/\/ test-split: (LOGIC_BACKENDS|BACKENDS)\b/m;
const ROOT = path.resolve(import.meta.dirname, '..');
const SERVER = path.join(ROOT, 'dist/test/helpers/server.js');

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

const head = (file) => readFileSync(file, 'utf8').slice(0, 4000);

/** The shard count a file wants, or null for every one. */
function wanted(file, coverage) {
  const h = head(file);
  const only = ONLY.exec(h);
  if (only) return only[1];
  if (ONCE.test(h) || !reachesServer(path.resolve(file))) return coverage;
  return null;
}

/** The files of the run with `run` shards. */
export function filesOf(run, coverage, modes, files) {
  return files.filter((f) => {
    const w = wanted(f, coverage);
    return w === null || w === run || (!modes.includes(w) && run === modes[0]);
  });
}

/**
 * The backends a file runs as one process each (RINGCAST_TEST_BACKENDS), or [] for one
 * process. The lists are test/adapter/backends.ts's (which honour RINGCAST_TEST_BACKENDS).
 */
export function backendsOf(file) {
  const m = SPLIT.exec(head(file));
  if (!m) return [];
  const lists = createRequire(import.meta.url)(path.join(ROOT, 'dist/test/adapter/backends.js'));
  return lists[m[1]];
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [run, coverage, modesArg, ...files] = process.argv.slice(2);
  const modes = (modesArg ?? '').split(/\s+/).filter(Boolean);
  if (!run || !coverage || !modes.includes(run)) {
    console.error('usage: test-plan.mjs RUN COVERAGE "MODES" FILE...  (RUN one of MODES)');
    process.exit(2);
  }
  for (const f of filesOf(run, coverage, modes, files)) {
    const b = backendsOf(f);
    console.log(b.length ? `${f}  (one process per backend: ${b.join(', ')})` : f);
  }
}
