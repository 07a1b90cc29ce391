// Control messages a shard receives over the bus: owner records, watchlists, terminate,
// member events, the rebuild of a replacement shard, delta frames.

import type { ControlMsg } from '../bus/messages';
import { isOwnerMsg } from '../channels/owner-service';
import { isUserMsg } from '../channels/users';
import { terminateUser } from '../ws/signin';
import type { ShardContext } from './context';
import type { Failover } from './failover';

export function createControlHandler(ctx: ShardContext, failover: () => Failover): (msg: ControlMsg, from: number) => void {
  const { owner, users, watchlists, publisher, sockets, out } = ctx;
  return (msg, from) => {
    if (failover().defer(msg, from)) return; // a replacement shard still rebuilding its records
    if (msg.type === 'remote_node_gone') users.nodeGone(msg.node); // and the owner's presence below
    if (msg.type === 'reconcile' && msg.users) {
      // watchlists: the reporting shard's signed-in connections of the users this shard owns
      const n = users.store.reconcileShard(from, msg.users);
      if (n > 0) ctx.metrics.inc('owner_reconcile_corrections_total', { kind: 'user' }, n);
    }
    if (isOwnerMsg(msg)) return owner.handle(msg, from);
    if (isUserMsg(msg)) return users.handle(msg, from);
    if (ctx.history.handle(msg, from)) return; // history channels, idempotency keys (shard/history.ts)
    switch (msg.type) {
      case 'watchlist':
        return watchlists.deliver(msg.app, msg.op, msg.userIds, from);
      case 'terminate_user':
        terminateUser(sockets.values(), msg.app, msg.userId, out);
        return;
      case 'member':
        ctx.tally.read[from]++;
        return publisher.deliverMember(msg);
      case 'restore':
        return failover().restore(msg, from);
      case 'delta':
        return ctx.delta?.deliver(msg);
      case 'fb_recv':
      case 'fb_out':
      case 'fb_gone':
      case 'fb_send':
        return ctx.fallback?.handle(msg, from);
      case 'reply':
        return; // settled by the bus itself
    }
  };
}
