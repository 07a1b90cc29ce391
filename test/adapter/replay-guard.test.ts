// test-modes: once (no server: the replay guard of signed cluster frames, adapter/signed.ts)
// A stamp is taken once per sender and sequence number, in any order within SEQ_WINDOW;
// one further behind is replayed; a stamp more than FRESH_MS from the clock, or from
// before the guard began, is stale; a sender silent for 2 × FRESH_MS is forgotten.
import t from 'tap';
import { FRESH_MS, SEQ_WINDOW, replayGuard } from '../../src/adapter/signed';

t.test('replay guard', async (t) => {
  let now = 1_000_000;
  const check = replayGuard(() => now);
  const s = (seq: number, sender = 'a', ms = now) => check({ sender, ms, seq });
  t.equal(s(5), null);
  t.equal(s(5), 'replayed', 'the same sequence number again');
  t.equal(s(3), null, 'an older one not seen yet (frames of other subjects can overtake)');
  t.equal(s(3), 'replayed');
  t.equal(s(5, 'b'), null, 'another sender has its own numbers');
  t.equal(s(6, 'a', now - FRESH_MS - 1), 'stale', 'stamped too long ago');
  t.equal(s(6, 'a', now + FRESH_MS + 1), 'stale', 'stamped too far ahead');
  t.equal(s(6, 'a', 999_999), 'stale', 'stamped before the guard began');
  t.equal(s(6), null, 'the same number fresh is taken');
  t.equal(s(6 + SEQ_WINDOW), null, 'a jump past the window');
  t.equal(s(6), 'replayed', 'a number a window behind the newest');
  t.equal(s(7), null, 'one just inside the window: not seen yet');
  t.equal(s(10 + 3 * SEQ_WINDOW), null, 'a jump of several windows');
  t.equal(s(7 + 3 * SEQ_WINDOW), null, 'its slots are free');
  t.equal(s(Number.NaN), 'replayed', 'not a sequence number');
  now += 3 * FRESH_MS;
  t.equal(s(1, 'c'), null, 'prunes silent senders on the way');
  t.equal(s(1, 'a'), null, 'a sender forgotten after 2 × FRESH_MS starts anew (its old frames are stale by then)');
});
