// Rewind for stock pusher-js under a publish storm: clients subscribe while API publishes
// (landing on every shard with workers 4) race their subscribe; each must end with every
// message exactly once, in order (rewind covers the whole storm), no gap, no duplicate.
import t from 'tap';
import type PusherJS from 'pusher-js';
import { APP, eventually, sleep, startServer } from '../helpers/server';
import { connected, pusherJs } from '../helpers/pusher-js';

const TOTAL = 400;
const CLIENTS = 16;

t.test('rewind races a publish storm', async (t) => {
  const srv = await startServer({ apps: [{ ...APP, channel_history: { 'storm-*': { size: 1000, ttl: 60, rewind: 1000 } } as never }] });
  t.teardown(() => srv.stop());
  const sdk = srv.sdk();
  let published = 0;
  const storm = (async () => {
    for (let i = 1; i <= TOTAL; i++) {
      await sdk.trigger('storm-1', 'tick', { i });
      published = i;
    }
  })();
  const got: number[][] = [];
  const clients: PusherJS[] = [];
  for (let k = 0; k < CLIENTS; k++) {
    // spread over the storm: each waits until a share of it is out
    await eventually(() => published >= (k * TOTAL) / (CLIENTS + 1), 20_000, 'storm progress');
    const p = srv.track(pusherJs(srv.port));
    clients.push(p);
    await connected(p);
    const seen: number[] = [];
    got.push(seen);
    p.subscribe('storm-1').bind('tick', (d: { i: number }) => seen.push(d.i));
    await sleep(Math.floor(Math.random() * 5));
  }
  await storm;
  // the last message reached everyone (a positive marker), then compare
  await eventually(() => got.every((s) => s.includes(TOTAL)), 20_000, 'every client got the last message');
  const want = Array.from({ length: TOTAL }, (_, i) => i + 1);
  got.forEach((s, k) => t.same(s, want, `client ${k}: 1…${TOTAL} exactly once, in order`));
  for (const p of clients) p.disconnect();
});
