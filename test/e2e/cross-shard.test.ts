// test-modes: once (4 shards whatever RINGCAST_TEST_WORKERS says)
// Cross-shard behaviour: these tests force several shards (4, and 2 for the presence
// scenario) whatever RINGCAST_TEST_WORKERS says. Many connections are opened so that
// SO_REUSEPORT spreads them over the shards; the socket_id prefix (digits before the
// '.') is unique per shard, so each test asserts it really saw ≥ 2 shards.

import http from 'node:http';
import Pusher from 'pusher';
import t, { type Test } from 'tap';
import WebSocket from 'ws';
import { ownerOf } from '../../src/channels/owner';
import { APP, RawClient, eventually, startServer, type Frame, type TestServer } from '../helpers/server';
import { settle } from '../helpers/settle';


const CLIENTS = 16;
const SHARDS = 4;
/** A second app whose connection limit is checked across shards. */
const LIMITED = { id: 'limited-id', key: 'limited-key', secret: 'limited-secret' } as const;
const LIMIT = 8;

const prefixOf = (socketId: string) => socketId.split('.')[0];

function shardsSeen(clients: RawClient[]): Set<string> {
  return new Set(clients.filter((c) => c.socketId !== '').map((c) => prefixOf(c.socketId)));
}

function assertCrossShard(t: Test, clients: RawClient[]): void {
  const seen = shardsSeen(clients);
  t.ok(seen.size >= 2, `connections landed on ${seen.size} shards (need ≥ 2 to cross shards)`);
}

/** Connects and keeps the first frame (connection_established or a refusal). */
async function connectFirst(url: string): Promise<{ client: RawClient; first: Frame }> {
  const client = new RawClient(new WebSocket(url));
  const first = await client.next(() => true, 5000);
  if (first.event === 'pusher:connection_established') client.socketId = parse(first.data).socket_id;
  return { client, first };
}

/** Opens n connections in parallel; they are closed when the subtest ends. */
async function openClients(t: Test, srv: TestServer, n = CLIENTS, key: string = APP.key): Promise<RawClient[]> {
  const clients = await Promise.all(Array.from({ length: n }, () => RawClient.connect(srv.wsUrl(key))));
  t.teardown(() => Promise.all(clients.map((c) => c.close().catch(() => undefined))));
  return clients;
}

function parse(data: unknown): any {
  return typeof data === 'string' ? JSON.parse(data) : data;
}

function framesOf(c: RawClient, event: string, channel?: string): Frame[] {
  return c.frames.filter((f) => f.event === event && (channel === undefined || f.channel === channel));
}

async function channelInfo(srv: TestServer, channel: string, info?: string): Promise<any> {
  const res = await srv.sdk().get({ path: `/channels/${channel}`, params: info ? { info } : {} });
  return res.json();
}

async function channelList(srv: TestServer, params: Record<string, string>): Promise<Record<string, any>> {
  const res = await srv.sdk().get({ path: '/channels', params });
  return ((await res.json()) as { channels: Record<string, any> }).channels;
}

let srv: TestServer;

t.before(async () => {
  srv = await startServer({
    workers: SHARDS,
    apps: [{ ...APP }, { ...LIMITED, max_connections: LIMIT }],
  });
});
t.teardown(() => srv?.stop());

t.test('an SDK publish reaches every subscriber on every shard exactly once, in publish order', async (t) => {
  const clients = await openClients(t, srv);
  assertCrossShard(t, clients);
  const channel = 'order-channel';
  for (const c of clients) t.equal((await c.subscribe(channel)).event, 'pusher_internal:subscription_succeeded');

  // One SDK client on one keep-alive HTTP connection, each trigger awaited before the next.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  const sdk = new Pusher({
    appId: APP.id, key: APP.key, secret: APP.secret,
    host: '127.0.0.1', port: String(srv.port), useTLS: false, agent,
  });
  const COUNT = 200;
  for (let i = 0; i < COUNT; i++) {
    const res = await sdk.trigger(channel, 'numbered', { i });
    if (res.status !== 200) t.fail(`trigger ${i} answered ${res.status}`);
  }
  await eventually(() => clients.every((c) => framesOf(c, 'numbered', channel).length >= COUNT), 10_000,
    'every subscriber to receive 200 events');
  await settle(srv, clients, channel); // a duplicate would come before the marker
  const expected = Array.from({ length: COUNT }, (_, i) => i);
  for (const c of clients) {
    const got = framesOf(c, 'numbered', channel).map((f) => parse(f.data).i as number);
    t.same(got, expected, `socket ${c.socketId} saw 0..199 once each, in order`);
  }
});

