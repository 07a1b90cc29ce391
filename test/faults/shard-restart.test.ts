// test-modes: once (4 shards whatever RINGCAST_TEST_WORKERS says)
// A shard that crashes is restarted; the records it owned are rebuilt from the survivors
// (docs/architecture.md, "Shard failure"). These tests force 4 shards whatever
// RINGCAST_TEST_WORKERS says, and turn the test hooks on (RINGCAST_TEST_HOOKS=1 before
// start): server.testCrashShard(i) makes shard i throw a real uncaught exception.
// The socket_id prefix (digits before the '.') tells which shard holds a client.

import { spawn } from 'node:child_process';
import path from 'node:path';
import t, { type Test } from 'tap';
import { ownerOf } from '../../src/channels/owner';
import { APP, RawClient, eventually, startServer, type Frame, type TestServer } from '../helpers/server';
import { settle } from '../helpers/settle';

const SHARDS = 4;
const LOG = (process.env.RINGCAST_TEST_LOG ?? 'silent') as 'silent';
const prefixOf = (socketId: string) => socketId.split('.')[0];

/** A channel name with this prefix whose owner is (own = true) or is not (own = false) `shard`. */
function channelOwned(prefix: string, shard: number, own: boolean): string {
  for (let k = 0; ; k++) {
    const name = `${prefix}-${k}`;
    if ((ownerOf(APP.id, name, SHARDS) === shard) === own) return name;
  }
}

function dataOf(f: Frame): any {
  return typeof f.data === 'string' ? JSON.parse(f.data) : f.data;
}

function memberEvents(c: RawClient, event: 'added' | 'removed', channel: string): string[] {
  return c.frames.filter((f) => f.event === `pusher_internal:member_${event}` && f.channel === channel)
    .map((f) => String(dataOf(f).user_id));
}

async function channelInfo(srv: TestServer, channel: string): Promise<any> {
  const res = await srv.sdk().get({ path: `/channels/${channel}`, params: { info: channel.startsWith('presence-') ? 'subscription_count,user_count' : 'subscription_count' } });
  return res.json();
}

async function users(srv: TestServer, channel: string): Promise<string[]> {
  const res = await srv.sdk().get({ path: `/channels/${channel}/users` });
  return ((await res.json()) as { users: { id: string }[] }).users.map((u) => String(u.id)).sort();
}

/**
 * Opens connections until `enough(byPrefix)` holds (SO_REUSEPORT spreads them by hash of the
 * client port, so which shard a connection lands on is up to the kernel), at most `max`.
 */
async function openUntil(t: Test, srv: TestServer, enough: (byPrefix: Map<string, RawClient[]>) => boolean, max = 96): Promise<RawClient[]> {
  const clients: RawClient[] = [];
  t.teardown(() => Promise.all(clients.map((c) => c.close().catch(() => undefined))));
  const byPrefix = new Map<string, RawClient[]>();
  while (!enough(byPrefix) && clients.length < max) {
    const batch = await Promise.all(Array.from({ length: 8 }, () => RawClient.connect(srv.wsUrl())));
    for (const c of batch) {
      clients.push(c);
      const p = prefixOf(c.socketId);
      byPrefix.set(p, [...(byPrefix.get(p) ?? []), c]);
    }
  }
  if (!enough(byPrefix)) throw new Error(`connections did not spread over the shards as needed: ${[...byPrefix].map(([p, l]) => `${p}:${l.length}`).join(' ')}`);
  return clients;
}

let srv: TestServer;

t.before(async () => {
  process.env.RINGCAST_TEST_HOOKS = '1';
  srv = await startServer({ workers: SHARDS, log: { level: LOG } });
});
t.teardown(() => srv?.stop());

