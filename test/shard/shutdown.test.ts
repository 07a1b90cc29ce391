// shard/shutdown.ts without threads: the order of the steps and the cut's timer. The
// real thing (frozen clients, SIGTERM, stop()) is test/faults/shutdown-frozen.test.ts.

import t from 'tap';
import type { ShardEvent } from '../../src/shard/init';
import { createShutdown, CUT_SHARE } from '../../src/shard/shutdown';
import type { Socket } from '../../src/ws/types';

function setup(graceMs: number) {
  const steps: string[] = [];
  const sockets = new Map<string, Socket>();
  // A socket as uWS treats it: end() runs the close handler at once, which drops it from the map.
  const fake = (id: string) => ({ end: (code: number, reason: string) => { steps.push(`end ${id} ${code} ${reason}`); sockets.delete(id); } }) as unknown as Socket;
  for (const id of ['1.1', '1.2']) sockets.set(id, fake(id));
  const timers: { fn: () => void; ms: number; unref: boolean }[] = [];
  const shutdown = createShutdown({
    sockets,
    closeListener: () => steps.push('closeListener'),
    closeAll: () => steps.push('closeAll'),
    bus: { stop: () => steps.push('bus.stop') },
    limiter: { close: async () => { steps.push('limiter.close'); } },
    post: (e: ShardEvent) => steps.push(`post ${e.type}`),
    endThread: () => steps.push('endThread'),
    graceMs,
    clock: {
      setTimeout: (fn, ms) => {
        const timer = { fn, ms, unref: false };
        timers.push(timer);
        return { unref: () => { timer.unref = true; } };
      },
    },
    log: { warn: (_obj, msg) => steps.push(`warn ${msg.split(':')[0]}`) },
  });
  return { steps, sockets, timers, shutdown };
}

t.test('ends every WebSocket with 4200, lets go of the thread at once, cuts the rest at half the grace period', async (t) => {
  const { steps, sockets, timers, shutdown } = setup(2000);
  shutdown.run({ type: 'stopped' });
  t.same(steps, [
    'closeListener', 'end 1.1 4200 Server is shutting down', 'end 1.2 4200 Server is shutting down',
    'bus.stop', 'limiter.close', 'post stopped', 'endThread',
  ]);
  t.equal(sockets.size, 0);
  t.equal(timers.length, 1, 'one timer for the cut');
  t.equal(timers[0].ms, 2000 * CUT_SHARE);
  t.equal(shutdown.cutAfterMs, 1000);
  t.ok(timers[0].unref, 'unref\'d: a thread whose clients all closed ends without waiting for it');
  steps.length = 0;
  timers[0].fn();
  t.same(steps, ['warn shutdown', 'closeAll'], 'the cut closes whatever uWS still holds');
});

t.test('idempotent: a second run does nothing', async (t) => {
  const { steps, timers, shutdown } = setup(10_000);
  shutdown.run({ type: 'stopped' });
  const n = steps.length;
  shutdown.run({ type: 'listen_failed', port: 1 });
  t.equal(steps.length, n);
  t.equal(timers.length, 1);
});

t.test('grace period 0: the cut is due at once', async (t) => {
  const { timers, shutdown } = setup(0);
  shutdown.run({ type: 'stopped' });
  t.equal(timers[0].ms, 0);
});
