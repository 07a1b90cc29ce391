// The runtime check of bin/ringcast.js (src/runtime.ts): on a Node other than 20, or a
// libc uWebSockets.js' native code cannot load on, the CLI says what is needed and exits 1
// before anything loads the native module.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { runtimeProblem } from '../../src/runtime';

const BIN = path.resolve(__dirname, '../../../bin/ringcast.js');
const ok = { node: '20.20.2', glibc: '2.36', platform: 'linux', arch: 'x64' };

t.test('runtimeProblem names what is needed', async (t) => {
  t.equal(runtimeProblem(ok), null, 'Node 20 on glibc 2.36');
  t.equal(runtimeProblem({ ...ok, glibc: '2.41' }), null, 'a newer glibc');
  t.match(runtimeProblem({ ...ok, node: '22.11.0' }), /needs Node 20 \(this is Node 22\.11\.0\).*docs\/operations\.md/);
  t.match(runtimeProblem({ ...ok, node: '18.20.0' }), /needs Node 20 \(this is Node 18\.20\.0\)/);
  t.match(runtimeProblem({ ...ok, glibc: '2.31' }), /needs glibc 2\.36 or newer \(this system has 2\.31\)/);
  t.match(runtimeProblem({ ...ok, glibc: undefined }), /no glibc found: musl/);
  t.equal(runtimeProblem({ ...ok, platform: 'darwin', glibc: undefined }), null, 'other platforms: uWS reports itself');
});

t.test('the CLI refuses another Node with the message and exit 1, before loading uWS', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-runtime-'));
  const preload = path.join(dir, 'node22.js');
  // what the CLI sees as process.versions.node; a load of uWS would show in the output
  writeFileSync(preload, `
    Object.defineProperty(process, 'versions', { value: { ...process.versions, node: '22.11.0' } });
    const Module = require('module');
    const load = Module._load;
    Module._load = function (request, ...rest) {
      if (String(request).includes('uWebSockets')) process.stderr.write('LOADED-UWS\\n');
      return load.call(this, request, ...rest);
    };
  `);
  const r = spawnSync(process.execPath, ['-r', preload, BIN, '--version'], { encoding: 'utf8' });
  t.equal(r.status, 1);
  t.match(r.stderr, /^ringcast: needs Node 20 \(this is Node 22\.11\.0\)/);
  t.notMatch(r.stderr, /LOADED-UWS/, 'uWebSockets.js was not loaded');
  const good = spawnSync(process.execPath, [BIN, '--version'], { encoding: 'utf8' });
  t.equal(good.status, 0, 'on this Node the CLI runs');
});
