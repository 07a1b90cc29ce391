// test-modes: once (4 shards whatever RINGCAST_TEST_WORKERS says)
// Exactly once per transition per process, with 4 shards whatever RINGCAST_TEST_WORKERS
// says: presence joins on different shards, a user with two tabs on two shards, and a
// shard crash (test hook, RINGCAST_TEST_HOOKS=1) with the crash rule of webhooks/ledger.ts.
//
// Markers instead of sleeps: with concurrency 1 the primary sends one request at a time,
// in the order it accepted the events, and each owner's reports reach the primary in
// order. So after an action, a subscription to a fresh channel owned by shard W, made
// from a client on the shard that did the action, gives a channel_occupied that arrives
// after every webhook shard W decided before it.

import t, { type Test } from 'tap';
import { ownerOf } from '../../src/channels/owner';
import { APP, RawClient, startServer, type TestServer } from '../helpers/server';
import { startReceiver, type Receiver } from './receiver';

const SHARDS = 4;
const prefixOf = (c: RawClient) => c.socketId.split('.')[0];
let seq = 0;

function owned(prefix: string, shard: number, own = true): string {
  for (let k = 0; ; k++) {
    const name = `${prefix}-${k}`;
    if ((ownerOf(APP.id, name, SHARDS) === shard) === own) return name;
  }
}

let srv: TestServer;
let r: Receiver;