t.test('a crashed shard is restarted, its channels rebuilt from the survivors; no other client notices', async (t) => {
  const V = 1; // the shard that crashes
  const prefixes = srv.server.testShardPrefixes!();
  t.equal(prefixes.length, SHARDS, 'one socket_id prefix per shard');
  const oldPrefix = prefixes[V];
  const clients = await openUntil(t, srv, (m) => (m.get(oldPrefix)?.length ?? 0) >= 3 &&
    [...m].filter(([p, l]) => p !== oldPrefix && l.length >= 2).length >= 2);
  const victims = clients.filter((c) => prefixOf(c.socketId) === oldPrefix);
  const survivors = clients.filter((c) => prefixOf(c.socketId) !== oldPrefix);
  t.ok(new Set(survivors.map((c) => prefixOf(c.socketId))).size >= 2, 'survivors on ≥ 2 other shards');

  const pubDead = channelOwned('pub-dead', V, true);
  const pubAlive = channelOwned('pub-alive', V, false);
  const presDead = channelOwned('presence-dead', V, true);
  const presAlive = channelOwned('presence-alive', V, false);

  // Presence users: dead-k only on the crashing shard, alive-k only elsewhere, "both" on both.
  const userOf = new Map<RawClient, string>();
  victims.forEach((c, k) => userOf.set(c, k === 0 ? 'both' : `dead-${k}`));
  survivors.forEach((c, k) => userOf.set(c, k === 0 ? 'both' : `alive-${k}`));
  const deadUsers = victims.slice(1).map((c) => userOf.get(c)!).sort();
  const liveUsers = [...new Set(survivors.map((c) => userOf.get(c)!))].sort();

  for (const c of clients) {
    for (const ch of [pubDead, pubAlive]) t.equal((await c.subscribe(ch)).event, 'pusher_internal:subscription_succeeded');
    for (const ch of [presDead, presAlive]) {
      const u = userOf.get(c)!;
      const f = await c.subscribeAuthed(ch, { user_id: u, user_info: { name: u } });
      t.equal(f.event, 'pusher_internal:subscription_succeeded', `${u} joined ${ch}`);
    }
  }
  t.same(await users(srv, presDead), [...new Set([...deadUsers, ...liveUsers])].sort(), 'before: every user listed');
  t.equal((await channelInfo(srv, pubDead)).subscription_count, clients.length, 'before: every subscription counted');
  // Every join was answered after its member_added was written: once these markers are in,
  // no member_added of the joins is still on its way.
  await settle(srv, survivors, [presDead, presAlive]);
  for (const c of survivors) c.frames.length = 0;

  const t0 = Date.now();
  const { socketIdPrefix: newPrefix } = await srv.server.testCrashShard!(V);
  t.comment(`shard ${V} crashed and was replaced in ${Date.now() - t0} ms`);
  t.not(newPrefix, oldPrefix, 'the replacement has a new socket_id prefix');
  t.equal(srv.server.testShardPrefixes!()[V], newPrefix, 'prefix of the index updated');

  for (const c of victims) {
    const code = await c.closed(5000);
    t.equal(code, 1006, `client ${c.socketId} of the crashed shard was cut (abnormal close)`);
  }
  t.ok(survivors.every((c) => c.closeCode === null), 'no client of another shard was closed');

  // Exactly one member_removed per user that lived only on the dead shard, on both the channel
  // the dead shard owned (rebuilt) and the one a survivor owns (dropShard).
  for (const ch of [presDead, presAlive]) {
    await eventually(() => survivors.every((c) => memberEvents(c, 'removed', ch).length >= deadUsers.length), 5000, `member_removed on ${ch}`);
  }
  // The survivors' rewire (dropShard) and the replacement's rebuild wrote their member
  // events before testCrashShard resolved: anything extra would be here before the markers.
  await settle(srv, survivors, [presDead, presAlive]);
  for (const ch of [presDead, presAlive]) {
    for (const c of survivors) {
      t.same(memberEvents(c, 'removed', ch).sort(), deadUsers, `${c.socketId}: one member_removed per dead-only user on ${ch}`);
      t.same(memberEvents(c, 'added', ch), [], `${c.socketId}: no member_added on ${ch}`);
    }
  }
  const unexpected = survivors.flatMap((c) => c.frames.filter((f) => !f.event.startsWith('pusher_internal:member_removed')));
  t.same(unexpected, [], 'survivors received nothing else');

  // The API reflects the surviving connections only.
  for (const ch of [pubDead, pubAlive]) {
    t.same(await channelInfo(srv, ch), { occupied: true, subscription_count: survivors.length }, `${ch}: survivors counted`);
  }
  for (const ch of [presDead, presAlive]) {
    t.same(await channelInfo(srv, ch), { occupied: true, subscription_count: survivors.length, user_count: liveUsers.length }, `${ch}: counts`);
    t.same(await users(srv, ch), liveUsers, `${ch}: users of the surviving connections`);
  }
  const list = await (await srv.sdk().get({ path: '/channels' })).json() as { channels: Record<string, unknown> };
  t.same(Object.keys(list.channels).sort(), [pubDead, pubAlive, presDead, presAlive].sort(), 'channel list');

  // Surviving clients keep receiving publishes, once each.
  for (const c of survivors) c.frames.length = 0;
  for (const ch of [pubDead, pubAlive, presDead, presAlive]) {
    const res = await srv.sdk().trigger(ch, 'after-crash', { ch });
    t.equal(res.status, 200, `publish to ${ch} after the restart`);
  }
  await eventually(() => survivors.every((c) => c.frames.filter((f) => f.event === 'after-crash').length >= 4), 5000, 'publishes after the restart');
  await settle(srv, survivors, [pubDead, pubAlive, presDead, presAlive]); // a duplicate would come before
  for (const c of survivors) t.equal(c.frames.filter((f) => f.event === 'after-crash').length, 4, `${c.socketId}: each publish once`);

  // New connections land on every shard, the replacement included, and work there.
  const fresh = await openUntil(t, srv, (m) => (m.get(newPrefix)?.length ?? 0) >= 1 && m.size >= 3);
  t.notOk(fresh.some((c) => prefixOf(c.socketId) === oldPrefix), 'no connection gets the dead shard\'s prefix');
  const onNew = fresh.find((c) => prefixOf(c.socketId) === newPrefix)!;
  for (const c of survivors) c.frames.length = 0;
  t.equal((await onNew.subscribe(pubDead)).event, 'pusher_internal:subscription_succeeded', 'subscribe on the new shard');
  const joined = await onNew.subscribeAuthed(presDead, { user_id: 'newbie', user_info: { name: 'newbie' } });
  t.equal(joined.event, 'pusher_internal:subscription_succeeded', 'presence join on the new shard');
  t.same([...dataOf(joined).presence.ids].map(String).sort(), [...liveUsers, 'newbie'].sort(), 'its snapshot: the surviving members and itself');
  await eventually(() => survivors.every((c) => memberEvents(c, 'added', presDead).length === 1), 5000, 'member_added newbie');
  t.ok(survivors.every((c) => memberEvents(c, 'added', presDead)[0] === 'newbie'), 'survivors see newbie join once');
  t.equal((await channelInfo(srv, pubDead)).subscription_count, survivors.length + 1, 'the new subscription is counted');
  const res = await srv.sdk().trigger(pubDead, 'to-all', {});
  t.equal(res.status, 200);
  await onNew.event('to-all', pubDead, 3000);
  await eventually(() => survivors.every((c) => c.frames.some((f) => f.event === 'to-all')), 3000, 'publish to everyone');
  await onNew.close();
  await eventually(() => survivors.every((c) => memberEvents(c, 'removed', presDead).includes('newbie')), 5000, 'member_removed newbie');
  t.same(await users(srv, presDead), liveUsers, 'newbie left');
});

