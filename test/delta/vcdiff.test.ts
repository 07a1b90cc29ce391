// delta/vcdiff.ts: open-vcdiff's interleaved output rewritten to standard RFC 3284 decodes
// to the target byte for byte (with open-vcdiff's own decoder, which reads both formats;
// and with Debian's strict `xdelta3 -d` where it is installed).

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { toStandardVcdiff, VcdiffFormatError } from '../../src/delta/vcdiff';
import { rng } from './clients';

type Codec = (a: Uint8Array, b: Uint8Array) => Uint8Array;

t.test('random targets: the standard form decodes exactly', async (t) => {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { encoder, decoder } = await (require('vcdiff-wasm') as () => Promise<{ encoder: Codec; decoder: Codec }>)();
  const rand = rng(99);
  // the reference decoder: scripts/deps.sh (make test) installs it; missing is a failure, not a quieter test
  const hasXdelta = spawnSync('xdelta3', ['-V']).status === 0;
  t.ok(hasXdelta, 'xdelta3 is installed (scripts/deps.sh, or apt-get install -y xdelta3)');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vcdiff-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  let strict = 0;
  for (let i = 0; i < 200; i++) {
    const n = 20 + Math.floor(rand() * 6000);
    const base = Buffer.alloc(n);
    for (let j = 0; j < n; j++) base[j] = 97 + Math.floor(rand() * (i % 3 === 0 ? 26 : 4));
    const changed = Buffer.from(base);
    for (let k = 0; k < 1 + (i % 30); k++) changed[Math.floor(rand() * n)] = 65 + Math.floor(rand() * 26);
    const target = Buffer.concat([changed.subarray(0, n >> 1), Buffer.from('inserted'.repeat(i % 7)), changed.subarray(n >> 1), i % 5 === 0 ? Buffer.alloc(300, 7) : Buffer.alloc(0)]);
    const std = toStandardVcdiff(encoder(base, target));
    if (std[3] !== 0) t.fail('version byte 0');
    if (!Buffer.from(decoder(base, std)).equals(target)) t.fail(`case ${i}: open-vcdiff decodes something else`);
    if (hasXdelta && i % 20 === 0) {
      fs.writeFileSync(path.join(dir, 's'), base);
      fs.writeFileSync(path.join(dir, 'd'), std);
      const r = spawnSync('xdelta3', ['-d', '-f', '-s', path.join(dir, 's'), path.join(dir, 'd'), path.join(dir, 'o')]);
      if (r.status !== 0 || !fs.readFileSync(path.join(dir, 'o')).equals(target)) t.fail(`case ${i}: xdelta3 -d refused or differs`);
      strict++;
    }
  }
  t.pass('200 random deltas decode exactly');
  if (hasXdelta) t.equal(strict, 10, 'xdelta3 -d decoded every sampled one');
  else t.comment('xdelta3 not installed: the strict decoder check is skipped');
});

t.test('refuses what it cannot rewrite', async (t) => {
  t.throws(() => toStandardVcdiff(Uint8Array.of(1, 2, 3, 4, 5)), { code: 'RC_ERR_VCDIFF' }, 'bad magic');
  t.throws(() => toStandardVcdiff(Uint8Array.of(0xd6, 0xc3, 0xc4, 0x07, 0)), { code: 'RC_ERR_VCDIFF' }, 'unknown version');
  t.ok(new VcdiffFormatError('x') instanceof Error);
  const already = Uint8Array.of(0xd6, 0xc3, 0xc4, 0x00, 0);
  t.equal(toStandardVcdiff(already), already, 'a standard delta is returned as is');
});
