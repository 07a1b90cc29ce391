// A storm of drops does not write a log line per item: client events dropped because a
// shard's ring and spill queue are full (fixtures/drop-storm.ts, a child process whose
// stdout carries the server's JSON log lines) are logged at most once per second per
// message (src/log.ts logLimited), with the count of lines not written in the next one,
// while bus_full_total{source="client_event"} counts every drop. The limit is per app: one
// app's storm does not hide another app's line.
// Runs with 2 shards (4 under RINGCAST_TEST_WORKERS=4).

import { spawn } from 'node:child_process';
import path from 'node:path';
import t from 'tap';
import { Writable } from 'node:stream';
import pino from 'pino';
import { LOG_LIMIT_INTERVAL_MS, logLimited } from '../../src/log';
import { WORKERS, eventually } from '../helpers/server';

const MSG = 'client event dropped: internal queue full';

t.test('dropped client events: bounded log lines, exact counter', async (t) => {
  const fixture = path.join(__dirname, 'fixtures', 'drop-storm.js');
  const child = spawn(process.execPath, [fixture, String(Math.max(2, WORKERS))], { env: { ...process.env, RINGCAST_TEST_HOOKS: '1' }, stdio: ['pipe', 'pipe', 'pipe'] });
  const killer = setTimeout(() => child.kill('SIGKILL'), 90_000);
  t.teardown(() => { clearTimeout(killer); child.kill('SIGKILL'); });
  let out = '';
  let err = '';
  child.stdout.on('data', (b: Buffer) => { out += b; });
  child.stderr.on('data', (b: Buffer) => { err += b; });
  const exited = new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
  const lines = () => out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg: string; suppressed?: number; channel?: string })
    .filter((l) => l.msg === MSG);
  const result = () => {
    const l = out.split('\n').find((x) => x.startsWith('RESULT '));
    return l ? JSON.parse(l.slice(7)) as { sent: number; dropped: number; counted: number; stormMs: number } : null;
  };
  await Promise.race([
    eventually(() => result() !== null, 60_000, 'the storm to end'),
    exited.then((c) => { throw new Error(`fixture exited ${c}: ${err}`); }),
  ]);
  const r = result()!;
  t.ok(r.dropped >= 1000, `${r.dropped} of ${r.sent} client events dropped (refused to the sender)`);
  t.equal(r.counted, r.dropped, 'bus_full_total{source="client_event"} counts every drop');

  // the lines written: the first of each interval, then one summary with `suppressed`
  const total = () => lines().reduce((n, l) => n + (l.suppressed ?? 1), 0);
  await eventually(() => total() === r.dropped, 10 * LOG_LIMIT_INTERVAL_MS, 'the log lines to account for every drop');
  const seen = lines();
  const bound = 2 + Math.ceil(r.stormMs / LOG_LIMIT_INTERVAL_MS) * 2;
  t.ok(seen.length <= bound, `${seen.length} log lines for ${r.dropped} drops in ${r.stormMs} ms (at most ${bound})`);
  t.ok(seen.some((l) => (l.suppressed ?? 0) > 0), 'a line says how many were not logged');
  t.equal(seen[0].channel, 'private-storm', 'the lines keep their fields');

  child.stdin.write('stop\n');
  t.equal(await exited, 0, `fixture exit 0${err ? `\n${err}` : ''}`);
});

t.test('logLimited: per app, so one app\'s storm does not hide another app\'s line', async (t) => {
  const lines: { msg: string; app_id?: string; suppressed?: number }[] = [];
  const log = pino({ level: 'warn' }, new Writable({ write(chunk: Buffer, _e, cb) { for (const l of chunk.toString().split('\n')) if (l) lines.push(JSON.parse(l)); cb(); } }));
  for (let i = 0; i < 100; i++) logLimited(log, 'warn', { app_id: 'noisy' }, 'a storm');
  logLimited(log, 'warn', { app_id: 'quiet' }, 'a storm');
  logLimited(log, 'warn', {}, 'a storm');
  t.same(lines.map((l) => l.app_id ?? '-'), ['noisy', 'quiet', '-'], 'one line each now: the quiet app\'s is not suppressed');
  await eventually(() => lines.length === 4, LOG_LIMIT_INTERVAL_MS * 3, 'the suppressed count');
  t.same(lines[3], { ...lines[3], app_id: 'noisy', suppressed: 99 }, 'then the noisy app\'s count');
});
