// A subscription with positions (`recover` in its subscribe data) receives everything a stock
// subscription of the channel receives, and only adds `__serial` to the message frames
// (the protocol "History, rewind and recovery", "Positions"): presence member_added /
// member_removed and pusher_internal:subscription_count reach it, each exactly once, and
// its messages carry `__serial` exactly once. Raw `ws` clients for the exact frames (plain
// and tag-filtered subscriptions); pusher-js 8 with client/ withRecovery on a presence
// channel cut off by a TCP proxy (reset, no close frame): after the reconnect the member
// list comes with subscription_succeeded, the missed messages are replayed, and later
// member events arrive. history.driver memory and redis. Workers 1 and 4.
import { createRequire } from 'node:module';
import path from 'node:path';
import t, { type Test } from 'tap';
import type PusherJS from 'pusher-js';
import type { ConfigInput } from '../../src/config';
import { channelAuth } from '../../src/protocol/hmac';
import { cutProxy } from '../helpers/cut-proxy';
import { signedPost } from '../helpers/http';
import { connected, pusherJs } from '../helpers/pusher-js';
import { RedisServer } from '../helpers/redis';
import { APP, RawClient, WORKERS, eventually, startServer, type Frame, type TestServer } from '../helpers/server';
import { MARKER, settle } from '../helpers/settle';

type ClientModule = typeof import('../../client/index.js');
const CLIENT = path.resolve(__dirname, '..', '..', '..', 'client', 'index.js');
const load = (): ClientModule => createRequire(__filename)(CLIENT) as ClientModule;

t.setTimeout(240_000);

const HISTORY = { 'presence-h-*': { size: 100, ttl: 120 }, 'room-*': { size: 100, ttl: 120 }, 'cache-h-*': { size: 100, ttl: 120 } };
const COUNTED = { ...APP, subscription_count_events: true, enable_client_messages: true, channel_history: HISTORY as never };

const isMember = (op: 'added' | 'removed') => (f: Frame) => f.event === `pusher_internal:member_${op}`;
const isCount = (f: Frame) => f.event === 'pusher_internal:subscription_count';
const dataOf = (f: Frame) => (typeof f.data === 'string' ? JSON.parse(f.data) : f.data) as Record<string, unknown>;

/** Every text frame a client received, as sent (RawClient.frames holds them parsed: a repeated key would be lost). */
function rawFrames(c: RawClient): string[] {
  const raw: string[] = [];
  c.ws.on('message', (m) => raw.push(m.toString()));
  return raw;
}
const occurrences = (s: string, what: string) => s.split(what).length - 1;

async function server(t: Test, driver: 'memory' | 'redis', extra: ConfigInput = {}, app: Record<string, unknown> = {}): Promise<{ srv: TestServer; redis: RedisServer | null }> {
  let redisCfg: ConfigInput = {};
  let redis: RedisServer | null = null;
  if (driver === 'redis') {
    const r = await RedisServer.start();
    redis = r;
    t.teardown(() => r.stop());
    redisCfg = { database: { redis: { host: '127.0.0.1', port: r.port } } };
  }
  const srv = await startServer({ ...redisCfg, ...extra, history: { driver }, apps: [{ ...COUNTED, ...app }] });
  t.teardown(() => srv.stop());
  return { srv, redis };
}

