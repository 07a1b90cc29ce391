// client/recovery.js (withRecovery) with an unmodified pusher-js in Node: the client's TCP
// connection is cut (reset, no close frame) by a proxy that then refuses connections while
// 200 messages are published on each of 3 history channels; once it lets the client back
// in, pusher-js reconnects and resubscribes, and the plug-in's `recover` brings exactly the
// missed messages: each channel ends with every message once, in order. Workers 1 and 4.
import { createRequire } from 'node:module';
import path from 'node:path';
import t, { type Test } from 'tap';
import type PusherJS from 'pusher-js';
import { APP, WORKERS, eventually, startServer } from '../helpers/server';
import { connected, pusherJs, publishNumbered, subscribeNumbered } from '../helpers/pusher-js';
import { cutProxy } from '../helpers/cut-proxy';

type ClientModule = typeof import('../../client/index.js');
const CLIENT = path.resolve(__dirname, '..', '..', '..', 'client', 'index.js');
const load = (): ClientModule => createRequire(__filename)(CLIENT) as ClientModule;

/** A server keeping `size` messages of room-*, a proxy in front, a pusher-js client through it with the plug-in. */
async function setup(t: Test, size: number) {
  const srv = await startServer({ apps: [{ ...APP, channel_history: { 'room-*': { size, ttl: 120 } } as never }] });
  const px = await cutProxy(srv.port);
  t.teardown(async () => { await px.close(); await srv.stop(); });
  const pusher: PusherJS = srv.track(pusherJs(px.port));
  const failed: [string, { reason?: string }][] = [];
  const recovery = load().withRecovery(pusher, { onFailed: (c, info) => failed.push([c, info]) });
  await connected(pusher);
  return { srv, px, sdk: srv.sdk(), pusher, failed, recovery };
}

const CHANNELS = ['room-1', 'room-2', 'room-3'];
const BEFORE = 10;
const DURING = 200;

t.test(`withRecovery: a dropped TCP connection misses nothing (${WORKERS} workers)`, async (t) => {
  const { px, sdk, pusher, failed, recovery } = await setup(t, 500);
  const got = await subscribeNumbered(pusher, CHANNELS);
  // positions known: the recovery frame came
  await eventually(() => CHANNELS.every((c) => recovery.positions.has(c)), 5000, 'positions');
  const publish = (from: number, to: number) => publishNumbered(sdk, CHANNELS, from, to);
  await publish(1, BEFORE);
  await eventually(() => CHANNELS.every((c) => got.get(c)!.length === BEFORE), 5000, 'the first messages');

  px.cut();
  await publish(BEFORE + 1, BEFORE + DURING);
  const before = px.accepted();
  px.allow();
  await eventually(() => px.accepted() > before && pusher.connection.state === 'connected', 30_000, 'the reconnect');
  await eventually(() => CHANNELS.every((c) => got.get(c)!.length >= BEFORE + DURING), 15_000, 'the missed messages');
  // a live one after the replay: the marker that nothing else is on its way
  await publish(BEFORE + DURING + 1, BEFORE + DURING + 1);
  await eventually(() => CHANNELS.every((c) => got.get(c)!.includes(BEFORE + DURING + 1)), 5000, 'the live message after');
  const want = Array.from({ length: BEFORE + DURING + 1 }, (_, i) => i + 1);
  for (const c of CHANNELS) t.same(got.get(c), want, `${c}: every message once, in order`);
  t.same(failed, [], 'no recovery failed');
  pusher.disconnect();
});

t.test('withRecovery: a failed resume is reported (callback and channel event)', async (t) => {
  const { px, sdk, pusher, failed, recovery } = await setup(t, 3);
  const ch = pusher.subscribe('room-x');
  const onChannel: unknown[] = [];
  ch.bind('ringcast:recovery_failed', (d: unknown) => onChannel.push(d));
  await eventually(() => recovery.positions.has('room-x'), 5000, 'positions');
  t.same(failed, [], 'positions only: nothing to report');
  px.cut();
  for (let i = 0; i < 6; i++) await sdk.trigger('room-x', 'msg', { i }); // size 3: the oldest are gone
  px.allow();
  await eventually(() => failed.length === 1 && onChannel.length === 1, 30_000, 'the failure report');
  t.equal(failed[0][0], 'room-x');
  t.match(failed[0][1], { recovered: false, reason: 'too_old' });
  t.match(onChannel[0], { reason: 'too_old' });
  pusher.disconnect();
});
