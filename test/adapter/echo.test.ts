// test-modes: once (a unit of the primary thread)
// EchoWatch (src/adapter/echo.ts) on a fake clock: when a node's own heartbeat is overdue
// it renews the transport, and only then:
//  - an echo within ECHO_TIMEOUT_MS: nothing;
//  - overdue at one check only (an event-loop stall: the echo is read right after): nothing;
//  - overdue at two checks in a row while up: one renewal, then a probe of the new connections;
//  - the backend down, or its state changed since the probe: nothing;
//  - a renewal that fails: reported, and tried again at the next overdue probe, not before.

import t from 'tap';
import { ECHO_CHECK_MS, ECHO_TIMEOUT_MS, EchoWatch } from '../../src/adapter/echo';

function rig(opts: { up?: boolean; renew?: () => Promise<void> } = {}) {
  let now = 1_000_000;
  const seen = { renewals: 0, probes: 0, deaf: [] as number[], failed: [] as unknown[] };
  const state = { up: opts.up ?? true };
  const w = new EchoWatch({
    isUp: () => state.up,
    renew: () => {
      seen.renewals++;
      return opts.renew ? opts.renew() : Promise.resolve();
    },
    probe: () => {
      seen.probes++;
      return true;
    },
    onDeaf: (ms) => seen.deaf.push(ms),
    onRenewFailed: (err) => seen.failed.push(err),
    now: () => now,
  });
  const advance = (ms: number) => { now += ms; };
  return { w, seen, state, advance };
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

t.test('an echo in time: no renewal', async (t) => {
  const { w, seen, advance } = rig();
  for (let i = 0; i < 20; i++) {
    w.sent();
    advance(ECHO_TIMEOUT_MS - 1);
    w.check();
    w.echoed();
    advance(ECHO_CHECK_MS);
    w.check();
  }
  t.equal(seen.renewals, 0);
});

t.test('overdue at one check only (a stall, then the echo is read): no renewal', async (t) => {
  const { w, seen, advance } = rig();
  w.sent();
  advance(ECHO_TIMEOUT_MS + 3000);
  w.check();
  w.echoed();
  advance(ECHO_CHECK_MS);
  w.check();
  t.equal(seen.renewals, 0);
});

t.test('overdue at two checks in a row: one renewal, then a probe', async (t) => {
  const { w, seen, advance } = rig();
  w.sent();
  advance(ECHO_TIMEOUT_MS);
  w.check();
  t.equal(seen.renewals, 0, 'not at the first overdue check');
  advance(ECHO_CHECK_MS);
  w.check();
  t.equal(seen.renewals, 1, 'renewed at the second');
  t.same(seen.deaf, [ECHO_TIMEOUT_MS + ECHO_CHECK_MS], 'reported with how long the probe was overdue');
  advance(ECHO_CHECK_MS);
  w.check();
  t.equal(seen.renewals, 1, 'not again while the first one is under way');
  await flush();
  t.equal(seen.probes, 1, 'a probe of the new connections');
  advance(ECHO_TIMEOUT_MS - 1);
  w.check();
  w.echoed();
  advance(ECHO_CHECK_MS * 3);
  w.check();
  w.check();
  t.equal(seen.renewals, 1, 'the probe came back: no more');
});

t.test('the backend down, or its state changed: no renewal', async (t) => {
  const { w, seen, state, advance } = rig({ up: false });
  w.sent();
  advance(ECHO_TIMEOUT_MS * 3);
  w.check();
  w.check();
  t.equal(seen.renewals, 0, 'down: every heartbeat is lost, nothing to renew');
  state.up = true;
  w.reset(); // the backend came back
  advance(ECHO_CHECK_MS);
  w.check();
  w.check();
  t.equal(seen.renewals, 0, 'what was sent before the state changed says nothing');
});

t.test('a renewal that fails: reported, tried again at the next overdue probe', async (t) => {
  const { w, seen, advance } = rig({ renew: () => Promise.reject(new Error('NOPERM')) });
  w.sent();
  advance(ECHO_TIMEOUT_MS);
  w.check();
  advance(ECHO_CHECK_MS);
  w.check();
  await flush();
  t.equal(seen.renewals, 1);
  t.match(seen.failed, [{ message: 'NOPERM' }], 'reported');
  t.equal(seen.probes, 0, 'no probe after a failed renewal');
  advance(ECHO_TIMEOUT_MS * 2);
  w.check();
  w.check();
  t.equal(seen.renewals, 1, 'nothing sent since: no second renewal');
  w.sent();
  advance(ECHO_TIMEOUT_MS);
  w.check();
  advance(ECHO_CHECK_MS);
  w.check();
  t.equal(seen.renewals, 2, 'the next heartbeat overdue: tried again');
});
