#!/usr/bin/env node
// The lint half of the option walk (test/ops/options.test.ts): for every option claimed as
// having an effect in test/ops/option-claims.ts,
//  - the file it names holds the expression that reads the option;
//  - the test it names exists, is not one of the config-validation tests (which show that a
//    value is accepted or refused, not what it does), and names the option (its last key,
//    and the key above it when there is one, or the dotted key).
// Reads the compiled claims (dist/test/ops/option-claims.js): run it after the build.
//
//   node scripts/check-options.mjs

import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const compiled = path.join(root, 'dist/test/ops/option-claims.js');
if (!existsSync(compiled)) {
  console.error(`check-options: ${path.relative(root, compiled)} is missing: build first (npx tsc -p tsconfig.json)`);
  process.exit(2);
}
const { CLAIMS } = createRequire(import.meta.url)(compiled);

/** Tests of config loading and validation: they do not show what an option does. */
const VALIDATION = new Set(['test/config/config.test.ts', 'test/config/reference.test.ts', 'test/config/support.test.ts',
  'test/ops/check-config.test.ts', 'test/ops/options.test.ts']);
const word = (s) => new RegExp(`\\b${s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\b`);

const problems = [];
let effects = 0;
for (const [key, claim] of Object.entries(CLAIMS)) {
  if (!('effect' in claim)) continue;
  effects++;
  const [file, needle] = claim.effect;
  const src = path.join(root, file);
  if (!existsSync(src)) problems.push(`${key}: ${file} does not exist`);
  else if (!readFileSync(src, 'utf8').includes(needle)) problems.push(`${key}: ${file} no longer reads it by \`${needle}\``);
  const test = claim.test;
  if (typeof test !== 'string' || !test.endsWith('.test.ts')) { problems.push(`${key}: no behaviour test named (test: 'test/….test.ts')`); continue; }
  if (VALIDATION.has(test)) { problems.push(`${key}: ${test} validates config; name a test that shows what the option does`); continue; }
  const file2 = path.join(root, test);
  if (!existsSync(file2)) { problems.push(`${key}: its test ${test} does not exist`); continue; }
  const body = readFileSync(file2, 'utf8');
  const parts = key.replace(/^apps\[\]\./, '').split('.');
  const leaf = parts.at(-1);
  const parent = parts.at(-2);
  if (!word(leaf).test(body) || (parent && !body.includes(parent))) problems.push(`${key}: ${test} does not name the option (${parent ? `${parent} … ` : ''}${leaf})`);
}

for (const p of problems) console.error(`check-options: ${p}`);
if (problems.length) process.exit(1);
console.log(`check-options: ${effects} options with an effect: each read where claimed, each with a behaviour test`);
