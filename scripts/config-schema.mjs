#!/usr/bin/env node
// Writes config.schema.json and docs/configuration.md from the config schema
// (src/config/schema.ts, through src/config/reference.ts). Run after a build:
//   npx tsc -p tsconfig.json && node scripts/config-schema.mjs
// `--check` writes nothing and exits 1 when either file is out of date.

import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const { generatedFiles } = require(path.join(root, 'dist/src/config/reference.js'));

let stale = 0;
for (const [file, text] of Object.entries(generatedFiles())) {
  const target = path.join(root, file);
  let old = null;
  try { old = readFileSync(target, 'utf8'); } catch { /* new file */ }
  if (old === text) continue;
  if (process.argv.includes('--check')) {
    process.stderr.write(`${file} is out of date: run node scripts/config-schema.mjs\n`);
    stale++;
  } else {
    writeFileSync(target, text);
    process.stdout.write(`wrote ${file}\n`);
  }
}
process.exit(stale > 0 ? 1 : 0);
