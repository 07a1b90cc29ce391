// Every thread the server starts names itself (src/thread-name.ts), so that top -H, ps -L,
// perf and /proc/<pid>/task/<tid>/comm tell the shards and the delta threads apart.
// The server runs in this test's process: its threads are this process's threads.

import { readdirSync, readFileSync } from 'node:fs';
import t from 'tap';
import { nameThread, THREAD_NAME_MAX } from '../../src/thread-name';
import { startServer, WORKERS } from '../helpers/server';

function threadNames(): string[] {
  const names: string[] = [];
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      names.push(readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim());
    } catch { /* the thread ended between readdir and read */ }
  }
  return names.sort();
}

t.test('shards, the delta sequencer and its pool threads are named', async (t) => {
  const before = threadNames();
  t.notOk(before.some((n) => n.startsWith('shard-')), 'no shard thread before the server starts');
  const srv = await startServer({ delta_compression: { pool_size: 1 } });
  try {
    const names = threadNames();
    for (let i = 0; i < WORKERS; i++) t.equal(names.filter((n) => n === `shard-${i}`).length, 1, `one thread named shard-${i}`);
    t.equal(names.filter((n) => n.startsWith('shard-')).length, WORKERS, 'no other shard names');
    // at least one: a thread that a named thread starts is born with its name (Linux), so a
    // helper the sequencer starts may show `delta` too (the sequencer keeps the process's node
    // flags, unlike the shards: under a test runner that installs module loader hooks, their
    // hooks thread)
    t.ok(names.includes('delta'), 'the delta sequencer');
    // the pool's thread loads its task module (and names itself) with the warm-up task,
    // which the sequencer runs before it reports ready
    t.equal(names.filter((n) => n === 'delta-pool').length, 1, 'the delta pool thread');
  } finally {
    await srv.stop();
  }
});

t.test('a name is cut to what Linux keeps (15 bytes)', async (t) => {
  const long = 'a-very-long-thread-name';
  t.ok(nameThread(long));
  t.equal(readFileSync('/proc/thread-self/comm', 'utf8').trim(), long.slice(0, THREAD_NAME_MAX));
  t.ok(nameThread('node'));
});