t.test('publishes answered by different shards (a new HTTP connection each) keep their order', async (t) => {
  const clients = await openClients(t, srv);
  assertCrossShard(t, clients);
  const channel = 'causal-order-channel';
  for (const c of clients) await c.subscribe(channel);
  // srv.sdk() does not keep connections alive: the kernel hands each request to any
  // shard, so consecutive events come to a subscriber's shard over different rings.
  const sdk = srv.sdk();
  const COUNT = 200;
  for (let i = 0; i < COUNT; i++) await sdk.trigger(channel, 'numbered', { i });
  await eventually(() => clients.every((c) => framesOf(c, 'numbered', channel).length >= COUNT), 10_000,
    'every subscriber to receive 200 events');
  await settle(srv, clients, channel);
  const expected = Array.from({ length: COUNT }, (_, i) => i);
  for (const c of clients) {
    t.same(framesOf(c, 'numbered', channel).map((f) => parse(f.data).i as number), expected,
      `socket ${c.socketId} saw 0..199 once each, in order`);
  }
});

/**
 * Presence members joining from different shards. Each user has two connections,
 * on two different shards where the spread allows it.
 */
async function presenceAcrossShards(t: Test, srv: TestServer, channel: string): Promise<void> {
  const clients = await openClients(t, srv);
  assertCrossShard(t, clients);
  const USERS = CLIENTS / 2;
  const remaining = [...clients];
  const pairs: [RawClient, RawClient][] = [];
  while (remaining.length > 0) {
    const a = remaining.shift()!;
    const other = remaining.findIndex((c) => prefixOf(c.socketId) !== prefixOf(a.socketId));
    pairs.push([a, remaining.splice(other >= 0 ? other : 0, 1)[0]]);
  }
  const splitUsers = pairs.filter(([a, b]) => prefixOf(a.socketId) !== prefixOf(b.socketId)).length;
  t.ok(splitUsers >= 1, `${splitUsers} users have their two connections on different shards`);
  const firsts = pairs.map((p) => p[0]);
  const seconds = pairs.map((p) => p[1]);
  const uid = (k: number) => `user-${k}`;
  const info = (k: number) => ({ name: `User ${k}` });

  // Joins one at a time: every snapshot holds everyone who joined before, and the joiner.
  const order = [...firsts, ...seconds];
  for (let j = 0; j < order.length; j++) {
    const k = j % USERS;
    const res = await order[j].subscribeAuthed(channel, { user_id: uid(k), user_info: info(k) });
    t.equal(res.event, 'pusher_internal:subscription_succeeded', `join ${j} succeeded`);
    const p = parse(res.data).presence;
    const expectIds = Array.from({ length: Math.min(j + 1, USERS) }, (_, i) => uid(i));
    if (!t.same([...p.ids].sort(), [...expectIds].sort(), `snapshot at join ${j} lists every member`)) continue;
    t.equal(p.count, expectIds.length);
    for (const id of expectIds) t.same(p.hash[id], info(Number(id.slice(5))));
  }

  // member_added: exactly once per user that first joined after this connection did;
  // never for a second connection of a known user, never for oneself.
  const addedExpect = (j: number) => (j < USERS ? Array.from({ length: USERS - 1 - j }, (_, i) => uid(j + 1 + i)) : []);
  await eventually(() => order.every((c, j) => framesOf(c, 'pusher_internal:member_added', channel).length >= addedExpect(j).length),
    5000, 'member_added events');
  // The owner writes a join's member events before its answer, and every join was answered.
  await settle(srv, order, channel);
  order.forEach((c, j) => {
    const added = framesOf(c, 'pusher_internal:member_added', channel).map((f) => parse(f.data));
    t.same(added.map((a) => a.user_id), addedExpect(j), `member_added seen by join ${j}`);
    for (const a of added) t.same(a.user_info, info(Number(String(a.user_id).slice(5))));
  });

  const users = await (await srv.sdk().get({ path: `/channels/${channel}/users` })).json() as { users: { id: string }[] };
  t.same(users.users.map((u) => u.id).sort(), Array.from({ length: USERS }, (_, k) => uid(k)).sort(), 'users endpoint lists everyone');
  t.same(await channelInfo(srv, channel, 'user_count,subscription_count'),
    { occupied: true, user_count: USERS, subscription_count: CLIENTS });

  // First connections leave: every user still has a connection, so no member_removed.
  // Once the owner counts the leaves, any member event of them has been written.
  await Promise.all(firsts.map((c) => c.close()));
  await eventually(async () => (await channelInfo(srv, channel, 'subscription_count')).subscription_count === USERS,
    3000, 'subscription_count to drop to the remaining connections');
  await settle(srv, seconds, channel);
  t.same(seconds.flatMap((c) => framesOf(c, 'pusher_internal:member_removed', channel)), [],
    'no member_removed while each user has another connection');

  // Last connections leave one by one (each on whatever shard it landed on).
  for (let k = 0; k < USERS; k++) {
    await seconds[k].close();
    const stay = seconds.slice(k + 1);
    await eventually(() => stay.every((c) => framesOf(c, 'pusher_internal:member_removed', channel)
      .some((f) => parse(f.data).user_id === uid(k))), 3000, `member_removed of ${uid(k)}`);
    // Before the next leave: a second member_removed of this one would be here now.
    await settle(srv, stay, channel);
  }
  seconds.forEach((c, j) => {
    const removed = framesOf(c, 'pusher_internal:member_removed', channel).map((f) => parse(f.data).user_id);
    t.same(removed, Array.from({ length: j }, (_, k) => uid(k)), `member_removed seen by ${uid(j)}: each departed user once`);
  });
  await eventually(async () => (await channelInfo(srv, channel, 'user_count')).occupied === false, 3000, 'channel to be vacated');
  t.same(await channelInfo(srv, channel, 'user_count,subscription_count'), { occupied: false, subscription_count: 0, user_count: 0 });
}

