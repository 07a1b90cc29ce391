// ops/ringcast.service: the settings docs/operations.md promises, checked against the
// code's defaults, and `systemd-analyze verify` on a copy whose ExecStart is this
// checkout's bin (the unit's /usr/local/bin/ringcast does not exist here).

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { defaultConfig } from '../../src/config';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const UNIT = readFileSync(path.join(ROOT, 'ops', 'ringcast.service'), 'utf8');

function settings(unit: string): Map<string, string[]> {
  const m = new Map<string, string[]>();
  let section = '';
  for (const raw of unit.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const s = /^\[(\w+)\]$/.exec(line);
    if (s) { section = s[1]; continue; }
    const eq = line.indexOf('=');
    const key = `${section}.${line.slice(0, eq)}`;
    m.set(key, [...(m.get(key) ?? []), line.slice(eq + 1)]);
  }
  return m;
}

t.test('the unit sets what docs/operations.md says', async (t) => {
  const s = settings(UNIT);
  const one = (k: string) => s.get(k)?.at(-1);
  t.equal(one('Service.User'), 'ringcast', 'a dedicated user');
  t.equal(one('Service.Group'), 'ringcast');
  t.match(one('Service.ExecStart'), /^\/usr\/local\/bin\/ringcast start --config \/etc\/ringcast\/config\.yaml$/);
  t.equal(one('Service.KillSignal'), 'SIGTERM');
  t.equal(one('Service.KillMode'), 'mixed', 'SIGTERM to the main process; SIGKILL to all only after the timeout');
  t.ok(Number(one('Service.TimeoutStopSec')) * 1000 > defaultConfig().shutdown_grace_period, 'TimeoutStopSec exceeds the default shutdown_grace_period');
  t.ok(Number(one('Service.LimitNOFILE')) >= 200_000, 'room for 100k+ connections');
  t.equal(one('Service.Restart'), 'on-failure');
  t.equal(one('Service.RestartPreventExitStatus'), '78', 'a configuration error (EX_CONFIG) is not retried');
  t.equal(one('Service.RuntimeDirectory'), 'ringcast');
  t.notOk(s.has('Service.MemoryDenyWriteExecute'), 'V8 needs W+X pages');
  t.equal(one('Install.WantedBy'), 'multi-user.target');
});

t.test('systemd-analyze verify', async (t) => {
  // scripts/deps.sh (make test) installs it (Debian systemd): its absence is a failure, not a skip
  if (spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' }).error) {
    return t.fail('systemd-analyze is not installed: run scripts/deps.sh (make deps) or apt-get install -y systemd');
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-unit-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const unit = path.join(dir, 'ringcast.service');
  writeFileSync(unit, UNIT.replaceAll('/usr/local/bin/ringcast', path.join(ROOT, 'bin', 'ringcast.js')));
  const r = spawnSync('systemd-analyze', ['verify', unit], { encoding: 'utf8' });
  // Warnings about the host (no such user, no running systemd) are not the unit's.
  const problems = `${r.stdout}${r.stderr}`.split('\n').filter((l) => l.includes('ringcast.service') && !/Failed to look up|not running|user/i.test(l));
  t.same(problems, [], 'no complaint about the unit');
  t.equal(r.status, 0);
});
