// The circuit breaker of a hook endpoint (hooks/breaker.ts) and the pattern matcher
// (hooks/patterns.ts), without threads or sockets.

import t from 'tap';
import { Breaker, type BreakerState } from '../../src/hooks/breaker';
import { compilePatterns } from '../../src/hooks/patterns';

t.test('closed → open after N consecutive failures → half-open single probe → closed or open again', async (t) => {
  const seen: BreakerState[] = [];
  const b = new Breaker(3, 1000, (s) => seen.push(s));
  t.ok(b.admit(0));
  b.failure(0);
  b.failure(0);
  b.success();
  b.failure(0);
  b.failure(0);
  t.equal(b.state, 'closed', 'a success in between resets the count');
  b.failure(10);
  t.equal(b.state, 'open');
  t.notOk(b.admit(500), 'open: no call');
  t.notOk(b.admit(1009), 'still open until open_ms passed');
  t.ok(b.admit(1010), 'half-open: the probe');
  t.equal(b.state, 'half_open');
  t.notOk(b.admit(1011), 'one probe at a time');
  b.failure(1020);
  t.equal(b.state, 'open', 'a failed probe opens it again');
  t.notOk(b.admit(2000));
  t.ok(b.admit(2020));
  b.release();
  t.ok(b.admit(2021), 'a cancelled probe frees the slot');
  b.success();
  t.equal(b.state, 'closed');
  t.same(seen, ['open', 'half_open', 'open', 'half_open', 'closed']);
});

t.test('patterns: exact, prefix*, *suffix, *', async (t) => {
  const m = compilePatterns(['news', 'private-*', '*-chat']);
  t.ok(m('news'));
  t.notOk(m('newsroom'));
  t.ok(m('private-a'));
  t.ok(m('team-chat'));
  t.notOk(m('presence-x'));
  t.ok(compilePatterns(['*'])('anything'));
  t.notOk(compilePatterns([])('anything'));
});
