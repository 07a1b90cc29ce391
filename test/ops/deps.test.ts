// scripts/deps.sh (run by make test) installs every binary a test runs, and no test skips
// when one is missing (it fails naming the binary): a fresh machine runs every test.
// Read from the test sources: each binary spawned by name (spawn / spawnSync / execFile /
// execFileSync / spawnServer), wrk (bench/harness/wrk.ts findWrk) and chromium
// (test/helpers/browser.ts) must be a key of deps.sh's pkg_of; npm and tar come with
// Node and the OS. Then each of those binaries is on this machine's PATH (deps.sh has run).

import { accessSync, constants, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';

const ROOT = path.resolve(__dirname, '..', '..', '..');
/** Part of any machine that runs the suite (Node ships npm; tar is in every base image). */
const BASE = new Set(['npm', 'tar']);

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sources(p) : e.name.endsWith('.ts') ? [p] : [];
  });
}

const files = sources(path.join(ROOT, 'test')).map((f) => ({ file: path.relative(ROOT, f), text: readFileSync(f, 'utf8') }));

/** Binaries the tests run, each with a file that runs it. */
function binariesRun(): Map<string, string> {
  const out = new Map<string, string>();
  for (const { file, text } of files) {
    for (const m of text.matchAll(/\b(?:spawn|spawnSync|execFile|execFileSync|spawnServer)\(\s*'([A-Za-z0-9._-]+)'/g)) out.set(m[1], file);
    for (const bin of ['redis-server', 'redis-cli']) if (/requireRedisBinaries|\['redis-server', 'redis-cli'\]/.test(text)) out.set(bin, file);
    if (/\bfindWrk\(/.test(text)) out.set('wrk', file);
    if (/\blaunchChromium\(/.test(text)) out.set('chromium', file);
  }
  return out;
}

/** The binaries deps.sh installs when missing (the keys of its pkg_of map). */
function installed(): Set<string> {
  const sh = readFileSync(path.join(ROOT, 'scripts', 'deps.sh'), 'utf8');
  const map = /declare -A pkg_of=\(([\s\S]*?)\n\)/.exec(sh);
  if (!map) throw new Error('scripts/deps.sh has no pkg_of map');
  return new Set([...map[1].matchAll(/\[([A-Za-z0-9._-]+)\]=/g)].map((m) => m[1]));
}

t.test('deps.sh installs every binary a test runs', async (t) => {
  const run = binariesRun();
  const listed = installed();
  for (const bin of ['redis-server', 'nats-server', 'systemd-analyze', 'wrk', 'chromium', 'xdelta3', 'openssl']) {
    t.ok(run.has(bin), `the scan finds ${bin} (a test runs it)`);
  }
  for (const [bin, file] of run) {
    if (BASE.has(bin)) continue;
    t.ok(listed.has(bin), `${bin} (run by ${file}) is installed by scripts/deps.sh`);
  }
});

t.test('no test is skipped (a missing binary fails its test)', async (t) => {
  const skips: string[] = [];
  for (const { file, text } of files) {
    if (file === 'test/ops/deps.test.ts') continue;
    // a test's skip option (inline or in a constant) or a t.skip call: the suite skips nothing
    for (const m of text.matchAll(/(?:t\.test\([^\n]*|=\s*)\{\s*skip:[^\n]*|\bt\.skip\([^\n]*/g)) skips.push(`${file}: ${m[0]}`);
  }
  t.same(skips, [], 'no skipped test: a missing binary fails its test, naming it');
});

function onPath(bin: string): boolean {
  return (process.env.PATH ?? '').split(path.delimiter).some((dir) => {
    try {
      accessSync(path.join(dir, bin), constants.X_OK);
      return dir !== '';
    } catch {
      return false;
    }
  });
}

t.test('every binary a test runs is on this machine (scripts/deps.sh has run)', async (t) => {
  for (const bin of binariesRun().keys()) {
    const found = onPath(bin) || (bin === 'chromium' && !!process.env.CHROMIUM_PATH);
    t.ok(found, `${bin} is installed (scripts/deps.sh)`);
  }
});
