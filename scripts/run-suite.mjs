#!/usr/bin/env node
// `make test`'s runner: the checks (lint, import boundaries, option effects), the test
// files once per shard count (RINGCAST_TEST_WORKERS), and the coverage floor, all from
// one pool of TEST_JOBS processes, the longest first. Each test file is a process of its
// own (`node file.js`, tap's TAP output); a file headed `// test-split: …` runs as one
// process per backend (scripts/test-plan.mjs). Ends with "N passed, N failed, N skipped":
// the files' test points, and one each for the checks and the coverage floor.
//
//   TEST_WORKER_MODES     shard counts to run the suite with (default "1 4")
//   TEST_COVERAGE_WORKERS the run that collects V8 coverage and runs the files that give
//                         the same result whatever the shard count (default 1: one shard
//                         thread per server costs least to cover); its floor runs as soon
//                         as its last file ends, beside the files still running
//   TEST_COVERAGE_FLOOR   percent of the lines of src/ (default 95)
//   TEST_CHECKS           0 skips lint, the import boundaries and the option effects
//   TEST_JOBS             processes at once (default 5: on 2 cores most files wait on
//                         timers and sockets; docs/testing.md has the figures)
//   TEST_ONCE             0 runs every file with every shard count
//   TEST_TIMEOUT          seconds a file may take before it is ended, its whole process
//                         group (default 300)
// Arguments, if any, are the test files to run instead of all of dist/test.
// Order: the slowest first, by the durations of the last run on this checkout
// (dist/test-durations.json, written at the end of every run), else by
// scripts/test-durations.json (committed; refresh it by copying the dist one).
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, rmSync, mkdirSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { backendsOf, filesOf } from './test-plan.mjs';

const ROOT = path.resolve(import.meta.dirname, '..');
process.chdir(ROOT);
const env = process.env;
const modes = (env.TEST_WORKER_MODES ?? '1 4').split(/\s+/).filter(Boolean);
const coverageMode = env.TEST_COVERAGE_WORKERS ?? '1';
const floor = env.TEST_COVERAGE_FLOOR ?? '95';
const jobs = Number(env.TEST_JOBS ?? 5);
const timeoutS = Number(env.TEST_TIMEOUT ?? 300);
if (!(jobs >= 1) || !(timeoutS > 0)) {
  console.error(`TEST_JOBS must be a positive count and TEST_TIMEOUT positive seconds, got ${env.TEST_JOBS} and ${env.TEST_TIMEOUT}`);
  process.exit(2);
}

function walk(dir) {
  const out = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...walk(p));
    else if (e.name.endsWith('.test.js')) out.push(p);
  }
  return out;
}
const files = process.argv.length > 2 ? process.argv.slice(2) : walk('dist/test').sort();

// ---- the plan -------------------------------------------------------------------------
const DURATIONS = 'dist/test-durations.json';
const COMMITTED = 'scripts/test-durations.json';
const readJson = (p) => { try { return JSON.parse(readFileSync(p, 'utf8')); } catch { return null; } };
const known = { ...readJson(COMMITTED), ...readJson(DURATIONS) };

const items = [];
if (env.TEST_CHECKS !== '0') {
  items.push({ kind: 'check', name: 'lint', cmd: 'node_modules/.bin/eslint', args: ['src', 'test', 'bench', 'examples'] });
  items.push({ kind: 'check', name: 'import boundaries', cmd: process.execPath, args: ['scripts/check-boundaries.mjs'] });
  items.push({ kind: 'check', name: 'option effects', cmd: process.execPath, args: ['scripts/check-options.mjs'] });
}
const perMode = new Map();
for (const w of modes) {
  const run = env.TEST_ONCE === '0' ? files : filesOf(w, coverageMode, modes, files);
  perMode.set(w, { files: run.length, processes: 0, left: 0, t0: 0, t1: 0 });
  for (const file of run) {
    const rel = path.relative('dist/test', file);
    const backends = backendsOf(file);
    for (const backend of backends.length ? backends : [null]) {
      const key = `${rel} w${w}${backend ? ` ${backend}` : ''}`;
      items.push({ kind: 'test', file, rel, w, backend, key, cover: w === coverageMode });
      perMode.get(w).processes++;
      perMode.get(w).left++;
    }
  }
}
// lint first (it is long and ends early), then the slowest files first
const expected = (it) => (it.kind === 'check' ? 1e6 : known[it.key] ?? 10);
items.sort((a, b) => expected(b) - expected(a));

