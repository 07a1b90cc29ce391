// Tag-filtered subscriptions on history channels (docs/history.md, "With tag filters";
// the protocol "History, rewind and recovery"): a filtered subscriber's rewind holds the
// messages among the last N stored that pass its filter; with `recover` every message it
// gets carries the channel's `__serial` (so it sees gaps: the messages its filter dropped),
// and a resume replays only the matching messages after its position, `missed` counting
// them, then live, no gap and no duplicate. Raw `ws` clients; pusher-js with the plug-ins
// (client/index.js ringcast() filter + withRecovery) cut off by a TCP proxy resumes with
// its filter exactly. history.driver memory and redis (the stores keep each message's tags).
// Workers 1 and 4 (RINGCAST_TEST_WORKERS).
import { createRequire } from 'node:module';
import path from 'node:path';
import t from 'tap';
import type PusherJS from 'pusher-js';
import { APP, RawClient, WORKERS, eventually, startServer, type Frame } from '../helpers/server';
import { signedPost } from '../helpers/http';
import { connected, pusherJs } from '../helpers/pusher-js';
import { cutProxy } from '../helpers/cut-proxy';
import { RedisServer } from '../helpers/redis';

type ClientModule = typeof import('../../client/index.js');
const CLIENT = path.resolve(__dirname, '..', '..', '..', 'client', 'index.js');
const load = (): ClientModule => createRequire(__filename)(CLIENT) as ClientModule;

const HISTORY = { 'hf-*': { size: 100, ttl: 120, rewind: 10 }, 'small-*': { size: 5, ttl: 120 } };
const EU = { key: 'region', cmp: 'eq', val: 'eu' };
/** Message i is tagged eu when i % 3 === 0, us otherwise; i % 7 === 0 has no tags at all. */
const regionOf = (i: number): string | null => (i % 7 === 0 ? null : i % 3 === 0 ? 'eu' : 'us');
const isEu = (i: number) => regionOf(i) === 'eu';
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, k) => from + k);

type Serialed = Frame & { __serial?: number };
const iOf = (f: Frame) => (JSON.parse(f.data as string) as { i: number }).i;