t.test('presence members joining and leaving from different shards (4 shards)', (t) =>
  presenceAcrossShards(t, srv, 'presence-cross-4'));

t.test('presence members joining and leaving from different shards (2 shards)', async (t) => {
  const two = await startServer({ workers: 2 });
  t.teardown(() => two.stop());
  await presenceAcrossShards(t, two, 'presence-cross-2');
});

t.test('subscription_count adds up subscribers on every shard and returns to 0', async (t) => {
  const clients = await openClients(t, srv);
  assertCrossShard(t, clients);
  const channel = 'count-channel';
  t.same(await channelInfo(srv, channel, 'subscription_count'), { occupied: false, subscription_count: 0 });
  for (const c of clients) await c.subscribe(channel);
  const count = async () => (await channelInfo(srv, channel, 'subscription_count')).subscription_count as number;
  await eventually(async () => (await count()) === CLIENTS, 3000, `subscription_count ${CLIENTS}`);
  t.same(await channelInfo(srv, channel, 'subscription_count'), { occupied: true, subscription_count: CLIENTS });

  // A repeated subscribe is not a second subscription. Whatever its handler told the owner
  // was written before the answer, so before the owner is asked.
  await clients[0].subscribe(channel);
  t.equal(await count(), CLIENTS, 'a repeated subscribe does not count twice');

  // Half unsubscribe, the rest disconnect.
  const half = clients.slice(0, CLIENTS / 2);
  for (const c of half) c.send({ event: 'pusher:unsubscribe', data: { channel } });
  await eventually(async () => (await count()) === CLIENTS / 2, 3000, `subscription_count ${CLIENTS / 2}`);
  await Promise.all(clients.slice(CLIENTS / 2).map((c) => c.close()));
  await eventually(async () => (await count()) === 0, 3000, 'subscription_count 0');
  t.same(await channelInfo(srv, channel, 'subscription_count'), { occupied: false, subscription_count: 0 });
});

