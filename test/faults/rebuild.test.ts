// Unit tests of the shard-restart rebuild (channels/rebuild.ts, OwnerStore.dropShard/restore).

import t from 'tap';
import type { ControlMsg } from '../../src/bus/messages';
import { OwnerStore, ownerOf, type OwnerEvents } from '../../src/channels/owner';
import { PresenceShadows, RESTORE_BATCH, Rebuild, collectRestore, type LocalSocket } from '../../src/channels/rebuild';

type Ev = [string, ...unknown[]];

function store(shards = 3): { owner: OwnerStore; events: Ev[] } {
  const events: Ev[] = [];
  const on: OwnerEvents = {
    occupied: (a, c) => events.push(['occupied', c]),
    vacated: (a, c) => events.push(['vacated', c]),
    memberAdded: (a, c, id) => events.push(['added', c, id]),
    memberRemoved: (a, c, id) => events.push(['removed', c, id]),
    countChanged: () => undefined,
  };
  return { owner: new OwnerStore(shards, on), events };
}

t.test('dropShard: a dead shard\'s connections leave; member_removed only for users it alone held', async (t) => {
  const { owner, events } = store();
  owner.sub('a', 'pub', 1, 1);
  owner.sub('a', 'pub', 2, 1);
  owner.sub('a', 'only-dead', 1, 1);
  owner.join('a', 'presence-x', 1, 's1', 'dead', null, 100);
  owner.join('a', 'presence-x', 1, 's2', 'both', null, 100);
  owner.join('a', 'presence-x', 2, 's3', 'both', null, 100);
  owner.join('a', 'presence-x', 0, 's4', 'alive', null, 100);
  events.length = 0;
  owner.dropShard(1);
  t.same(events.map((e) => e.join(' ')).sort(), ['removed presence-x dead', 'vacated only-dead']);
  t.same(owner.info('a', 'pub'), { occupied: true, subscription_count: 1, user_count: null });
  t.same(owner.info('a', 'presence-x'), { occupied: true, subscription_count: 2, user_count: 2 });
  t.same(owner.users('a', 'presence-x').sort(), ['alive', 'both']);
  // later traffic of the replacement (same index) counts from zero
  owner.sub('a', 'pub', 1, 1);
  t.equal(owner.info('a', 'pub').subscription_count, 2);
});

t.test('restore: records come back without member_added or occupied', async (t) => {
  const { owner, events } = store();
  owner.restore('a', 'pub', 0, 3, null);
  owner.restore('a', 'pub', 2, 1, null);
  owner.restore('a', 'presence-y', 0, 2, [['u1', { n: 1 }, 2, ['0.1', '0.2']]]);
  owner.restore('a', 'presence-y', 2, 1, [['u1', { n: 1 }, 1, ['2.1']]]);
  t.same(events, []);
  t.same(owner.info('a', 'pub'), { occupied: true, subscription_count: 4, user_count: null });
  t.same(owner.info('a', 'presence-y'), { occupied: true, subscription_count: 3, user_count: 1 });
  t.equal(owner.leave('a', 'presence-y', '0.1'), true);
  t.equal(owner.leave('a', 'presence-y', '0.1'), false, 'a socket that already left: ignored');
  t.equal(owner.leave('a', 'presence-y', '0.9'), false, 'a socket never joined: ignored');
  t.equal(owner.leave('a', 'presence-y', '0.2'), true);
  t.same(events, [], 'u1 still has a connection on shard 2');
  owner.leave('a', 'presence-y', '2.1');
  t.same(events, [['removed', 'presence-y', 'u1'], ['vacated', 'presence-y']]);
});

t.test('PresenceShadows follow snapshots and member events while local members exist', async (t) => {
  const s = new PresenceShadows();
  t.equal(s.ids('a', 'presence-z'), null);
  s.apply('a', 'presence-z', 'added', 'ignored'); // no local member: nothing kept
  s.joined('a', 'presence-z', [['u1', null], [2, null]]);
  s.apply('a', 'presence-z', 'added', 'u3');
  s.apply('a', 'presence-z', 'removed', 2);
  t.same(s.ids('a', 'presence-z'), ['u1', 'u3']);
  s.joined('a', 'presence-z', [['u1', null], ['u3', null], ['u4', null]]);
  s.left('a', 'presence-z');
  t.same(s.ids('a', 'presence-z'), ['u1', 'u3', 'u4'], 'one local member left');
  s.left('a', 'presence-z');
  t.equal(s.ids('a', 'presence-z'), null, 'dropped with the last local member');
  t.equal(s.size, 0);
});