for (const driver of ['memory', 'redis'] as const) t.test(`history.driver ${driver}: tag-filtered subscriptions on a history channel: rewind, positions, resume (${WORKERS} workers)`, async (t) => {
  let store = {};
  if (driver === 'redis') {
    const redis = await RedisServer.start();
    t.teardown(() => redis.stop());
    store = { database: { redis: { host: '127.0.0.1', port: redis.port } } };
  }
  const srv = await startServer({ ...store, tag_filtering: { enabled: true }, history: { driver, max_recover: 40 }, apps: [{ ...APP, channel_history: HISTORY as never }] });
  t.teardown(() => srv.stop());
  const publish = async (channel: string, from: number, to: number) => {
    for (let i = from; i <= to; i++) {
      const region = regionOf(i);
      const r = await signedPost(srv.port, APP, 'events', { name: 'ev', channel, data: JSON.stringify({ i }), ...(region ? { tags: { region } } : {}) });
      if (r.status !== 200) throw new Error(`publish ${i}: ${r.status} ${r.text}`);
    }
  };
  const events = (c: RawClient, channel: string) => c.frames.filter((f) => f.channel === channel && f.event === 'ev') as Serialed[];
  /** A positive marker: message i (eu) has arrived, so everything before it has. */
  const upTo = (c: RawClient, channel: string, i: number) =>
    c.next((f) => f.channel === channel && f.event === 'ev' && iOf(f) === i, 5000).then((f) => { c.frames.push(f); });

  await t.test('rewind: the matching messages among the last N stored, then live', async (t) => {
    await publish('hf-a', 1, 30);
    const c = srv.track(await RawClient.connect(srv.wsUrl()));
    const ok = await c.subscribe('hf-a', { filter: EU });
    t.equal(ok.event, 'pusher_internal:subscription_succeeded');
    await publish('hf-a', 31, 33);
    await upTo(c, 'hf-a', 33);
    t.same(events(c, 'hf-a').map(iOf), [...range(21, 30).filter(isEu), 33], 'of the last 10 stored (21…30) the eu ones, then the live eu one');
    t.notOk(events(c, 'hf-a').some((f) => '__serial' in f), 'no __serial without recover');
  });

  await t.test('positions: channel serials, with gaps; a resume replays the matching ones only', async (t) => {
    const a = srv.track(await RawClient.connect(srv.wsUrl()));
    await a.subscribe('hf-b', { filter: EU, recover: {} });
    const rec = await a.event('pusher_internal:recovery', 'hf-b');
    t.match(rec.data, { serial: 0, recovered: false, missed: 0 });
    const epoch = rec.data.epoch as string;
    await publish('hf-b', 1, 12);
    await upTo(a, 'hf-b', 12);
    const seen = events(a, 'hf-b');
    t.same(seen.map(iOf), range(1, 12).filter(isEu), 'the eu messages only');
    t.same(seen.map((f) => f.__serial), range(1, 12).filter(isEu), 'each with the channel\'s serial: gaps where the filter dropped one');
    await a.close();

    await publish('hf-b', 13, 30);
    const b = srv.track(await RawClient.connect(srv.wsUrl()));
    await b.subscribe('hf-b', { filter: EU, recover: { epoch, serial: 12 } });
    const r2 = await b.event('pusher_internal:recovery', 'hf-b');
    const replay = range(13, 30).filter(isEu);
    t.match(r2.data, { epoch, serial: 30, recovered: true, missed: replay.length }, 'missed counts what is replayed');
    await publish('hf-b', 31, 33);
    await upTo(b, 'hf-b', 33);
    const got = events(b, 'hf-b');
    t.same(got.map(iOf), [...replay, 33], 'replay 13…30 (eu, tagged), then live: no gap, no duplicate');
    t.same(got.map((f) => f.__serial), [...replay, 33]);

    // an unfiltered subscriber with positions beside it still gets every message
    const u = srv.track(await RawClient.connect(srv.wsUrl()));
    await u.subscribe('hf-b', { recover: { epoch, serial: 28 } });
    t.match((await u.event('pusher_internal:recovery', 'hf-b')).data, { recovered: true, missed: 5 });
    await publish('hf-b', 34, 36);
    await upTo(u, 'hf-b', 36);
    t.same(events(u, 'hf-b').map((f) => f.__serial), range(29, 36));
  });

  await t.test('max_recover counts the range, not the matches; too_old as unfiltered', async (t) => {
    const a = srv.track(await RawClient.connect(srv.wsUrl()));
    await a.subscribe('hf-c', { filter: EU, recover: {} });
    const epoch = (await a.event('pusher_internal:recovery', 'hf-c')).data.epoch as string;
    await publish('hf-c', 1, 45);
    const b = srv.track(await RawClient.connect(srv.wsUrl()));
    await b.subscribe('hf-c', { filter: EU, recover: { epoch, serial: 2 } });
    t.match((await b.event('pusher_internal:recovery', 'hf-c')).data, { recovered: false, reason: 'too_many', missed: 0 });
    const c = srv.track(await RawClient.connect(srv.wsUrl()));
    await c.subscribe('small-c', { filter: EU, recover: {} });
    const e2 = (await c.event('pusher_internal:recovery', 'small-c')).data.epoch as string;
    await publish('small-c', 1, 9);
    const d = srv.track(await RawClient.connect(srv.wsUrl()));
    await d.subscribe('small-c', { filter: EU, recover: { epoch: e2, serial: 1 } });
    t.match((await d.event('pusher_internal:recovery', 'small-c')).data, { recovered: false, reason: 'too_old' });
    await publish('small-c', 10, 12);
    await upTo(d, 'small-c', 12);
    t.same(events(d, 'small-c').map(iOf), [12], 'then live only');
  });

  await t.test('filtered subscribers joining during a publish storm: no gap, no duplicate', async (t) => {
    const N = 150;
    const storm = (async () => {
      for (let i = 1; i <= N; i += 5) {
        const batch = range(i, i + 4).map((k) => ({ name: 'ev', channel: 'hf-s', data: JSON.stringify({ i: k }), ...(regionOf(k) ? { tags: { region: regionOf(k) } } : {}) }));
        const r = await signedPost(srv.port, APP, 'batch_events', { batch });
        if (r.status !== 200) throw new Error(`batch: ${r.status}`);
      }
    })();
    const clients: RawClient[] = [];
    for (let k = 0; k < 6; k++) {
      const c = srv.track(await RawClient.connect(srv.wsUrl()));
      await c.subscribe('hf-s', { filter: EU, recover: {} });
      clients.push(c);
    }
    await storm;
    await publish('hf-s', N + 1, N + 3); // 153 is eu: the marker (serial = i throughout)
    for (const [k, c] of clients.entries()) {
      await upTo(c, 'hf-s', N + 3);
      const rec = c.frames.find((f) => f.event === 'pusher_internal:recovery')!;
      const got = events(c, 'hf-s');
      // its rewind (the eu ones among the last 10 stored, S−9 … S), then live
      const want = range(Math.max(1, rec.data.serial - 9), N + 3).filter(isEu);
      t.equal(rec.data.missed, want.filter((i) => i <= rec.data.serial).length, `client ${k}: missed counts the rewound eu messages`);
      t.same(got.map(iOf), want, `client ${k}: the rewind, then every eu message after its position ${rec.data.serial}, once, in order`);
      t.same(got.map((f) => f.__serial), want, `client ${k}: serials`);
    }
  });
});

