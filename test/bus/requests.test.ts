// Requests waiting for answers (src/bus/requests.ts), with fake timers: every request
// ends exactly once (answer, timeout, peer restart, stop, send failure).
import t from 'tap';
import { BusFullError, BusPeerRestartedError, BusTimeoutError } from '../../src/bus/errors';
import { Requests, Timers } from '../../src/bus/requests';

/** setTimeout/clearTimeout on a clock that moves only when told. */
class FakeTimers implements Timers {
  now = 0;
  private next = 1;
  private readonly due = new Map<number, { at: number; fn: () => void }>();
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.next++;
    this.due.set(id, { at: this.now + ms, fn });
    return id;
  }
  clearTimeout(h: unknown): void {
    this.due.delete(h as number);
  }
  get armed(): number {
    return this.due.size;
  }
  advance(ms: number): void {
    this.now += ms;
    for (const [id, d] of [...this.due]) {
      if (d.at > this.now) continue;
      this.due.delete(id);
      d.fn();
    }
  }
}

/** Settles to ['ok', value] or ['err', error] so a test can look without awaiting forever. */
function watch<T>(p: Promise<T>): { state: ['pending'] | ['ok', T] | ['err', Error] } {
  const w: { state: ['pending'] | ['ok', T] | ['err', Error] } = { state: ['pending'] };
  p.then((v) => { w.state = ['ok', v]; }, (e: Error) => { w.state = ['err', e]; });
  return w;
}
const tick = () => new Promise<void>((r) => setImmediate(r));

t.test('answers are matched to their request by number, in any order', async (t) => {
  const timers = new FakeTimers();
  const rq = new Requests(5000, timers);
  const a = rq.open<string>(1, 'channel_info');
  const b = rq.open<string>(2, 'members');
  t.not(a.req, b.req, 'distinct numbers');
  t.equal(rq.size, 2);
  t.equal(rq.settle(b.req, 'B'), true);
  t.equal(rq.settle(a.req, 'A'), true);
  t.same(await Promise.all([a.answer, b.answer]), ['A', 'B']);
  t.equal(rq.size, 0);
  t.equal(timers.armed, 0, 'timers cleared');
  t.equal(rq.settle(a.req, 'again'), false, 'a second answer settles nothing');
  t.equal(rq.settle(999, 'x'), false, 'nor an unknown number');
});

t.test('no answer in time → BusTimeoutError; a late answer is dropped', async (t) => {
  const timers = new FakeTimers();
  const rq = new Requests(5000, timers);
  const a = watch(rq.open(3, 'channel_info').answer);
  const { req, answer } = rq.open(1, 'members');
  const b = watch(answer);
  timers.advance(4999);
  await tick();
  t.same(a.state, ['pending'], 'not before the timeout');
  timers.advance(1);
  await tick();
  t.equal(a.state[0], 'err');
  const err = a.state[1] as BusTimeoutError;
  t.ok(err instanceof BusTimeoutError);
  t.notOk(err instanceof BusPeerRestartedError);
  t.equal(err.code, 'RC_ERR_BUS_TIMEOUT');
  t.match(err.message, /thread 3 did not answer channel_info/);
  t.equal(rq.settle(req, 'late'), false, 'timed out: nothing to settle');
  t.equal(b.state[0], 'err');
  t.equal(rq.size, 0);
});

t.test('peer restart → BusPeerRestartedError at once, for that peer only', async (t) => {
  const timers = new FakeTimers();
  const rq = new Requests(5000, timers);
  const toOne = watch(rq.open(1, 'presence_join').answer);
  const toOneAgain = watch(rq.open(1, 'members').answer);
  const toTwo = rq.open<number>(2, 'channel_info');
  rq.peerRestarted(1);
  await tick();
  for (const w of [toOne, toOneAgain]) {
    t.equal(w.state[0], 'err');
    const err = w.state[1] as BusPeerRestartedError;
    t.ok(err instanceof BusPeerRestartedError && err instanceof BusTimeoutError, 'a kind of timeout (503)');
    t.equal(err.code, 'RC_ERR_BUS_TIMEOUT');
    t.equal(err.peerRestarted, true);
  }
  t.match((toOne.state[1] as Error).message, /thread 1 was restarted before it answered presence_join/);
  t.equal(rq.size, 1, 'the request to thread 2 still waits');
  t.equal(timers.armed, 1);
  t.equal(rq.settle(toTwo.req, 7), true);
  t.equal(await toTwo.answer, 7);
});

t.test('closeAll() (stop) rejects every waiting request with BusTimeoutError', async (t) => {
  const timers = new FakeTimers();
  const rq = new Requests(5000, timers);
  const ws = [watch(rq.open(0, 'members').answer), watch(rq.open(2, 'channels_list').answer)];
  rq.closeAll();
  await tick();
  for (const w of ws) {
    t.equal(w.state[0], 'err');
    t.ok(w.state[1] instanceof BusTimeoutError);
  }
  t.equal(rq.size, 0);
  t.equal(timers.armed, 0);
});

t.test('fail() rejects with the send error; bad timeouts are refused', async (t) => {
  const rq = new Requests(5000, new FakeTimers());
  const { req, answer } = rq.open(4, 'members');
  rq.fail(req, new BusFullError(4));
  await t.rejects(answer, { code: 'RC_ERR_BUS_FULL' });
  t.equal(rq.size, 0);
  t.throws(() => new Requests(0), RangeError);
  t.throws(() => new Requests(Number.NaN), RangeError);
});

t.test('real timers by default', async (t) => {
  const rq = new Requests(5);
  await t.rejects(rq.open(1, 'members').answer, { code: 'RC_ERR_BUS_TIMEOUT' });
});