const covDir = path.join(ROOT, 'dist/coverage', `workers-${coverageMode}`);
const covering = items.some((it) => it.cover);
if (covering) {
  rmSync(covDir, { recursive: true, force: true });
  mkdirSync(covDir, { recursive: true });
}

// ---- running ----------------------------------------------------------------------------
const started = Date.now();
const secs = (ms) => (ms / 1000).toFixed(1);
const tally = { pass: 0, fail: 0, skip: 0 };
const failed = [];
const running = new Set();
const measured = {};
let done = 0;
const total = items.filter((it) => it.kind === 'test').length;
const describe = (it) => `${it.rel} [workers ${it.w}${it.backend ? `, ${it.backend}` : ''}]`;

console.log(`== ${items.length - total} checks and ${total} test processes, ${jobs} at once, the slowest first:`);
for (const [w, m] of perMode) if (m.files) console.log(`   workers ${w}: ${m.files} files, ${m.processes} processes${w === coverageMode && covering ? ' (with coverage)' : ''}`);

/** Runs one process in its own process group; resolves with its exit and output. */
function runProcess(cmd, args, extraEnv, limitS) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...env, ...extraEnv } });
    const chunks = [];
    child.stdout.on('data', (c) => chunks.push(c));
    child.stderr.on('data', (c) => chunks.push(c));
    const entry = { child };
    running.add(entry);
    let timedOut = false;
    const kill = (sig) => { try { process.kill(-child.pid, sig); } catch { /* gone */ } };
    // at the limit: SIGALRM to the test process (tap then reports the tests still
    // pending, as its own runner does), then the whole group
    const timer = limitS ? setTimeout(() => {
      timedOut = true;
      try { child.kill('SIGALRM'); } catch { /* gone */ }
      setTimeout(() => kill('SIGTERM'), 2000).unref();
      setTimeout(() => kill('SIGKILL'), 7000).unref();
    }, limitS * 1000) : null;
    child.on('close', (code, signal) => {
      if (timer) clearTimeout(timer);
      kill('SIGKILL'); // whatever the file left running in its group
      running.delete(entry);
      resolve({ code, signal, timedOut, out: Buffer.concat(chunks).toString('utf8') });
    });
  });
}

/** tap's closing comment of a file: `# { total: 12, pass: 11, fail: 1, skip: 0, todo: 0 }`. */
function counts(out) {
  const lines = out.split('\n').filter((l) => l.startsWith('# { total: '));
  const last = lines.at(-1) ?? '';
  const n = (k) => Number(new RegExp(`\\b${k}: (\\d+)`).exec(last)?.[1] ?? 0);
  return { found: last !== '', pass: n('pass'), fail: n('fail'), skip: n('skip') + n('todo') };
}

/** The failing test points of a file's output, with their diagnostics (≤ 300 lines). */
function failures(out) {
  const lines = out.split('\n');
  const keep = new Set();
  lines.forEach((l, i) => {
    if (/^\s*not ok\b/.test(l)) for (let j = Math.max(0, i - 2); j <= Math.min(lines.length - 1, i + 30); j++) keep.add(j);
  });
  const picked = keep.size ? [...keep].sort((a, b) => a - b).map((i) => lines[i]) : lines.slice(-60);
  return picked.slice(0, 300).map((l) => `    ${l}`).join('\n');
}

async function runCheck(it) {
  const t0 = Date.now();
  const r = await runProcess(it.cmd, it.args, {}, null);
  const ok = r.code === 0;
  console.log(`== ${it.name}${r.out.trim() ? `\n${r.out.trimEnd()}` : ''}\n-- ${it.name}: ${ok ? 'ok' : 'FAILED'} (${secs(Date.now() - t0)} s)`);
  if (ok) tally.pass++; else { tally.fail++; failed.push(it.name); }
}

