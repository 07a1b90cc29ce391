// Cache channels (the protocol "Channels"; spec: Channel types "Cache", States "cache
// channel", GET /channels/{name} `cache`): the last API event of a cache channel is kept
// by the channel's owner shard until its TTL ends and replayed to every new subscriber
// right after subscription_succeeded, else pusher:cache_miss. Several channels per check,
// so that with 4 shards the owners differ from the subscribers' shards.

import t, { type Test } from 'tap';
import { ownerOf } from '../../src/channels/owner';
import { signedGet, signedPost } from '../helpers/http';
import { pusherJs, connected } from '../helpers/pusher-js';
import { APP, RawClient, WORKERS, eventually, sleep, startServer, type Frame, type TestServer } from '../helpers/server';

const SUCCEEDED = 'pusher_internal:subscription_succeeded';
const MISS = 'pusher:cache_miss';

/** A raw client that also keeps every frame as the exact text received. */
interface Rec { c: RawClient; raws: string[] }

async function connect(srv: TestServer): Promise<Rec> {
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  const raws: string[] = [];
  c.ws.on('message', (m) => raws.push(m.toString()));
  return { c, raws };
}

function subscribe(r: Rec, channel: string, user = 'u1'): Promise<Frame> {
  if (channel.startsWith('presence-')) return r.c.subscribeAuthed(channel, { user_id: user });
  if (channel.startsWith('private-')) return r.c.subscribeAuthed(channel);
  return r.c.subscribe(channel);
}

/**
 * Subscribes and returns the text of the frame that came right after
 * subscription_succeeded on this connection (it must be about the same channel).
 */
async function afterSucceeded(t: Test, r: Rec, channel: string, user?: string): Promise<string> {
  const s = await subscribe(r, channel, user);
  t.equal(s.event, SUCCEEDED, `${channel}: subscribed`);
  await r.c.next((f) => f.channel === channel, 3000);
  const parsed = r.raws.map((x) => JSON.parse(x) as Frame);
  const i = parsed.findIndex((f) => f.event === SUCCEEDED && f.channel === channel);
  t.equal(parsed[i + 1]?.channel, channel, `${channel}: the next frame is about the channel`);
  return r.raws[i + 1];
}

/** A fresh connection's frame right after subscription_succeeded. */
async function newSubscriber(t: Test, srv: TestServer, channel: string, user?: string): Promise<string> {
  const r = await connect(srv);
  const text = await afterSucceeded(t, r, channel, user);
  await r.c.close();
  return text;
}

const missOf = (channel: string) => JSON.stringify({ event: MISS, channel });

let settled = 0;

/**
 * Waits until anything the owner of `channel` could still send this connection about it
 * (a replay or a cache_miss answers a question to the owner) has arrived: a presence join
 * on a channel with the same owner goes over the same rings, behind any earlier question,
 * and the sentinel subscribe after it is read in a later turn than that answer.
 */
async function ownerSettled(r: Rec, channel: string): Promise<void> {
  const owner = ownerOf(APP.id, channel, WORKERS);
  let probe = `presence-settle-${++settled}`;
  while (ownerOf(APP.id, probe, WORKERS) !== owner) probe = `presence-settle-${++settled}`;
  const f = await r.c.subscribeAuthed(probe, { user_id: 'settle' });
  if (f.event !== SUCCEEDED) throw new Error(`presence join for settling answered ${JSON.stringify(f)}`);
  r.c.send({ event: 'pusher:unsubscribe', data: { channel: probe } });
  await r.c.sync();
}

/** Through the `pusher` SDK; it refuses '#' in names, so the '#cache-<n>' forms go as a signed POST. */
async function publish(srv: TestServer, channel: string, event: string, data: unknown): Promise<void> {
  if (!channel.includes('#')) {
    await srv.sdk().trigger(channel, event, data);
    return;
  }
  const r = await signedPost(srv.port, APP, 'events', { name: event, channel, data: typeof data === 'string' ? data : JSON.stringify(data) });
  if (r.status !== 200) throw new Error(`publish to ${channel}: ${r.status} ${r.text}`);
}

/** The event frame text a live subscriber received. */
async function received(r: Rec, channel: string, event: string): Promise<string> {
  await r.c.next((f) => f.channel === channel && f.event === event, 3000);
  const hit = [...r.raws].reverse().find((x) => {
    const f = JSON.parse(x) as Frame;
    return f.channel === channel && f.event === event;
  });
  return hit!;
}