t.test('GET /channels lists channels owned by different shards', async (t) => {
  const clients = await openClients(t, srv);
  assertCrossShard(t, clients);
  const names = Array.from({ length: 20 }, (_, i) => `list-${i}`);
  const owners = new Set(names.map((n) => ownerOf(APP.id, n, SHARDS)));
  t.ok(owners.size >= 2, `the 20 channels are owned by ${owners.size} shards`);
  for (let i = 0; i < names.length; i++) {
    // Two subscribers per channel, on (usually) different connections and shards.
    await clients[i % CLIENTS].subscribe(names[i]);
    await clients[(i + 7) % CLIENTS].subscribe(names[i]);
  }
  const presence = ['presence-list-a', 'presence-list-b'];
  for (let i = 0; i < presence.length; i++) {
    for (let u = 0; u < 3 + i; u++) await clients[u * 3 + i].subscribeAuthed(presence[i], { user_id: `u${u}` });
  }
  await eventually(async () => Object.keys(await channelList(srv, { filter_by_prefix: 'list-' })).length === 20, 3000, '20 channels listed');
  t.same(await channelList(srv, { filter_by_prefix: 'list-' }), Object.fromEntries(names.map((n) => [n, {}])));
  const all = await channelList(srv, {});
  for (const n of [...names, ...presence]) t.ok(n in all, `${n} in the unfiltered list`);
  t.same(await channelList(srv, { filter_by_prefix: 'presence-list-', info: 'user_count' }),
    { 'presence-list-a': { user_count: 3 }, 'presence-list-b': { user_count: 4 } });

  await Promise.all(clients.map((c) => c.close()));
  await eventually(async () => Object.keys(await channelList(srv, { filter_by_prefix: 'list-' })).length === 0, 3000, 'empty list');
  t.same(await channelList(srv, { filter_by_prefix: 'presence-list-' }), {});
});

t.test('client events cross shards and are not echoed to the sender', async (t) => {
  const clients = await openClients(t, srv);
  assertCrossShard(t, clients);
  const channel = 'private-chat-cross';
  for (const c of clients) t.equal((await c.subscribeAuthed(channel)).event, 'pusher_internal:subscription_succeeded');
  // One sender per shard seen, plus a few more.
  const senders = [...new Map(clients.map((c) => [prefixOf(c.socketId), c])).values()];
  for (const c of clients) if (senders.length < 6 && !senders.includes(c)) senders.push(c);
  for (const s of senders) s.send({ event: 'client-hello', channel, data: { from: s.socketId } });
  const expectFor = (c: RawClient) => senders.filter((s) => s !== c).map((s) => s.socketId).sort();
  await eventually(() => clients.every((c) => framesOf(c, 'client-hello', channel).length >= expectFor(c).length), 3000, 'client events');
  await settle(srv, clients, channel); // every event was written before a peer got it
  for (const c of clients) {
    const got = framesOf(c, 'client-hello', channel).map((f) => parse(f.data).from as string).sort();
    t.same(got, expectFor(c), `${c.socketId} got each other sender's event once and not its own`);
    t.same(framesOf(c, 'pusher:error'), [], 'no refusals');
  }

  // On a presence channel the server adds the sender's user_id.
  const pchan = 'presence-chat-cross';
  for (let i = 0; i < clients.length; i++) await clients[i].subscribeAuthed(pchan, { user_id: `p${i}` });
  const sender = clients.find((c) => prefixOf(c.socketId) !== prefixOf(clients[0].socketId)) ?? clients[1];
  sender.send({ event: 'client-typing', channel: pchan, data: { typing: true } });
  const others = clients.filter((c) => c !== sender);
  await eventually(() => others.every((c) => framesOf(c, 'client-typing', pchan).length === 1), 3000, 'presence client event');
  await settle(srv, clients, pchan);
  const senderIdx = clients.indexOf(sender);
  for (const c of others) {
    const [f] = framesOf(c, 'client-typing', pchan);
    t.same({ data: parse(f.data), user_id: f.user_id }, { data: { typing: true }, user_id: `p${senderIdx}` });
  }
  t.same(framesOf(sender, 'client-typing'), [], 'the sender does not get its own event');
});