async function runTest(it) {
  const t0 = Date.now();
  const mode = perMode.get(it.w);
  if (!mode.t0) mode.t0 = t0;
  const extra = { TAP: '1', TAP_TIMEOUT: String(timeoutS), RINGCAST_TEST_WORKERS: it.w };
  if (it.backend) extra.RINGCAST_TEST_BACKENDS = it.backend;
  if (it.cover) extra.NODE_V8_COVERAGE = covDir;
  const r = await runProcess(process.execPath, [it.file], extra, timeoutS);
  const ms = Date.now() - t0;
  measured[it.key] = Math.round(ms / 100) / 10;
  const c = counts(r.out);
  let fail = c.fail;
  let why = '';
  if (r.timedOut) { fail++; why = ` (ended after ${timeoutS} s: TEST_TIMEOUT)`; }
  else if (r.code !== 0 && fail === 0) { fail = 1; why = ` (exit ${r.code ?? r.signal}${c.found ? '' : ', no closing count'})`; }
  tally.pass += c.pass; tally.fail += fail; tally.skip += c.skip;
  done++;
  const ok = fail === 0;
  console.log(`${ok ? 'ok' : 'not ok'} ${done} - ${describe(it)} # ${secs(ms)} s, ${c.pass} passed${c.skip ? `, ${c.skip} skipped` : ''}${fail ? `, ${fail} failed${why}` : ''}`);
  if (!ok) {
    failed.push(describe(it));
    console.log(failures(r.out));
  }
  mode.left--;
  mode.t1 = Date.now();
  if (it.cover && perMode.get(coverageMode).left === 0) coverageReport();
}

let coverageRun = null;
function coverageReport() {
  if (coverageRun) return;
  coverageRun = (async () => {
    const t0 = Date.now();
    // c8 holds every process's coverage at once: more heap than node's default 4 GB
    const r = await runProcess(process.execPath, ['--max-old-space-size=12288', 'scripts/coverage.mjs', covDir, '--floor', floor, '--label', `workers: ${coverageMode}`], {}, null);
    const ok = r.code === 0;
    console.log(`== coverage floor (workers: ${coverageMode})\n${r.out.trimEnd()}\n-- coverage floor: ${ok ? 'ok' : 'FAILED'} (${secs(Date.now() - t0)} s)`);
    if (ok) tally.pass++; else { tally.fail++; failed.push(`coverage floor (workers: ${coverageMode})`); }
    // the raw V8 files run to gigabytes; the report stays in its report/ folder
    for (const f of readdirSync(covDir)) if (/^coverage-.*\.json$/.test(f)) unlinkSync(path.join(covDir, f));
  })();
}

function stop(sig) {
  for (const { child } of running) { try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ } }
  console.log(`\nstopped by ${sig}: ${running.size} running processes ended`);
  process.exit(130);
}
process.on('SIGINT', () => stop('SIGINT'));
process.on('SIGTERM', () => stop('SIGTERM'));

const queue = [...items];
async function slot() {
  for (let it = queue.shift(); it; it = queue.shift()) await (it.kind === 'check' ? runCheck(it) : runTest(it));
}
await Promise.all(Array.from({ length: Math.min(jobs, queue.length) }, slot));
if (covering) { coverageReport(); await coverageRun; }

// ---- the closing lines ------------------------------------------------------------------
const durations = { ...readJson(DURATIONS), ...measured };
writeFileSync(DURATIONS, `${JSON.stringify(durations, Object.keys(durations).sort(), 1)}\n`);
for (const [w, m] of perMode) if (m.processes) console.log(`-- workers ${w}: ${m.processes} processes, from ${secs(m.t0 - started)} s to ${secs(m.t1 - started)} s`);
if (failed.length) console.log(`failed: ${failed.join('; ')}`);
console.log(`checks and suites took ${Math.round((Date.now() - started) / 1000)} s`);
console.log(`${tally.pass} passed, ${tally.fail} failed, ${tally.skip} skipped`);
process.exit(tally.fail ? 1 : 0);
