// channels/cache.ts: the owner's store (lazy expiry, sweep) and the shard side's replay
// decision (a live API publish while the owner's answer is in flight skips the replay).
import t from 'tap';
import type { Bus } from '../../src/bus/bus';
import type { ControlMsg } from '../../src/bus/messages';
import { CacheChannels, CacheStore, type CachedMessage } from '../../src/channels/cache';
import { frame } from '../../src/protocol/frames';

t.test('CacheStore: last one wins, lazy expiry, sweep', async (t) => {
  let now = 1_000;
  const s = new CacheStore(() => now);
  t.equal(s.get('a', 'cache-x'), null, 'nothing yet');
  s.set('a', 'cache-x', 'm1', 10);
  s.set('a', 'cache-x', 'm2', 10);
  s.set('b', 'cache-x', 'other app', 10);
  t.same(s.get('a', 'cache-x'), { message: 'm2', ttlMs: 10_000 });
  now += 9_999;
  t.same(s.get('a', 'cache-x'), { message: 'm2', ttlMs: 1 });
  now += 1;
  t.equal(s.get('a', 'cache-x'), null, 'expired exactly at its TTL');
  t.equal(s.size, 1, 'dropped on read');
  s.set('a', 'y#cache-1', 'short', 1);
  s.set('a', 'cache-long', 'long', 3600);
  now += 1_000;
  t.equal(s.sweep(), 2, 'sweep drops the expired ones (b/cache-x and y#cache-1)');
  t.equal(s.size, 1);
  t.same(s.get('a', 'cache-long')?.message, 'long');
  s.startSweep(10);
  s.stop();
});

t.test('CacheChannels: ttl, remember → owner, replay decision', async (t) => {
  const sent: [number, ControlMsg][] = [];
  let answer: (m: CachedMessage | null) => void = () => {};
  const bus = {
    control: (to: number, msg: ControlMsg) => { sent.push([to, msg]); },
    request: () => new Promise((resolve) => { answer = resolve; }),
  } as unknown as Bus;
  const cache = new CacheChannels(bus, 4, 3600);
  t.equal(cache.ttl('cache-a'), 3600);
  t.equal(cache.ttl('x#cache-5'), 5);
  t.equal(cache.ttl('plain'), null);
  cache.remember('app', 'cache-a', 'msg', 3600);
  t.same(sent[0][1], { type: 'cache_set', app: 'app', channel: 'cache-a', message: 'msg', ttl: 3600 });

  const api = (channel: string) => ({ app: 'app', channel, except: '', message: Buffer.from(frame('ev', '{}', channel)) });
  const client = (channel: string) => ({ app: 'app', channel, except: '', message: Buffer.from(frame('client-x', {}, channel)) });

  let p = cache.forReplay('app', 'cache-a');
  cache.delivered(client('cache-a'));
  cache.delivered(api('cache-b'));
  answer({ message: 'cached', ttlMs: 5 });
  t.same(await p, { kind: 'hit', message: 'cached', tags: null }, 'a client event or another channel does not count');

  p = cache.forReplay('app', 'cache-a');
  cache.delivered(api('cache-a'));
  answer({ message: 'cached', ttlMs: 5 });
  t.same(await p, { kind: 'live' }, 'an API publish reached the socket meanwhile: no replay');

  p = cache.forReplay('app', 'cache-a');
  answer(null);
  t.same(await p, { kind: 'miss' });
  cache.delivered(api('cache-a')); // nothing watched any more: no effect, no error
});