t.test('a throw inside a uWS callback crashes and restarts a shard the same way (a second restart)', async (t) => {
  const W = 2;
  const wPrefix = srv.server.testShardPrefixes!()[W];
  const clients = await openUntil(t, srv, (m) => (m.get(wPrefix)?.length ?? 0) >= 2 &&
    [...m].filter(([p]) => p !== wPrefix).reduce((n, [, l]) => n + l.length, 0) >= 3);
  const onW = clients.filter((c) => prefixOf(c.socketId) === wPrefix);
  const others = clients.filter((c) => prefixOf(c.socketId) !== wPrefix);
  const pres = channelOwned('presence-second', W, true);
  const pub = channelOwned('pub-second', W, false);
  for (const c of clients) {
    await c.subscribe(pub);
    const u = c === onW[0] || c === others[0] ? 'split' : `u-${c.socketId}`;
    t.equal((await c.subscribeAuthed(pres, { user_id: u })).event, 'pusher_internal:subscription_succeeded');
  }
  await settle(srv, clients, pres); // no member_added of the joins still on its way
  for (const c of others) c.frames.length = 0;
  const goneUsers = onW.slice(1).map((c) => `u-${c.socketId}`).sort();

  const restarted = srv.server.testCrashShard!(W, 'ws_message');
  onW[0].send({ event: 'pusher:ping', data: {} }); // this message's callback throws
  const { socketIdPrefix } = await restarted;
  t.not(socketIdPrefix, wPrefix, 'replaced');
  for (const c of onW) t.equal(await c.closed(5000), 1006, 'client of the crashed shard cut');
  t.ok(others.every((c) => c.closeCode === null), 'others stay connected');
  await eventually(() => others.every((c) => memberEvents(c, 'removed', pres).length >= goneUsers.length), 5000, 'member_removed');
  await settle(srv, others, pres); // the restart's member events were written before it resolved
  for (const c of others) t.same(memberEvents(c, 'removed', pres).sort(), goneUsers, `${c.socketId}: one member_removed per gone user, none for "split"`);
  t.same(await channelInfo(srv, pub), { occupied: true, subscription_count: others.length }, 'public channel count');
  t.same(await channelInfo(srv, pres), { occupied: true, subscription_count: others.length, user_count: others.length }, 'presence channel counts');
});

t.test('without RINGCAST_TEST_HOOKS the crash hook does not exist', async (t) => {
  delete process.env.RINGCAST_TEST_HOOKS;
  const plain = await startServer({ workers: 1, log: { level: LOG } });
  process.env.RINGCAST_TEST_HOOKS = '1';
  t.teardown(() => plain.stop());
  t.equal(plain.server.testCrashShard, undefined, 'no testCrashShard');
  t.equal(plain.server.testShardPrefixes, undefined, 'no testShardPrefixes');
});

t.test('after a restart the process stops cleanly (no abort) — in a child process', async (t) => {
  const fixture = path.join(__dirname, 'fixtures', 'crash-and-stop.js');
  for (const workers of ['1', '2']) {
    const child = spawn(process.execPath, [fixture, workers], { env: { ...process.env, RINGCAST_TEST_HOOKS: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => { out += b; });
    child.stderr.on('data', (b: Buffer) => { err += b; });
    const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((r) => child.once('exit', (c, s) => r([c, s])));
    clearTimeout(killer);
    t.equal(signal, null, `workers ${workers}: no signal`);
    t.equal(code, 0, `workers ${workers}: exit 0${code !== 0 ? `\n${out}\n${err}` : ''}`);
    t.notMatch(err, /uv_loop_close|Assertion|Aborted/, 'no libuv abort');
    const result = JSON.parse(out.trim().split('\n').pop() ?? '{}');
    t.same(result, { closeCode: 1006, restarted: true, published: true, stopped: true }, `workers ${workers}: the fixture went through`);
  }
});
