// client/recovery.js (withRecovery) with an unmodified pusher-js forced onto each HTTP
// fallback transport (xhr_streaming, xhr_polling): a proxy resets the session's HTTP
// connections and refuses new ones while 100 messages are published on each of 2 history
// channels; once let back in, pusher-js opens a new session and resubscribes, and the
// plug-in's `recover` brings exactly the missed messages (the `__serial` of each message and
// `pusher_internal:recovery` reach it through the HTTP transports' frames as through a
// WebSocket's). A stock pusher-js on the same transports gets the rewind of a channel with
// `rewind`. Workers 1 and 4 (with 4, a session's requests are relayed to its home shard).
import { createRequire } from 'node:module';
import path from 'node:path';
import t from 'tap';
import { APP, WORKERS, eventually, startServer } from '../helpers/server';
import { connected, publishNumbered, subscribeNumbered } from '../helpers/pusher-js';
import { fallbackClient, FALLBACK_TRANSPORTS, transportOf } from '../helpers/fallback';
import { cutProxy } from '../helpers/cut-proxy';

type ClientModule = typeof import('../../client/index.js');
const CLIENT = path.resolve(__dirname, '..', '..', '..', 'client', 'index.js');
const load = (): ClientModule => createRequire(__filename)(CLIENT) as ClientModule;

const CHANNELS = ['room-1', 'room-2'];
const BEFORE = 5;
const DURING = 100;

t.setTimeout(240_000);

for (const transport of FALLBACK_TRANSPORTS) {
  t.test(`withRecovery over ${transport}: a cut session misses nothing (${WORKERS} workers)`, async (t) => {
    const srv = await startServer({
      http_fallback: { disconnect_delay: 1 },
      apps: [{ ...APP, channel_history: { 'room-*': { size: 500, ttl: 120 }, 'feed-*': { size: 10, ttl: 120, rewind: 3 } } as never }],
    });
    const px = await cutProxy(srv.port);
    t.teardown(async () => { await px.close(); await srv.stop(); });
    const pusher = srv.track(fallbackClient(px.port, transport));
    const failed: unknown[] = [];
    const recovery = load().withRecovery(pusher, { onFailed: (c, info) => failed.push([c, info]) });
    await connected(pusher, 15_000);
    t.equal(transportOf(pusher), transport, 'pusher-js connected with the forced transport');
    const first = pusher.connection.socket_id;
    const got = await subscribeNumbered(pusher, CHANNELS);
    await eventually(() => CHANNELS.every((c) => recovery.positions.has(c)), 10_000, 'positions (the recovery frame came)');
    const sdk = srv.sdk();
    const publish = (from: number, to: number) => publishNumbered(sdk, CHANNELS, from, to);
    await publish(1, BEFORE);
    await eventually(() => CHANNELS.every((c) => got.get(c)!.length === BEFORE), 10_000, 'the first messages');

    px.cut();
    await publish(BEFORE + 1, BEFORE + DURING);
    px.allow();
    await eventually(() => pusher.connection.state === 'connected' && pusher.connection.socket_id !== first, 60_000, 'a new session');
    await eventually(() => CHANNELS.every((c) => got.get(c)!.length >= BEFORE + DURING), 20_000, 'the missed messages');
    // a live one after the replay: the marker that nothing else is on its way
    await publish(BEFORE + DURING + 1, BEFORE + DURING + 1);
    await eventually(() => CHANNELS.every((c) => got.get(c)!.includes(BEFORE + DURING + 1)), 10_000, 'the live message after');
    const want = Array.from({ length: BEFORE + DURING + 1 }, (_, i) => i + 1);
    for (const c of CHANNELS) t.same(got.get(c), want, `${c}: every message once, in order`);
    t.same(failed, [], 'no recovery failed');
    pusher.disconnect();

    // a stock pusher-js (no plug-in): the last 3 of 5, then live, no `__serial` in sight
    for (let i = 1; i <= 5; i++) await sdk.trigger('feed-1', 'msg', { i });
    const stock = srv.track(fallbackClient(srv.port, transport));
    await connected(stock, 15_000);
    const feed = (await subscribeNumbered(stock, ['feed-1'])).get('feed-1')!;
    await eventually(() => feed.length >= 3, 10_000, 'the rewind');
    await sdk.trigger('feed-1', 'msg', { i: 6 });
    await eventually(() => feed.includes(6), 10_000, 'the live message after the rewind');
    t.same(feed, [3, 4, 5, 6], 'rewind of 3, then live, once each');
    stock.disconnect();
  });
}