for (const driver of ['memory', 'redis'] as const) {
  t.test(`history.driver ${driver}: a recover subscription gets every frame a stock one gets (${WORKERS} workers)`, async (t) => {
    // memory: also tag filters and delta compression on the history channels (the redis drivers take neither: docs/history.md)
    const { srv, redis } = driver === 'memory'
      ? await server(t, driver, { tag_filtering: { enabled: true } }, { channel_delta_compression: { 'presence-h-d*': 'Fossil', 'room-d*': 'Fossil' } })
      : await server(t, driver);
    const sdk = srv.sdk();
    const tagged = async (channel: string, i: number, region: string) => {
      const r = await signedPost(srv.port, APP, 'events', { name: 'ev', channel, data: JSON.stringify({ i }), tags: { region } });
      if (r.status !== 200) throw new Error(`publish ${i}: ${r.status} ${r.text}`);
    };

    await t.test('presence: member_added / member_removed once; messages with __serial once', async (t) => {
      const ch = 'presence-h-1';
      const r = srv.track(await RawClient.connect(srv.wsUrl()));
      const raw = rawFrames(r);
      t.equal((await r.subscribe(ch, { ...authFor(r, ch, 'r'), recover: {} })).event, 'pusher_internal:subscription_succeeded');
      const rec = await r.event('pusher_internal:recovery', ch);
      t.match(rec.data, { recovered: false, missed: 0 });
      // a stock subscriber beside it: what it gets, the recover one gets too
      const s = srv.track(await RawClient.connect(srv.wsUrl()));
      await s.subscribeAuthed(ch, { user_id: 's' });
      await r.next((f) => isMember('added')(f) && dataOf(f).user_id === 's', 5000).then((f) => r.frames.push(f));

      const o = srv.track(await RawClient.connect(srv.wsUrl()));
      await o.subscribeAuthed(ch, { user_id: 'o', user_info: { name: 'Other' } });
      const added = await r.next((f) => isMember('added')(f) && dataOf(f).user_id === 'o', 5000);
      t.same(dataOf(added), { user_id: 'o', user_info: { name: 'Other' } }, 'member_added of the other user');
      r.frames.push(added);
      await sdk.trigger(ch, 'ev', { i: 1 });
      // a client event from another socket is a history message: numbered, with user_id
      o.send({ event: 'client-typing', channel: ch, data: { i: 2 } });
      const typing = await r.event('client-typing', ch, 5000);
      t.equal((typing as Frame & { __serial?: number }).__serial, rec.data.serial + 2, 'the client event is numbered');
      t.equal(typing.user_id, 'o');
      await o.close();
      await r.next((f) => isMember('removed')(f) && dataOf(f).user_id === 'o', 5000).then((f) => r.frames.push(f));
      await s.next((f) => isMember('removed')(f) && dataOf(f).user_id === 'o', 5000).then((f) => s.frames.push(f));
      await settle(srv, [r, s], ch);

      const members = (c: RawClient) => c.frames.filter((f) => f.channel === ch && (isMember('added')(f) || isMember('removed')(f)))
        .map((f) => [f.event, dataOf(f).user_id]);
      t.same(members(r), [['pusher_internal:member_added', 's'], ['pusher_internal:member_added', 'o'], ['pusher_internal:member_removed', 'o']],
        'each member event once, in order');
      t.same(members(s).slice(-2), members(r).slice(-2), 'the same as the stock subscriber');
      t.same(r.frames.filter(isCount), [], 'presence: no subscription_count');
      const ev = raw.filter((m) => m.includes('"event":"ev"'));
      t.equal(ev.length, 1, 'the message once');
      t.equal(occurrences(ev[0], '"__serial"'), 1, '__serial once in it');
      t.equal(JSON.parse(ev[0]).__serial, rec.data.serial + 1);
      for (const m of raw.filter((x) => x.includes('member_'))) t.notOk(m.includes('__serial'), `no __serial on ${JSON.parse(m).event}`);
      t.equal(raw.filter((m) => m.includes(MARKER)).length, 1, 'the marker once');
    });

    await t.test('subscription_count once per change', async (t) => {
      const ch = 'room-count';
      const r = srv.track(await RawClient.connect(srv.wsUrl()));
      const raw = rawFrames(r);
      await r.subscribe(ch, { recover: {} });
      await r.event('pusher_internal:recovery', ch);
      /** The counts on the wire, in order (one per frame). */
      const counts = () => raw.filter((m) => m.includes('subscription_count')).map((m) => dataOf(JSON.parse(m)).subscription_count);
      await eventually(() => counts().length === 1, 5000, 'count 1');
      const o = srv.track(await RawClient.connect(srv.wsUrl()));
      await o.subscribe(ch);
      await eventually(() => counts().length === 2, 5000, 'count 2');
      await o.close();
      await eventually(() => counts().length === 3, 5000, 'count 1 again');
      await sdk.trigger(ch, 'ev', { i: 1 });
      await settle(srv, r, ch);
      t.same(counts(), [1, 2, 1], 'each count once');
      t.same(r.frames.filter(isCount).map((f) => f.channel), [ch, ch, ch]);
      const ev = raw.filter((m) => m.includes('"event":"ev"'));
      t.equal(ev.length, 1);
      t.equal(occurrences(ev[0], '"__serial"'), 1, '__serial once');
    });

    await t.test('cache channel: pusher:cache_miss once, then the cached event for a later subscriber', async (t) => {
      const ch = 'cache-h-1';
      const r = srv.track(await RawClient.connect(srv.wsUrl()));
      const raw = rawFrames(r);
      await r.subscribe(ch, { recover: {} });
      await r.event('pusher:cache_miss', ch, 5000);
      await sdk.trigger(ch, 'ev', { i: 1 });
      await r.next((f) => f.event === 'ev' && f.channel === ch, 5000);
      const k = srv.track(await RawClient.connect(srv.wsUrl()));
      await k.subscribe(ch, { recover: {} });
      const cached = await k.next((f) => f.event === 'ev' && f.channel === ch, 5000);
      t.same(dataOf(cached), { i: 1 }, 'the cached event');
      await settle(srv, [r, k], ch);
      t.equal(raw.filter((m) => m.includes('cache_miss')).length, 1, 'cache_miss once');
    });

    await t.test('cache channel: a resume gets the missed messages once, numbered, and no cached copy', async (t) => {
      const ch = 'cache-h-2';
      const a = srv.track(await RawClient.connect(srv.wsUrl()));
      await a.subscribe(ch, { recover: {} });
      const rec = dataOf(await a.event('pusher_internal:recovery', ch));
      await sdk.trigger(ch, 'ev', { i: 1 });
      const first = await a.next((f) => f.event === 'ev' && f.channel === ch, 5000);
      a.ws.close();
      await sdk.trigger(ch, 'ev', { i: 2 });
      await sdk.trigger(ch, 'ev', { i: 3 }); // the cached event now
      const b = srv.track(await RawClient.connect(srv.wsUrl()));
      const raw = rawFrames(b);
      await b.subscribe(ch, { recover: { epoch: rec.epoch, serial: (first as Frame & { __serial: number }).__serial } });
      const again = dataOf(await b.event('pusher_internal:recovery', ch));
      t.match(again, { recovered: true, missed: 2 }, 'resumed: 2 missed');
      await sdk.trigger(ch, 'ev', { i: 4 }); // live: the marker that nothing else is on its way
      await eventually(() => raw.some((m) => m.includes('"i\\":4')), 5000, 'the live message');
      const evs = raw.filter((m) => m.includes('"event":"ev"'));
      t.same(evs.map((m) => dataOf(JSON.parse(m) as Frame).i), [2, 3, 4], 'the missed two, then live: no cached copy of 3');
      t.ok(evs.every((m) => occurrences(m, '"__serial"') === 1), 'every one numbered');
      t.notOk(raw.some((m) => m.includes('cache_miss')), 'no cache_miss either');
    });

    if (driver === 'memory') {
      await t.test('a tag-filtered recover subscription: member events and counts once, matching messages with __serial', async (t) => {
        const ch = 'presence-h-f';
        const filter = { key: 'region', cmp: 'eq', val: 'eu' };
        const r = srv.track(await RawClient.connect(srv.wsUrl()));
        const raw = rawFrames(r);
        await r.subscribe(ch, { ...authFor(r, ch, 'r'), filter, recover: {} });
        const rec = await r.event('pusher_internal:recovery', ch);
        const o = srv.track(await RawClient.connect(srv.wsUrl()));
        await o.subscribeAuthed(ch, { user_id: 'o' });
        await r.next((f) => isMember('added')(f) && dataOf(f).user_id === 'o', 5000).then((f) => r.frames.push(f));
        await tagged(ch, 1, 'us');
        await tagged(ch, 2, 'eu');
        await o.close();
        await r.next((f) => isMember('removed')(f) && dataOf(f).user_id === 'o', 5000).then((f) => r.frames.push(f));
        // the marker, tagged eu, through the filter
        await tagged(ch, 3, 'eu');
        await r.next((f) => f.event === 'ev' && dataOf(f).i === 3, 5000).then((f) => r.frames.push(f));
        t.same(r.frames.filter((f) => isMember('added')(f) || isMember('removed')(f)).map((f) => [f.event, dataOf(f).user_id]),
          [['pusher_internal:member_added', 'o'], ['pusher_internal:member_removed', 'o']], 'each member event once');
        const ev = raw.filter((m) => m.includes('"event":"ev"'));
        t.same(ev.map((m) => [dataOf(JSON.parse(m)).i, JSON.parse(m).__serial]), [[2, rec.data.serial + 2], [3, rec.data.serial + 3]], 'the eu messages, channel serials');
        for (const m of ev) t.equal(occurrences(m, '"__serial"'), 1, '__serial once');

        const rc = 'room-fcount';
        await r.subscribe(rc, { filter, recover: {} });
        await r.next((f) => isCount(f) && f.channel === rc && dataOf(f).subscription_count === 1, 5000);
        const k = srv.track(await RawClient.connect(srv.wsUrl()));
        await k.subscribe(rc);
        await r.next((f) => isCount(f) && f.channel === rc && dataOf(f).subscription_count === 2, 5000);
        await tagged(rc, 9, 'eu');
        await r.next((f) => f.event === 'ev' && f.channel === rc, 5000);
        t.equal(raw.filter((m) => m.includes('subscription_count')).length, 2, 'each count once');
      });

      await t.test('a delta recover subscription: member events and counts once (its delta set), messages with __serial', async (t) => {
        const ch = 'presence-h-d1';
        const r = srv.track(await RawClient.connect(srv.wsUrl()));
        const raw = rawFrames(r);
        r.send({ event: 'pusher:enable_delta_compression', data: {} });
        await r.event('pusher:delta_compression_enabled');
        await r.subscribe(ch, { ...authFor(r, ch, 'r'), recover: {} });
        const rec = await r.event('pusher_internal:recovery', ch);
        const o = srv.track(await RawClient.connect(srv.wsUrl()));
        await o.subscribeAuthed(ch, { user_id: 'o' });
        await r.next((f) => isMember('added')(f) && dataOf(f).user_id === 'o', 5000).then((f) => r.frames.push(f));
        await sdk.trigger(ch, 'ev', { i: 1 });
        await o.close();
        await r.next((f) => isMember('removed')(f) && dataOf(f).user_id === 'o', 5000).then((f) => r.frames.push(f));
        await settle(srv, r, ch);
        t.same(raw.filter((m) => m.includes('member_')).map((m) => JSON.parse(m).event), ['pusher_internal:member_added', 'pusher_internal:member_removed'], 'each member event once');
        const ev = raw.filter((m) => m.includes('"event":"ev"'));
        t.equal(ev.length, 1, 'the message once (the first of its stream: full)');
        t.equal(JSON.parse(ev[0]).__serial, rec.data.serial + 1);

        const rc = 'room-d1';
        await r.subscribe(rc, { recover: {} });
        const counts = () => raw.filter((m) => m.includes('subscription_count') && m.includes(rc)).map((m) => dataOf(JSON.parse(m)).subscription_count);
        await eventually(() => counts().length === 1, 5000, 'count 1');
        const k = srv.track(await RawClient.connect(srv.wsUrl()));
        await k.subscribe(rc);
        await eventually(() => counts().length === 2, 5000, 'count 2');
        await settle(srv, r, rc);
        t.same(counts(), [1, 2], 'each count once');
      });
    }

    if (redis !== null) {
      await t.test('while its history answer is on its way (Redis hung), a recover subscription gets member events, once', async (t) => {
        const ch = 'presence-h-wait';
        const r = srv.track(await RawClient.connect(srv.wsUrl()));
        const raw = rawFrames(r);
        redis.freeze();
        let thawed = false;
        t.teardown(() => { if (!thawed) redis.thaw(); });
        t.equal((await r.subscribe(ch, { ...authFor(r, ch, 'r'), recover: {} })).event, 'pusher_internal:subscription_succeeded');
        const o = srv.track(await RawClient.connect(srv.wsUrl()));
        await o.subscribeAuthed(ch, { user_id: 'o' });
        // history.redis ASK_TIMEOUT_MS is 3 s: this comes well before any answer
        const added = await r.next((f) => isMember('added')(f) && dataOf(f).user_id === 'o', 2000);
        t.notOk(raw.some((m) => m.includes('pusher_internal:recovery')), 'no answer yet: the member event came while waiting');
        r.frames.push(added);
        redis.thaw();
        thawed = true;
        await r.event('pusher_internal:recovery', ch, 10_000);
        await o.close();
        await r.next((f) => isMember('removed')(f) && dataOf(f).user_id === 'o', 5000).then((f) => r.frames.push(f));
        await settle(srv, r, ch, { timeoutMs: 10_000 });
        t.same(raw.filter((m) => m.includes('member_')).map((m) => JSON.parse(m).event), ['pusher_internal:member_added', 'pusher_internal:member_removed'], 'each member event once');
      });
    }

    await t.test('pusher-js + withRecovery on a presence channel: members before and after a TCP cut', async (t) => {
      const ch = 'presence-h-js';
      const px = await cutProxy(srv.port);
      t.teardown(() => px.close());
      const pusher: PusherJS = srv.track(pusherJs(px.port, { user: { user_id: 'p', user_info: { name: 'P' } } }));
      const failed: unknown[] = [];
      const recovery = load().withRecovery(pusher, { onFailed: (c, info) => failed.push([c, info]) });
      await connected(pusher);
      const joined: string[] = [];
      const left: string[] = [];
      const got: number[] = [];
      let succeeded = 0;
      let list: string[] = [];
      const channel = pusher.subscribe(ch) as ReturnType<PusherJS['subscribe']> & { members: { count: number; each(f: (m: { id: string }) => void): void } };
      channel.bind('pusher:subscription_succeeded', () => {
        succeeded++;
        list = [];
        channel.members.each((m) => list.push(m.id));
        list.sort();
      });
      channel.bind('pusher:member_added', (m: { id: string }) => joined.push(m.id));
      channel.bind('pusher:member_removed', (m: { id: string }) => left.push(m.id));
      channel.bind('msg', (d: { i: number }) => got.push(d.i));
      await eventually(() => succeeded === 1 && recovery.positions.has(ch), 5000, 'subscribed with positions');
      t.same(list, ['p']);

      const a = srv.track(await RawClient.connect(srv.wsUrl()));
      await a.subscribeAuthed(ch, { user_id: 'a' });
      await eventually(() => joined.length === 1, 5000, 'member_added a');
      t.same(joined, ['a']);
      t.equal(channel.members.count, 2);
      for (let i = 1; i <= 5; i++) await sdk.trigger(ch, 'msg', { i });
      await eventually(() => got.length === 5, 5000, 'the first messages');

      px.cut();
      // meanwhile: b joins, a leaves, messages
      const b = srv.track(await RawClient.connect(srv.wsUrl()));
      await b.subscribeAuthed(ch, { user_id: 'b' });
      await a.close();
      await b.next((f) => isMember('removed')(f) && dataOf(f).user_id === 'a', 5000);
      for (let i = 6; i <= 25; i++) await sdk.trigger(ch, 'msg', { i });
      const before = px.accepted();
      px.allow();
      await eventually(() => px.accepted() > before && succeeded === 2, 30_000, 'the reconnect and resubscribe');
      t.same(list, ['b', 'p'], 'the member list after the reconnect');
      await eventually(() => got.length >= 25, 10_000, 'the missed messages');

      // later member events reach the resumed subscription
      const c = srv.track(await RawClient.connect(srv.wsUrl()));
      await c.subscribeAuthed(ch, { user_id: 'c' });
      await eventually(() => joined.includes('c'), 5000, 'member_added c');
      await b.close();
      await eventually(() => left.includes('b'), 5000, 'member_removed b');
      await sdk.trigger(ch, 'msg', { i: 26 });
      await eventually(() => got.includes(26), 5000, 'the live message after');
      t.same(got, Array.from({ length: 26 }, (_, k) => k + 1), 'every message once, in order');
      t.same(joined, ['a', 'c'], 'member_added once each (b joined while cut off: in the list)');
      t.same(left, ['b'], 'member_removed once (a left while cut off)');
      const now: string[] = [];
      channel.members.each((m) => now.push(m.id));
      t.same(now.sort(), ['c', 'p'], 'the member list follows');
      t.equal(channel.members.count, 2);
      t.same(failed, [], 'no recovery failed');
      pusher.disconnect();
    });
  });
}

/** Presence auth fields for a raw client (RawClient.subscribeAuthed without sending). */
function authFor(c: RawClient, channel: string, userId: string): Record<string, string> {
  const cd = JSON.stringify({ user_id: userId });
  return { auth: channelAuth(APP.key, APP.secret, c.socketId, channel, cd), channel_data: cd };
}
