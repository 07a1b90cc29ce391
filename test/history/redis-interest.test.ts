// history.driver redis / redis-cluster by interest (history/redis-subjects.ts), against a
// real redis-server and a real 3-master redis cluster, two ringcast nodes: a shard
// subscribes to a history channel's numbered subject only while it has a subscriber on it,
// so a node without subscribers receives none of the messages (counted by Redis itself:
// PUBSUB NUMSUB / SHARDNUMSUB); the first subscriber of a subject on a shard receives
// every message published after its subscription_succeeded, through the other node; a
// subject is let go after its last subscriber left, and held again on the next. The race
// of the first subscriber is shown with node A's link to Redis slowed (300 ms): a message
// numbered through node B right after subscription_succeeded still reaches it (without the
// wait for Redis's confirmation it would be published before A's SUBSCRIBE arrived).
// Workers 1 and 4 (RINGCAST_TEST_WORKERS).
import { Redis } from 'ioredis';
import t from 'tap';
import type { ConfigInput } from '../../src/config';
import { subjectIndexOf } from '../../src/history/redis';
import { HISTORY_SUBJECT_LINGER_MS } from '../../src/history/redis-subjects';
import { startBackend } from '../adapter/backends';
import { startNodePair } from '../helpers/cluster';
import { cutProxy } from '../helpers/cut-proxy';
import { RedisServer } from '../helpers/redis';
import { APP, RawClient, WORKERS, eventually, startServer } from '../helpers/server';

t.setTimeout(240_000);

const HISTORY = { 'room-*': { size: 50, ttl: 120 }, 'rw-*': { size: 50, ttl: 120, rewind: 5 } };

/** `n` channel names `<tag>-<i>` (`room-` unless the tag says) on distinct subjects, none of them on a subject in `avoid`. */
function freshChannels(tag: string, n: number, avoid: Set<number>): string[] {
  const out: string[] = [];
  const used = new Set(avoid);
  for (let i = 0; out.length < n; i++) {
    const c = tag.startsWith('rw-') ? `${tag}-${i}` : `room-${tag}-${i}`;
    const k = subjectIndexOf(APP.id, c);
    if (used.has(k)) continue;
    used.add(k);
    out.push(c);
  }
  return out;
}

for (const name of ['redis', 'redis-cluster'] as const) {
  t.test(`history.driver ${name} by interest: 2 nodes (${WORKERS} workers each)`, async (t) => {
    const backend = await startBackend(name);
    t.teardown(() => backend.stop());
    const cfg: ConfigInput = { ...backend.config(), history: { driver: name }, apps: [{ ...APP, channel_history: HISTORY as never }] };
    const [a, b] = await startNodePair(t, cfg);
    const db = (cfg as { database: { redis?: { port: number }; redis_cluster?: { nodes: { port: number }[] } } }).database;
    const ports = db.redis ? [db.redis.port] : db.redis_cluster!.nodes.map((n) => n.port);
    const admins = ports.map((port) => new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 1 }));
    t.teardown(() => { for (const r of admins) r.disconnect(); });

    /** Subjects of numbered messages subscribed on Redis now → subscriber connections (over every master). */
    const subscribed = async (): Promise<Map<string, number>> => {
      const out = new Map<string, number>();
      for (const r of admins) {
        const names = (await r.call('PUBSUB', name === 'redis' ? 'CHANNELS' : 'SHARDCHANNELS', '*hist:*')) as string[];
        if (names.length === 0) continue;
        const counts = (await r.call('PUBSUB', name === 'redis' ? 'NUMSUB' : 'SHARDNUMSUB', ...names)) as (string | number)[];
        for (let i = 0; i < counts.length; i += 2) out.set(String(counts[i]), (out.get(String(counts[i])) ?? 0) + Number(counts[i + 1]));
      }
      return out;
    };
    const subjectOf = (channel: string) => `:${subjectIndexOf(APP.id, channel)}`;
    const holders = async (channel: string): Promise<number> => {
      let n = 0;
      for (const [s, c] of await subscribed()) if (s.endsWith(subjectOf(channel))) n += c;
      return n;
    };

    t.same([...(await subscribed())], [], 'no subscriber anywhere: no subject subscribed on either node');

    const [room, ...fresh] = freshChannels('i', 25, new Set());
    const client = a.track(await RawClient.connect(a.wsUrl()));

    await t.test('a node without subscribers of a channel receives none of its messages', async (t) => {
      const ok = await client.subscribe(room);
      t.equal(ok.event, 'pusher_internal:subscription_succeeded');
      const subs = await subscribed();
      t.same([...subs.keys()].map((s) => s.slice(s.lastIndexOf(':'))), [subjectOf(room)], 'one subject subscribed: the channel\'s');
      t.equal(await holders(room), 1, 'by one connection: the shard of node A with the subscriber; node B and the other shards hold nothing');
      const sdk = b.sdk();
      for (let i = 1; i <= 5; i++) await sdk.trigger(room, 'msg', { i });
      for (let i = 1; i <= 5; i++) {
        const f = await client.next((x) => x.channel === room && x.event === 'msg' && JSON.parse(x.data as string).i === i, 5000);
        t.ok(f, `message ${i} published through node B reached node A's subscriber`);
      }
    });

    await t.test('the first subscriber of a subject on a shard receives what is published right after subscription_succeeded', async (t) => {
      const sdk = b.sdk();
      let got = 0;
      for (const c of fresh) {
        const ok = await client.subscribe(c);
        if (ok.event !== 'pusher_internal:subscription_succeeded') throw new Error(`subscribe ${c}: ${JSON.stringify(ok)}`);
        await sdk.trigger(c, 'first', { c });
        await client.next((x) => x.channel === c && x.event === 'first', 5000);
        got++;
      }
      t.equal(got, fresh.length, `${fresh.length} fresh subjects: each first subscriber got the message published through node B right after its subscription_succeeded`);
    });

    await t.test('a subject is let go after its last subscriber left, and held again on the next', async (t) => {
      client.send({ event: 'pusher:unsubscribe', data: { channel: room } });
      await eventually(async () => (await holders(room)) === 0, HISTORY_SUBJECT_LINGER_MS + 10_000, 'the subject unsubscribed after the linger');
      t.pass(`unsubscribed within ${HISTORY_SUBJECT_LINGER_MS} ms + a sweep of its last subscriber leaving`);
      const ok = await client.subscribe(room);
      t.equal(ok.event, 'pusher_internal:subscription_succeeded');
      t.equal(await holders(room), 1, 'subscribed again before subscription_succeeded');
      await b.sdk().trigger(room, 'msg', { i: 6 });
      const f = await client.next((x) => x.channel === room && x.event === 'msg' && JSON.parse(x.data as string).i === 6, 5000);
      t.ok(f, 'a message after the new subscription_succeeded arrives');
    });
  });
}

