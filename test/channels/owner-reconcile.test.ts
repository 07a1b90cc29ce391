// OwnerStore.reconcile and the shard-side reports (channels/reconcile.ts): what a shard's
// report corrects in the owner's records, with which transitions.

import t from 'tap';
import type { ReconcileChannel } from '../../src/bus/messages';
import { OwnerStore, ownerOf, type OwnerEvents } from '../../src/channels/owner';
import { PresenceShadows } from '../../src/channels/rebuild';
import { MemberTally, reconcileReports } from '../../src/channels/reconcile';

type Ev = string;

function store(shards = 3): { owner: OwnerStore; events: Ev[] } {
  const events: Ev[] = [];
  const on: OwnerEvents = {
    occupied: (a, c) => events.push(`occupied ${c}`),
    vacated: (a, c) => events.push(`vacated ${c}`),
    memberAdded: (a, c, id, info, except) => events.push(`added ${c} ${String(id)}${except ? ` except ${except}` : ''}`),
    memberRemoved: (a, c, id) => events.push(`removed ${c} ${String(id)}`),
    countChanged: () => undefined,
  };
  return { owner: new OwnerStore(shards, on), events };
}

const plain = (channel: string, subs: number): ReconcileChannel => ({ app: 'a', channel, subs, members: null, shadow: null, pending: null });
const presence = (channel: string, members: [string, string[]][], pending: string[] = []): ReconcileChannel => ({
  app: 'a', channel, subs: members.reduce((n, [, s]) => n + s.length, 0),
  members: members.map(([id, socks]) => [id, null, socks.length, socks]), shadow: null, pending,
});

t.test('a report that matches the records changes nothing', async (t) => {
  const { owner, events } = store();
  owner.sub('a', 'pub', 1, 1);
  owner.join('a', 'presence-x', 1, '1.1', 'u', null, 100);
  events.length = 0;
  t.same(owner.reconcile(1, [plain('pub', 1), presence('presence-x', [['u', ['1.1']]])]), { subscriptions: 0, joins: 0, leaves: 0 });
  t.same(events, []);
});

t.test('lost sub notices: the shard\'s count becomes the reported one (occupied / vacated as usual)', async (t) => {
  const { owner, events } = store();
  owner.sub('a', 'pub', 1, 1);
  owner.sub('a', 'pub', 1, 1);
  owner.sub('a', 'pub', 2, 1);
  owner.sub('a', 'gone', 1, 1);
  events.length = 0;
  // shard 1 holds one subscription of pub, none of gone, two of new (both +1 lost)
  t.same(owner.reconcile(1, [plain('pub', 1), plain('new', 2)]), { subscriptions: 4, joins: 0, leaves: 0 });
  t.same(events, ['occupied new', 'vacated gone']);
  t.same(owner.info('a', 'pub'), { occupied: true, subscription_count: 2, user_count: null }, 'shard 2\'s part untouched');
  t.same(owner.info('a', 'new'), { occupied: true, subscription_count: 2, user_count: null });
});

t.test('presence: a lost leave is applied; a pending join is kept; another tab keeps the user', async (t) => {
  const { owner, events } = store();
  owner.join('a', 'presence-x', 1, '1.1', 'u', null, 100);
  owner.join('a', 'presence-x', 1, '1.2', 'u', null, 100); // second tab, its leave lost
  owner.join('a', 'presence-x', 1, '1.3', 'g', null, 100); // left, leave lost
  owner.join('a', 'presence-x', 1, '1.4', 'p', null, 100); // answered, the answer still on its way
  owner.join('a', 'presence-x', 2, '2.1', 'g', null, 100); // g also on shard 2
  events.length = 0;
  t.same(owner.reconcile(1, [presence('presence-x', [['u', ['1.1']]], ['1.4', '1.9'])]), { subscriptions: 0, joins: 0, leaves: 2 });
  t.same(events, [], 'u and g still have a connection: no member_removed');
  t.same(owner.users('a', 'presence-x').sort(), ['g', 'p', 'u']);
  t.same(owner.info('a', 'presence-x').subscription_count, 3);
  t.equal(owner.leave('a', 'presence-x', '1.2'), false, 'the removed socket\'s own leave, if it comes late: ignored');
  t.same(owner.reconcile(2, []), { subscriptions: 0, joins: 0, leaves: 1 }, 'shard 2 holds nothing any more');
  t.same(events, ['removed presence-x g']);
});

t.test('presence: a joined socket missing from the records joins (member_added to everyone)', async (t) => {
  const { owner, events } = store();
  t.same(owner.reconcile(0, [presence('presence-y', [['u', ['0.1', '0.2']]])]), { subscriptions: 0, joins: 2, leaves: 0 });
  t.same(events, ['occupied presence-y', 'added presence-y u']);
  t.equal(owner.info('a', 'presence-y').subscription_count, 2);
  t.equal(owner.leave('a', 'presence-y', '0.1'), true, 'and its later leave counts');
});

t.test('presence: a socket counted twice (a repeated join whose leave was lost) counts once', async (t) => {
  const { owner, events } = store();
  owner.join('a', 'presence-z', 1, '1.1', 'u', null, 100);
  owner.join('a', 'presence-z', 1, '1.1', 'u', null, 100);
  events.length = 0;
  t.same(owner.reconcile(1, [presence('presence-z', [['u', ['1.1']]])]), { subscriptions: 0, joins: 0, leaves: 1 });
  t.same(events, []);
  t.equal(owner.info('a', 'presence-z').subscription_count, 1);
  owner.leave('a', 'presence-z', '1.1');
  t.same(events, ['removed presence-z u', 'vacated presence-z']);
});

t.test('reports: one per owner, joined and pending presence sockets, the member events read', async (t) => {
  const shards = 3;
  const pick = (prefix: string, o: number) => {
    for (let k = 0; ; k++) if (ownerOf('a', `${prefix}-${k}`, shards) === o) return `${prefix}-${k}`;
  };
  const pub = pick('pub', 2);
  const pres = pick('presence', 2);
  const shadows = new PresenceShadows();
  shadows.joined('a', pres, [['u', null]]);
  const tally = new MemberTally(shards);
  tally.read[2] = 7;
  const sub = (type: string, userId: unknown = null, joined = true) => ({ type, joined, userId, userInfo: null });
  const reports = reconcileReports([
    { id: '0.1', app: 'a', channels: new Map([[pub, sub('public')], [pres, sub('presence', 'u')]]) },
    { id: '0.2', app: 'a', channels: new Map([[pres, sub('presence', 'v', false)]]) },
  ], shards, shadows, tally);
  t.same(reports.map((r) => [r.channels.length, r.members]), [[0, 0], [0, 0], [2, 7]], 'every owner gets one, empty where nothing is held');
  const byName = new Map(reports[2].channels.map((c) => [c.channel, c]));
  t.same(byName.get(pub), { app: 'a', channel: pub, subs: 1, members: null, shadow: null, pending: null });
  t.same(byName.get(pres), { app: 'a', channel: pres, subs: 1, members: [['u', null, 1, ['0.1']]], shadow: ['u'], pending: ['0.2'] });
  tally.reset(2);
  t.equal(tally.read[2], 0, 'a restarted peer: counted from zero');
});