t.test('collectRestore: per channel owned by the dead shard, counts and members; batches end with last', async (t) => {
  const shards = 4;
  const dead = 2;
  const pick = (prefix: string, own: boolean) => {
    for (let k = 0; ; k++) if ((ownerOf('a', `${prefix}-${k}`, shards) === dead) === own) return `${prefix}-${k}`;
  };
  const pub = pick('pub', true);
  const other = pick('pub', false);
  const pres = pick('presence', true);
  const shadows = new PresenceShadows();
  shadows.joined('a', pres, [['u1', null], ['gone', null]]);
  const sub = (type: string, userId: unknown = null, joined = true) => ({ type, joined, userId, userInfo: userId ? { name: userId } : undefined });
  const socks: LocalSocket[] = [
    { id: '1.1', app: 'a', channels: new Map([[pub, sub('public')], [other, sub('public')], [pres, sub('presence', 'u1')]]) },
    { id: '1.2', app: 'a', channels: new Map([[pub, sub('public')], [pres, sub('presence', 'u1')]]) },
    { id: '1.3', app: 'a', channels: new Map([[pres, sub('presence', 'u2', false)]]) }, // join not answered: left out
  ];
  const msgs = collectRestore(socks, dead, shards, shadows);
  t.equal(msgs.length, 1);
  t.equal(msgs[0].last, true);
  const byName = new Map(msgs[0].channels.map((c) => [c.channel, c]));
  t.same([...byName.keys()].sort(), [pres, pub].sort());
  t.same(byName.get(pub), { app: 'a', channel: pub, subs: 2, members: null, shadow: null });
  t.same(byName.get(pres), { app: 'a', channel: pres, subs: 2, members: [['u1', { name: 'u1' }, 2, ['1.1', '1.2']]], shadow: ['u1', 'gone'] });
  t.same(collectRestore([], dead, shards, shadows), [{ type: 'restore', channels: [], last: true }], 'nothing held: one empty last batch');

  const many: LocalSocket[] = [];
  for (let k = 0; many.length < RESTORE_BATCH + 5; k++) {
    const ch = `c-${k}`;
    if (ownerOf('a', ch, shards) === dead) many.push({ id: `1.${k}`, app: 'a', channels: new Map([[ch, sub('public')]]) });
  }
  const batches = collectRestore(many, dead, shards, shadows);
  t.same(batches.map((b) => [b.channels.length, b.last]), [[RESTORE_BATCH, false], [5, true]]);
});

t.test('Rebuild: defers owner operations, then sends each survivor the member events its clients missed', async (t) => {
  const { owner, events } = store();
  const sent: [number, ControlMsg][] = [];
  const replayed: ControlMsg[] = [];
  let done = 0;
  const r = new Rebuild([0, 2], owner, (shard, msg) => sent.push([shard, msg]), (msg) => replayed.push(msg), () => done++, 10_000);
  const join: ControlMsg = { type: 'presence_join', req: 1, from: 0, app: 'a', channel: 'presence-p', socketId: 'x', userId: 'late', userInfo: null };
  t.equal(r.done, false);
  r.defer(join, 0);
  r.restore({ type: 'restore', last: true, channels: [
    { app: 'a', channel: 'presence-p', subs: 1, members: [['both', null, 1, ['0.1']]], shadow: ['both', 'dead'] },
  ] }, 0);
  t.equal(r.done, false, 'shard 2 has not answered yet');
  r.restore({ type: 'restore', last: false, channels: [
    { app: 'a', channel: 'presence-p', subs: 1, members: [['alive', { a: 1 }, 1, ['2.1']]], shadow: ['both', 'dead'] }, // 'alive' lost its event
  ] }, 2);
  r.restore({ type: 'restore', last: true, channels: [{ app: 'a', channel: 'pub', subs: 4, members: null, shadow: null }] }, 2);
  t.equal(r.done, true);
  t.equal(done, 1);
  t.same(events, [], 'restoring emits nothing through the owner');
  const bySent = sent.map(([s, m]) => m.type === 'member' ? [s, m.op, m.userId] : [s, m.type]).sort();
  t.same(bySent, [[0, 'added', 'alive'], [0, 'removed', 'dead'], [2, 'added', 'alive'], [2, 'removed', 'dead']].sort());
  t.same(replayed, [join], 'deferred operation replayed after the rebuild');
  t.same(owner.info('a', 'pub'), { occupied: true, subscription_count: 4, user_count: null });
  t.same(owner.users('a', 'presence-p').sort(), ['alive', 'both']);
});

t.test('Rebuild: a survivor that dies meanwhile or never answers does not hold it up', async (t) => {
  const { owner } = store();
  let done = 0;
  const r = new Rebuild([0, 1], owner, () => undefined, () => undefined, () => done++, 50);
  r.restore({ type: 'restore', last: true, channels: [] }, 0);
  r.peerGone(1);
  await new Promise((res) => setTimeout(res, 0));
  t.equal(done, 1, 'finished once shard 1 was known gone');
  const slow = new Rebuild([0], owner, () => undefined, () => undefined, () => done++, 50);
  // Timers fire in expiry order: the rebuild's 50 ms timeout, set first, runs before this one.
  await new Promise((res) => setTimeout(res, 120));
  t.equal(slow.done, true);
  t.equal(slow.stats.timedOut, true);
  t.equal(done, 2);
  const none = new Rebuild([], owner, () => undefined, () => undefined, () => done++, 50);
  await Promise.resolve();
  t.equal(none.done, true, 'no survivors (workers: 1): done at once');
});