t.test('socket_id exclusion works whichever shard serves the HTTP request', async (t) => {
  const clients = await openClients(t, srv);
  assertCrossShard(t, clients);
  const channel = 'exclude-channel';
  for (const c of clients) await c.subscribe(channel);
  // One trigger per subscriber, each excluding that subscriber. srv.sdk() opens a new
  // HTTP connection per request, so the kernel spreads the requests over the shards too:
  // most of them are served by a shard other than the excluded socket's.
  const sdk = srv.sdk();
  for (const c of clients) {
    const res = await sdk.trigger(channel, 'excluded', { not: c.socketId }, { socket_id: c.socketId });
    t.equal(res.status, 200);
  }
  await eventually(() => clients.every((c) => framesOf(c, 'excluded', channel).length >= CLIENTS - 1), 5000, 'events');
  await settle(srv, clients, channel);
  for (const c of clients) {
    const got = framesOf(c, 'excluded', channel).map((f) => parse(f.data).not as string).sort();
    t.same(got, clients.filter((o) => o !== c).map((o) => o.socketId).sort(), `${c.socketId} got every event except its own exclusion`);
  }
});

t.test('max_connections is counted across shards', async (t) => {
  // One after the other: the first LIMIT connections are then the ones accepted, each on the
  // shard SO_REUSEPORT picks (all on one shard: 4 × 4^-8). Opened all at once, the accepted
  // ones were those of whichever shard ran first, sometimes all of one shard.
  const conns: { client: RawClient; first: Frame }[] = [];
  for (let i = 0; i < CLIENTS; i++) conns.push(await connectFirst(srv.wsUrl(LIMITED.key)));
  const all = conns.map((c) => c.client);
  t.teardown(() => Promise.all(all.map((c) => c.close().catch(() => undefined))));
  const accepted = conns.filter((c) => c.first.event === 'pusher:connection_established').map((c) => c.client);
  const refused = conns.filter((c) => c.first.event !== 'pusher:connection_established');
  t.equal(accepted.length, LIMIT, `exactly ${LIMIT} of ${CLIENTS} connections accepted`);
  assertCrossShard(t, accepted);
  for (const { client, first } of refused) {
    t.same({ event: first.event, code: parse(first.data)?.code }, { event: 'pusher:error', code: 4004 }, 'refusal is pusher:error 4004');
    t.equal(await client.closed(), 4004, 'then close 4004');
  }
  // The other app is not limited by this one's count.
  const other = await RawClient.connect(srv.wsUrl());
  t.teardown(() => other.close().catch(() => undefined));
  t.not(other.socketId, '', 'another app still accepts connections');

  // Two slots freed (on whichever shards): exactly two more fit.
  await Promise.all(accepted.slice(0, 2).map((c) => c.close()));
  const more: RawClient[] = [];
  t.teardown(() => Promise.all(more.map((c) => c.close().catch(() => undefined))));
  await eventually(async () => {
    const { client } = await connectFirst(srv.wsUrl(LIMITED.key));
    more.push(client);
    return more.filter((m) => m.socketId !== '').length === 2;
  }, 3000, 'freed slots to be reused');
  const extra = await connectFirst(srv.wsUrl(LIMITED.key));
  more.push(extra.client);
  t.equal(parse(extra.first.data)?.code, 4004, 'the limit holds again once the freed slots are taken');
  t.equal(await extra.client.closed(), 4004);
});