t.before(async () => {
  process.env.RINGCAST_TEST_HOOKS = '1';
  r = await startReceiver();
  srv = await startServer({
    workers: SHARDS,
    webhooks: { concurrency: 1 },
    apps: [{ ...APP, webhooks: [{ url: r.url, event_types: ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed'] }] }],
  });
});
t.teardown(async () => {
  await srv?.stop();
  await r?.close();
});

/** Connections until each wanted count of distinct shards is reached (the kernel spreads them). */
async function openOnShards(t: Test, n: number, perShard: number): Promise<Map<string, RawClient[]>> {
  const by = new Map<string, RawClient[]>();
  const all: RawClient[] = [];
  t.teardown(() => Promise.all(all.map((c) => c.close().catch(() => undefined))));
  const enough = () => [...by.values()].filter((l) => l.length >= perShard).length >= n;
  while (!enough() && all.length < 96) {
    const batch = await Promise.all(Array.from({ length: 8 }, () => RawClient.connect(srv.wsUrl())));
    for (const c of batch) {
      all.push(c);
      by.set(prefixOf(c), [...(by.get(prefixOf(c)) ?? []), c]);
    }
  }
  if (!enough()) throw new Error('connections did not spread over enough shards');
  return new Map([...by].filter(([, l]) => l.length >= perShard));
}

const count = (name: string, channel: string, user?: unknown) =>
  r.events().filter((e) => e.name === name && e.channel === channel && (user === undefined || e.user_id === user)).length;

/** Waits for the occupied webhook of a fresh channel owned by `shard`, subscribed by `via`. */
async function marker(via: RawClient, shard: number): Promise<void> {
  const ch = owned(`marker-${++seq}`, shard);
  await via.subscribe(ch);
  await r.until(() => count('channel_occupied', ch) === 1, 15_000, `marker ${ch}`);
}

/** Markers on every shard's owned channels, from `via`: every webhook decided before is in. */
async function markAll(via: RawClient): Promise<void> {
  for (let s = 0; s < SHARDS; s++) await marker(via, s);
}

t.test('presence on several shards, a user with two tabs on two shards: each transition once', async (t) => {
  const by = await openOnShards(t, 3, 2);
  const [s1, s2, s3] = [...by.values()];
  const ch = 'presence-multi';
  const tab1 = s1[0];
  const tab2 = s2[0];
  const other = s3[0];
  for (const c of [tab1, tab2]) t.equal((await c.subscribeAuthed(ch, { user_id: 'multi' })).event, 'pusher_internal:subscription_succeeded');
  t.equal((await other.subscribeAuthed(ch, { user_id: 'solo' })).event, 'pusher_internal:subscription_succeeded');
  await r.until(() => count('member_added', ch, 'solo') === 1 && count('member_added', ch, 'multi') === 1, 15_000, 'member_added');
  for (const via of [tab1, tab2, other]) await markAll(via);
  t.equal(count('channel_occupied', ch), 1, 'one channel_occupied');
  t.equal(count('member_added', ch, 'multi'), 1, 'one member_added for the user with two tabs');
  t.equal(count('member_added', ch, 'solo'), 1);

  await tab1.close();
  await markAll(s1[1]); // after the leave of tab 1 (same shard, same ring to the owner)
  t.equal(count('member_removed', ch, 'multi'), 0, 'closing one tab: no member_removed');
  await tab2.close();
  await r.until(() => count('member_removed', ch, 'multi') === 1, 15_000, 'member_removed multi');
  await other.close();
  await r.until(() => count('channel_vacated', ch) === 1, 15_000, 'vacated');
  for (const via of [s1[1], s2[1], s3[1]]) await markAll(via);
  t.equal(count('member_removed', ch, 'multi'), 1, 'one member_removed when the last tab closed');
  t.equal(count('member_removed', ch, 'solo'), 1);
  t.equal(count('channel_vacated', ch), 1, 'one channel_vacated');
  t.equal(count('channel_occupied', ch), 1, 'still one channel_occupied');
});

t.test('public channel subscribed on every shard: one occupied, one vacated', async (t) => {
  const by = await openOnShards(t, SHARDS, 1);
  const clients = [...by.values()].map((l) => l[0]);
  const ch = 'everywhere';
  for (const c of clients) await c.subscribe(ch);
  await r.until(() => count('channel_occupied', ch) === 1, 15_000);
  for (const c of clients.slice(0, -1)) c.send({ event: 'pusher:unsubscribe', data: { channel: ch } });
  for (const c of clients) await c.sync();
  for (const c of clients) await markAll(c);
  t.equal(count('channel_vacated', ch), 0, 'not vacated while one subscriber is left');
  clients[clients.length - 1].send({ event: 'pusher:unsubscribe', data: { channel: ch } });
  await r.until(() => count('channel_vacated', ch) === 1, 15_000);
  for (const c of clients) await markAll(c);
  t.equal(count('channel_occupied', ch), 1);
  t.equal(count('channel_vacated', ch), 1);
});

t.test('a shard crash: transitions of the channels it held are decided once, none lost, none repeated', async (t) => {
  const V = 2;
  const oldPrefix = srv.server.testShardPrefixes!()[V];
  const by = await openOnShards(t, SHARDS, 2);
  const victims = by.get(oldPrefix)!;
  const survivors = [...by].filter(([p]) => p !== oldPrefix).map(([, l]) => l[0]);
  const helpers = [...by].filter(([p]) => p !== oldPrefix).map(([, l]) => l[1]);
  t.ok(victims.length >= 2 && survivors.length >= 2, 'clients on the victim and on ≥ 2 other shards');

  const deadOnly = owned('dead-only', V); // owned by V, subscribers only on V → vacated once (the sync)
  const deadMixed = owned('dead-mixed', V); // owned by V, subscribers on V and elsewhere → nothing
  const aliveOnly = owned('alive-only', V, false); // owned elsewhere, subscribers only on V → vacated once (dropShard)
  const pres = owned('presence-dead', V); // owned by V
  for (const c of victims) {
    for (const ch of [deadOnly, deadMixed, aliveOnly]) await c.subscribe(ch);
  }
  for (const c of survivors) await c.subscribe(deadMixed);
  await victims[0].subscribeAuthed(pres, { user_id: 'gone' });
  await victims[1].subscribeAuthed(pres, { user_id: 'both' });
  await survivors[0].subscribeAuthed(pres, { user_id: 'both' });
  await survivors[1].subscribeAuthed(pres, { user_id: 'stays' });
  await r.until(() => ['gone', 'both', 'stays'].every((u) => count('member_added', pres, u) === 1), 15_000, 'members');
  for (const c of [...survivors, ...victims]) await markAll(c);
  for (const ch of [deadOnly, deadMixed, aliveOnly, pres]) t.equal(count('channel_occupied', ch), 1, `before: ${ch} occupied once`);

  await srv.server.testCrashShard!(V);
  for (const c of victims) await c.closed(5000);
  // the replacement's sync and the survivors' dropShard were written before testCrashShard
  // resolved; markers on every owner (V is the replacement) come after them
  for (const c of survivors) await markAll(c);
  t.equal(count('channel_vacated', deadOnly), 1, `${deadOnly} (owned by the crashed shard, only its clients): vacated once`);
  t.equal(count('channel_vacated', aliveOnly), 1, `${aliveOnly} (owned by a survivor, only the crashed shard's clients): vacated once`);
  t.equal(count('channel_vacated', deadMixed), 0, `${deadMixed} (subscribers left elsewhere): not vacated`);
  t.equal(count('member_removed', pres, 'gone'), 1, 'the member only on the crashed shard: removed once');
  t.equal(count('member_removed', pres, 'both'), 0, 'a member with a tab left elsewhere: not removed');
  t.equal(count('member_removed', pres, 'stays'), 0);
  for (const ch of [deadOnly, deadMixed, aliveOnly, pres]) t.equal(count('channel_occupied', ch), 1, `${ch}: no second channel_occupied`);
  for (const u of ['gone', 'both', 'stays']) t.equal(count('member_added', pres, u), 1, `${u}: no second member_added`);

  // afterwards the rebuilt records go on deciding normally, still once
  for (const c of survivors) c.send({ event: 'pusher:unsubscribe', data: { channel: deadMixed } });
  await survivors[0].close();
  await r.until(() => count('channel_vacated', deadMixed) === 1 && count('member_removed', pres, 'both') === 1, 15_000, 'after the rebuild');
  await survivors[1].close();
  await r.until(() => count('channel_vacated', pres) === 1, 15_000, 'presence vacated');
  for (const c of helpers) await markAll(c);
  t.equal(count('channel_vacated', deadMixed), 1);
  t.equal(count('member_removed', pres, 'both'), 1);
  t.equal(count('member_removed', pres, 'stays'), 1);
  t.equal(count('channel_vacated', pres), 1);
  t.equal(count('member_removed', pres, 'gone'), 1, 'still one member_removed for the gone user');
});