t.test(`history.driver redis: the first subscriber of a subject waits for Redis's confirmation (slow link; ${WORKERS} workers)`, async (t) => {
  const redis = await RedisServer.start();
  t.teardown(() => redis.stop());
  const px = await cutProxy(redis.port);
  t.teardown(() => px.close());
  const cfg = (port: number): ConfigInput => ({ history: { driver: 'redis' }, database: { redis: { host: '127.0.0.1', port } }, apps: [{ ...APP, channel_history: HISTORY as never }] });
  const a = await startServer(cfg(px.port));
  t.teardown(() => a.stop());
  const b = await startServer(cfg(redis.port));
  t.teardown(() => b.stop());
  const client = a.track(await RawClient.connect(a.wsUrl()));
  px.delay(300);
  const sdk = b.sdk();
  const channels = freshChannels('slow', 5, new Set());
  for (const c of channels) {
    const started = Date.now();
    const ok = await client.subscribe(c);
    t.equal(ok.event, 'pusher_internal:subscription_succeeded', `${c}: subscribed (after ${Date.now() - started} ms)`);
    await sdk.trigger(c, 'first', { c });
    const f = await client.next((x) => x.channel === c && x.event === 'first', 5000).catch(() => null);
    t.ok(f, `${c}: the message published through node B right after subscription_succeeded arrived`);
  }
  // a subscription with a rewind waits the same; the message published right after its
  // subscription_succeeded comes once (live)
  for (const c of freshChannels('rw-slow', 3, new Set(channels.map((x) => subjectIndexOf(APP.id, x))))) {
    const started = Date.now();
    const ok = await client.subscribe(c);
    t.equal(ok.event, 'pusher_internal:subscription_succeeded', `${c}: a rewind subscription, subscribed after ${Date.now() - started} ms`);
    await sdk.trigger(c, 'first', { c });
    await sdk.trigger(c, 'after', { c });
    await client.next((x) => x.channel === c && x.event === 'after', 5000);
    t.equal(client.frames.filter((x) => x.channel === c && x.event === 'first').length, 1, `${c}: the message published right after subscription_succeeded arrived once, before the next`);
  }
  // a subscribe waiting for its subject: an unsubscribe meanwhile cancels it, a repeated
  // subscribe meanwhile gets the first one's answer only
  const used = new Set([...channels].map((x) => subjectIndexOf(APP.id, x)));
  const [gone, twice, marker] = freshChannels('wait', 3, used);
  client.send({ event: 'pusher:subscribe', data: { channel: gone } });
  client.send({ event: 'pusher:unsubscribe', data: { channel: gone } });
  client.send({ event: 'pusher:subscribe', data: { channel: twice } });
  client.send({ event: 'pusher:subscribe', data: { channel: twice } });
  t.equal((await client.subscribe(marker)).event, 'pusher_internal:subscription_succeeded', 'a later subscribe is answered');
  await client.next((x) => x.channel === twice && x.event === 'pusher_internal:subscription_succeeded', 5000);
  await sdk.trigger([gone, twice, marker], 'after', {});
  await client.next((x) => x.channel === marker && x.event === 'after', 5000);
  await client.next((x) => x.channel === twice && x.event === 'after', 5000);
  t.notOk(client.frames.some((x) => x.channel === gone), 'the subscribe cancelled while it waited: no subscription_succeeded, no event (the positive marker: the same publish reached the other channels)');
  t.notOk(client.frames.some((x) => x.channel === twice && x.event === 'pusher_internal:subscription_succeeded'), 'the repeated subscribe got no second answer');
});