const PUBLIC = ['cache-a', 'cache-b', 'cache-c', 'cache-d', 'cache-e', 'room#cache-60'];

t.test(`cache channels with ${WORKERS} shard(s)`, async (t) => {
  const srv = await startServer();
  t.teardown(() => srv.stop());
  if (WORKERS > 1) t.ok(new Set(PUBLIC.map((c) => ownerOf(APP.id, c, WORKERS))).size > 1, 'the channels have different owners');

  t.test('nothing published: cache_miss right after subscription_succeeded, without data', async (t) => {
    for (const ch of PUBLIC) {
      const text = await newSubscriber(t, srv, ch);
      t.equal(text, missOf(ch), `${ch}: cache_miss`);
      t.notOk('data' in JSON.parse(text), 'no data field');
    }
  });

  t.test('a later subscriber gets the published event exactly as the live subscriber did; last one wins', async (t) => {
    for (const ch of PUBLIC) {
      const live = await connect(srv);
      t.equal(await afterSucceeded(t, live, ch), missOf(ch), `${ch}: live subscriber, miss first`);
      await publish(srv, ch, 'price', { n: 1, ch });
      const got = await received(live, ch, 'price');
      t.equal(await newSubscriber(t, srv, ch), got, `${ch}: replayed byte for byte`);
      await publish(srv, ch, 'price', { n: 2, ch });
      await publish(srv, ch, 'other', 'plain string');
      const last = await received(live, ch, 'other');
      t.equal(await newSubscriber(t, srv, ch), last, `${ch}: the last event wins`);
      t.same(JSON.parse(last), { event: 'other', channel: ch, data: 'plain string' });
    }
  });

  t.test('the entry outlives the subscribers; a vacated channel still replays', async (t) => {
    const ch = 'cache-gone';
    const r = await connect(srv);
    await subscribe(r, ch);
    await r.c.close();
    await publish(srv, ch, 'ev', { x: 1 });
    t.same(JSON.parse(await newSubscriber(t, srv, ch)), { event: 'ev', channel: ch, data: '{"x":1}' });
  });

  t.test('private-cache-, presence-cache- and private-encrypted-cache- (authed)', async (t) => {
    for (const ch of ['private-cache-p1', 'private-cache-p2', 'presence-cache-q1', 'presence-cache-q2', 'private-encrypted-cache-e1']) {
      const live = await connect(srv);
      t.equal(await afterSucceeded(t, live, ch, 'u1'), missOf(ch), `${ch}: miss`);
      if (ch.startsWith('private-encrypted-')) {
        // the server never reads encrypted payloads: any string stands for the ciphertext
        const r = await signedPost(srv.port, APP, 'events', { name: 'secret', channel: ch, data: '{"nonce":"bm9uY2U=","ciphertext":"Y2lwaGVy"}' });
        t.equal(r.status, 200);
      } else {
        await publish(srv, ch, 'secret', { ch });
      }
      const got = await received(live, ch, 'secret');
      t.equal(await newSubscriber(t, srv, ch, 'u2'), got, `${ch}: replayed after subscription_succeeded`);
    }
  });

  t.test('client events are not cached', async (t) => {
    const [onlyClient, apiThenClient] = ['private-cache-ce1', 'private-cache-ce2'];
    await publish(srv, apiThenClient, 'api', { from: 'api' });
    for (const ch of [onlyClient, apiThenClient]) {
      const a = await connect(srv);
      const b = await connect(srv);
      await subscribe(a, ch);
      await subscribe(b, ch);
      a.c.send({ event: 'client-typing', channel: ch, data: { from: 'client' } });
      await b.c.event('client-typing', ch);
    }
    t.equal(await newSubscriber(t, srv, onlyClient), missOf(onlyClient), 'only a client event: miss');
    t.same(JSON.parse(await newSubscriber(t, srv, apiThenClient)), { event: 'api', channel: apiThenClient, data: '{"from":"api"}' },
      'the API event, not the later client event');
  });

  t.test('#cache-1 expires after about a second', async (t) => {
    for (const ch of ['tick#cache-1', 'private-tock#cache-1']) {
      const t0 = Date.now();
      await publish(srv, ch, 'ev', { ch });
      const first = JSON.parse(await newSubscriber(t, srv, ch));
      if (Date.now() - t0 < 900) t.equal(first.event, 'ev', `${ch}: cached within its second`);
      let seenMiss = 0;
      await eventually(async () => {
        if (JSON.parse(await newSubscriber(t, srv, ch)).event !== MISS) return false;
        seenMiss = Date.now();
        return true;
      }, 5000, `${ch} to expire`);
      t.ok(seenMiss - t0 >= 1000, `${ch}: not before its TTL (${seenMiss - t0} ms)`);
    }
  });

  t.test('GET /channels/{name}?info=cache', async (t) => {
    const get = (ch: string, info: string) => signedGet(srv.port, APP, `channels/${encodeURIComponent(ch)}`, { info });
    for (const ch of ['cache-info', 'private-cache-info', 'ttl#cache-30']) {
      const none = await get(ch, 'cache');
      t.equal(none.status, 200);
      t.same(none.json, { occupied: false }, `${ch}: no entry, no cache field`);
      await publish(srv, ch, 'quote', { p: 42 });
      const r = await get(ch, 'cache,subscription_count');
      t.equal(r.status, 200);
      t.same(Object.keys(r.json).sort(), ['cache', 'occupied', 'subscription_count']);
      t.same(Object.keys(r.json.cache).sort(), ['data', 'event', 'ttl'], 'cache: data, event, ttl');
      t.equal(r.json.cache.data, '{"p":42}', 'data is the event data string');
      t.equal(r.json.cache.event, 'quote');
      t.ok(Number.isInteger(r.json.cache.ttl), 'ttl is an integer');
      const full = ch.endsWith('#cache-30') ? 30 : 3600;
      t.ok(r.json.cache.ttl <= full && r.json.cache.ttl >= full - 5, `${ch}: ttl ${r.json.cache.ttl} of ${full}`);
      if (ch === 'ttl#cache-30') {
        await sleep(1100);
        const later = await get(ch, 'cache');
        t.ok(later.json.cache.ttl < r.json.cache.ttl, `ttl decreases: ${r.json.cache.ttl} → ${later.json.cache.ttl}`);
      }
    }
    for (const ch of ['normal', 'private-normal', 'presence-normal']) {
      const bad = await get(ch, 'cache');
      t.equal(bad.status, 400, `${ch}: info=cache refused`);
      t.match(bad.json?.error ?? bad.text, /cache can only be requested for cache channels/);
    }
    const list = await signedGet(srv.port, APP, 'channels', { info: 'cache' });
    t.equal(list.status, 400, 'not on the channel list');
  });

  t.test('pusher-js: the replay reaches a handler bound on subscribe', async (t) => {
    const ch = 'cache-js';
    await publish(srv, ch, 'snapshot', { v: [1, 2, 3] });
    const client = srv.track(pusherJs(srv.port));
    await connected(client);
    const data = await new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no replay')), 3000);
      client.subscribe(ch).bind('snapshot', (d: unknown) => {
        clearTimeout(timer);
        resolve(d);
      });
    });
    t.same(data, { v: [1, 2, 3] });
  });
});

t.test(`cache.driver none: cache channels are ordinary channels (${WORKERS} shard(s))`, async (t) => {
  const srv = await startServer({ cache: { driver: 'none' } });
  t.teardown(() => srv.stop());
  for (const ch of ['cache-a', 'cache-b', 'cache-c', 'x#cache-60']) {
    const live = await connect(srv);
    t.equal((await subscribe(live, ch)).event, SUCCEEDED);
    await publish(srv, ch, 'ev', { ch });
    await live.c.event('ev', ch);
    const late = await connect(srv);
    t.equal((await subscribe(late, ch)).event, SUCCEEDED);
    await ownerSettled(late, ch);
    await ownerSettled(live, ch);
    t.same(late.c.frames.filter((f) => f.channel === ch), [], `${ch}: no replay`);
    t.same(live.c.frames.filter((f) => f.event === MISS), [], `${ch}: no cache_miss`);
    const info = await signedGet(srv.port, APP, `channels/${encodeURIComponent(ch)}`, { info: 'cache' });
    t.same(info.json, { occupied: true }, `${ch}: info=cache has nothing to show`);
  }
});