t.test(`pusher-js: ringcast() filter + withRecovery, a dropped TCP connection: the matching messages exactly (${WORKERS} workers)`, async (t) => {
  const srv = await startServer({ tag_filtering: { enabled: true }, apps: [{ ...APP, channel_history: HISTORY as never }] });
  const px = await cutProxy(srv.port);
  t.teardown(async () => { await px.close(); await srv.stop(); });
  const pusher: PusherJS = srv.track(pusherJs(px.port));
  const failed: unknown[] = [];
  const { ringcast, withRecovery, Filter } = load();
  const recovery = withRecovery(pusher, { onFailed: (c, info) => failed.push([c, info]) });
  const client = ringcast(pusher);
  // the plug-in's position when each recovery frame arrives (this listener runs after the plug-in's)
  const atRecovery: { epoch: string; serial: number; missed: number; position: number }[] = [];
  const watch = () => {
    const transport = (pusher.connection as unknown as { connection: { transport: { bind(e: string, cb: (m: { data: string }) => void): void } } }).connection.transport;
    transport.bind('message', (m) => {
      if (!m.data.includes('pusher_internal:recovery')) return;
      const d = (JSON.parse(m.data) as { data: { epoch: string; serial: number; missed: number } }).data;
      atRecovery.push({ ...d, position: recovery.positions.get('hf-p')!.serial });
    });
  };
  pusher.connection.bind('connected', watch);
  await connected(pusher);
  const got: number[] = [];
  await new Promise<void>((resolve) => {
    const ch = client.subscribe('hf-p', { filter: Filter.eq('region', 'eu') });
    ch.bind('ev', (d: { i: number }) => got.push(d.i));
    ch.bind('pusher:subscription_succeeded', () => resolve());
  });
  await eventually(() => recovery.positions.has('hf-p'), 5000, 'positions');
  const publish = async (from: number, to: number) => {
    for (let i = from; i <= to; i += 10) {
      const batch = range(i, Math.min(to, i + 9)).map((k) => ({ name: 'ev', channel: 'hf-p', data: JSON.stringify({ i: k }), ...(regionOf(k) ? { tags: { region: regionOf(k) } } : {}) }));
      const r = await signedPost(srv.port, APP, 'batch_events', { batch });
      if (r.status !== 200) throw new Error(`batch: ${r.status}`);
    }
  };
  await publish(1, 25); // 25 is us: the position stays at 24, the last eu one
  await eventually(() => got.includes(24), 5000, 'the first eu messages');
  t.equal(recovery.positions.get('hf-p')!.serial, 24, 'the position is the channel serial of the last eu message');
  px.cut();
  await publish(26, 90); // more than the rewind (10), less than the history (100)
  const before = px.accepted();
  px.allow();
  await eventually(() => px.accepted() > before && pusher.connection.state === 'connected', 30_000, 'the reconnect');
  await eventually(() => atRecovery.length === 2, 15_000, 'the resume\'s recovery frame');
  await publish(91, 93);
  await eventually(() => got.includes(93), 15_000, 'the replay and a live one');
  t.same(got, range(1, 93).filter(isEu), 'every eu message once, in order, across the cut');
  const resumed = atRecovery[1];
  t.match(resumed, { serial: 90, missed: range(25, 90).filter(isEu).length }, 'the resume: S and the matching ones replayed');
  t.equal(resumed.position, 24, 'before the replay the position is the one asked (not S − missed, inside the replay)');
  t.same(failed, [], 'a jump in serials is not a failure');
  pusher.disconnect();
});
