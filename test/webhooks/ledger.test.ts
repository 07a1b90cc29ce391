// The primary's ledger (src/webhooks/ledger.ts) alone: dedup of owner transitions and the
// crash rule's reconcile, including the case the end-to-end test cannot force (a
// transition decided by the crashed shard and lost in flight).

import t from 'tap';
import { ownerOf } from '../../src/channels/owner';
import { Ledger } from '../../src/webhooks/ledger';

const SHARDS = 4;
const ownedBy = (shard: number, prefix: string) => {
  for (let k = 0; ; k++) if (ownerOf('a', `${prefix}-${k}`, SHARDS) === shard) return `${prefix}-${k}`;
};

t.test('dedup: each transition accepted once', async (t) => {
  const l = new Ledger(SHARDS);
  t.ok(l.accept('a', { name: 'channel_occupied', channel: 'c' }));
  t.notOk(l.accept('a', { name: 'channel_occupied', channel: 'c' }), 'occupied twice: once');
  t.ok(l.accept('a', { name: 'member_added', channel: 'c', user_id: 1 }));
  t.notOk(l.accept('a', { name: 'member_added', channel: 'c', user_id: 1 }));
  t.notOk(l.accept('a', { name: 'member_added', channel: 'c', user_id: '1' }), 'user 1 and "1" are one member (as in the owner records)');
  t.ok(l.accept('a', { name: 'member_added', channel: 'c', user_id: 'u' }));
  t.ok(l.accept('a', { name: 'member_removed', channel: 'c', user_id: 1 }));
  t.notOk(l.accept('a', { name: 'member_removed', channel: 'c', user_id: 1 }));
  t.ok(l.accept('a', { name: 'channel_vacated', channel: 'c' }));
  t.notOk(l.accept('a', { name: 'channel_vacated', channel: 'c' }), 'vacated twice: once');
  t.notOk(l.accept('a', { name: 'member_removed', channel: 'c', user_id: 'u' }), "a vacated channel's members are gone with it");
  t.ok(l.accept('a', { name: 'client_event', channel: 'c', event: 'client-x', data: '{}', socket_id: '1.1' }), 'other events pass');
  t.equal(l.size, 0);
});

t.test('reconcile after shard 1 crashed: only its channels, the differences only', async (t) => {
  const l = new Ledger(SHARDS);
  const gone = ownedBy(1, 'gone');
  const kept = ownedBy(1, 'presence-kept');
  const lost = ownedBy(1, 'presence-lost');
  const other = ownedBy(2, 'other');
  for (const ch of [gone, kept, other]) l.accept('a', { name: 'channel_occupied', channel: ch });
  l.accept('a', { name: 'member_added', channel: kept, user_id: 'stays' });
  l.accept('a', { name: 'member_added', channel: kept, user_id: 'left' });
  // `lost`: occupied and member_added decided by shard 1, never read by the primary
  const out = l.reconcile(1, [
    ['a', kept, ['stays', 'new']],
    ['a', lost, ['m']],
  ]);
  t.same(out.map((o) => o.event), [
    { name: 'channel_vacated', channel: gone },
    { name: 'member_removed', channel: kept, user_id: 'left' },
    { name: 'member_added', channel: kept, user_id: 'new' },
    { name: 'channel_occupied', channel: lost },
    { name: 'member_added', channel: lost, user_id: 'm' },
  ]);
  t.same(l.reconcile(1, [['a', kept, ['stays', 'new']], ['a', lost, ['m']]]), [], 'the same state again: nothing');
  t.notOk(l.accept('a', { name: 'channel_occupied', channel: other }), 'a channel of another shard is untouched');
});
