#!/usr/bin/env node
// Which compiled test files (dist/test/**/*.test.js) give the same run whatever the shard
// count: scripts/test.sh runs those in one suite run only (the coverage run), and every
// other file once per shard count (RINGCAST_TEST_WORKERS). A file runs once when
//  - it never reaches test/helpers/server (the one reader of RINGCAST_TEST_WORKERS),
//    following its relative requires: unit tests of pure modules, config, lint, and tests
//    that start `bin/ringcast` with their own config; or
//  - its header says `// test-modes: once` (followed by why): it starts its servers with
//    fixed shard counts (the cluster suites, the 4-shard fault tests) or is otherwise
//    the same run in both modes.
//
//   node scripts/test-plan.mjs --once FILE...   prints the files that run once
//   node scripts/test-plan.mjs --each FILE...   prints the files that run per shard count

import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

const MARKER = /^\/\/ test-modes: once\b/m;
const SERVER = path.resolve('dist/test/helpers/server.js');

const [mode, ...files] = process.argv.slice(2);
if (mode !== '--once' && mode !== '--each') {
  console.error('usage: test-plan.mjs --once|--each FILE...');
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

const once = (f) => MARKER.test(readFileSync(f, 'utf8').slice(0, 4000)) || !reachesServer(path.resolve(f));
for (const f of files) if (once(f) === (mode === '--once')) console.log(f);
