// Watchlists across nodes, the primary's part (apps with enable_watchlist_events). Like
// presence members (adapter/presence.ts), each node's owner shards decide node-local
// transitions (a user's first / last signed-in connection on this node) and tell the
// primary (`cluster_user`); the primary tells every other node, whose primary hands it to
// the user's owner shard there (`remote_user`). The owner (channels/users.ts) then knows
// on which nodes each user is online and tells its own node's watchers `online` when the
// first node gets the user and `offline` when the last one loses it: every watcher in the
// cluster hears each transition once, and the state a watcher gets when it signs in
// counts every node.
//
//  - a node that joins gets every node's online users (`users`, from the primary's own
//    record of what it announced, in order with its later `user` messages);
//  - a node seen again after this one declared it failed (a stall, a partition) is sent
//    this node's users with `ask`, and answers with its own: it does not know it was
//    dropped, and its users went offline here;
//  - a node whose backend was unreachable (transitions sent or due meanwhile are lost)
//    sends every node its whole state when the backend is back, and each answers with
//    its own: a `users` message replaces what the receiver held of its sender;
//  - a node that stops (`bye`) or is declared failed is dropped by every survivor: the
//    `remote_node_gone` that presence sends every shard (adapter/presence.ts) reaches the
//    user owners too, and its users go offline where no other node has them. There are no
//    webhooks for watchlists, so every survivor does it for its own watchers (no cleaner);
//  - an owner shard restarted: its replacement is sent the other nodes' users it owns
//    (resend, before the survivors' restores) and, once rebuilt, reports the users it owns
//    that are online here (`cluster_users`); the primary announces the differences.
//
// The bound on "once", as for presence: a node learns of another node's transition one
// backend hop later. A user's last tab on node B closing within that hop of its first tab
// on node A signing in makes node B's watchers hear offline then online (each node
// decides on what it knows; the end state is right on every node).
//
// Memory: every node keeps every online user of the cluster (of the watchlist apps),
// a Set entry per node that has them.

import type { Logger } from 'pino';
import type { ControlMsg } from '../bus/messages';
import { userOwnerOf } from '../channels/users';
import type { ClusterNode, PeerMsg } from './cluster';
import { logLimited } from '../log';

type User = [app: string, userId: string];

export interface ClusterWatchlists {
  /** A shard's node-local transition (`cluster_user`) or a rebuilt owner's state (`cluster_users`). */
  fromShard(msg: Extract<ControlMsg, { type: 'cluster_user' | 'cluster_users' }>): void;
  /** Shard `shard` was restarted: writes it the other nodes' online users it owns. */
  resend(shard: number): void;
}

const keyOf = (app: string, userId: string) => `${app}\u0000${userId}`;

/** Users per `users` message: a node's whole state can be large, a backend message is not (NATS: 1 MiB by default). */
export const USERS_PER_MESSAGE = 1000;

export function startClusterWatchlists(deps: {
  cluster: ClusterNode;
  bus: { control(to: number, msg: ControlMsg): void };
  shards: number;
  log: Logger;
  /** Called on every change of the backend's reachability (Transport.onState). */
  onBackendState(listener: (up: boolean) => void): void;
  /** Test hook: users per `users` message (USERS_PER_MESSAGE). */
  usersPerMessage?: number;
}): ClusterWatchlists {
  const { cluster, bus, shards, log } = deps;
  const perMessage = deps.usersPerMessage ?? USERS_PER_MESSAGE;
  /** The users online on this node, as announced to the others. */
  const mine = new Map<string, User>();
  /** node → the users online there (for shard restarts). */
  const remote = new Map<string, Map<string, User>>();

  function tell(to: number, msg: ControlMsg): void {
    try {
      bus.control(to, msg);
    } catch (err) {
      logLimited(log, 'error', { err, shard: to }, 'cluster watchlists: a shard\'s queue is full; a remote online / offline change is lost');
    }
  }

  function remoteUser(node: string, op: 'online' | 'offline', app: string, userId: string): void {
    let users = remote.get(node);
    if (op === 'online') {
      if (!users) remote.set(node, (users = new Map<string, User>()));
      users.set(keyOf(app, userId), [app, userId]);
    } else if (users) {
      users.delete(keyOf(app, userId));
      if (users.size === 0) remote.delete(node);
    }
    tell(userOwnerOf(app, userId, shards), { type: 'remote_user', op, node, app, userId });
  }

  function announce(op: 'online' | 'offline', app: string, userId: string): void {
    const k = keyOf(app, userId);
    if (op === 'online') {
      if (mine.has(k)) return;
      mine.set(k, [app, userId]);
    } else if (!mine.delete(k)) {
      return;
    }
    if (!cluster.broadcast({ t: 'user', node: cluster.id, op, app, userId })) {
      log.warn({ app, op }, 'cluster watchlists: a user\'s online state not sent: the backend is down');
    }
  }

  /** node → the users listed so far of the whole state it is sending. */
  const incoming = new Map<string, Set<string>>();

  /** A part of `node`'s whole state; at the last part, what was not listed went offline there. */
  function statePart(msg: Extract<PeerMsg, { t: 'users' }>): void {
    if (msg.first) incoming.set(msg.node, new Set());
    const listed = incoming.get(msg.node);
    if (!listed) return; // a part whose first one was lost (backend down): the next state replaces it
    for (const [app, userId] of msg.users) {
      listed.add(keyOf(app, userId));
      remoteUser(msg.node, 'online', app, userId);
    }
    if (!msg.last) return;
    incoming.delete(msg.node);
    for (const [k, [app, userId]] of [...(remote.get(msg.node) ?? [])]) if (!listed.has(k)) remoteUser(msg.node, 'offline', app, userId);
  }

  /** This node's whole state, in parts sent in one go (no `user` message between them). */
  function sendState(to: string, ask = false): void {
    const users = [...mine.values()];
    for (let i = 0; i === 0 || i < users.length; i += perMessage) {
      const msg = {
        t: 'users' as const, node: cluster.id, to, users: users.slice(i, i + perMessage), first: i === 0, last: i + perMessage >= users.length,
        ...(ask ? { ask: true } : {}),
      };
      if (!cluster.broadcast(msg)) {
        log.warn({ to, users: users.length }, 'cluster watchlists: this node\'s online users not sent: the backend is down');
        return;
      }
    }
  }

  cluster.onPeerMsg((msg) => {
    if (msg.t === 'user') return remoteUser(msg.node, msg.op, msg.app, msg.userId);
    if (msg.t !== 'users' || (msg.to !== cluster.id && msg.to !== '*')) return;
    statePart(msg);
    if ((msg.to === '*' || msg.ask === true) && msg.first) sendState(msg.node);
  });

  cluster.onNodeJoined((node, rejoined) => {
    // a node seen again after this one dropped it: it does not know, so it is asked for its users
    if (mine.size > 0 || rejoined) sendState(node, rejoined);
  });

  deps.onBackendState((up) => {
    if (up) sendState('*');
  });

  // the owner shards drop the node's users on presence's `remote_node_gone`
  cluster.onNodeGone((node) => {
    remote.delete(node);
    incoming.delete(node);
  });

  return {
    fromShard(msg) {
      if (msg.type === 'cluster_user') return announce(msg.op, msg.app, msg.userId);
      const now = new Set(msg.users.map(([app, userId]) => keyOf(app, userId)));
      for (const [k, [app, userId]] of [...mine]) {
        if (!now.has(k) && userOwnerOf(app, userId, shards) === msg.shard) announce('offline', app, userId);
      }
      for (const [app, userId] of msg.users) announce('online', app, userId);
    },
    resend(shard) {
      for (const [node, users] of remote) {
        for (const [app, userId] of users.values()) {
          if (userOwnerOf(app, userId, shards) === shard) tell(shard, { type: 'remote_user', op: 'online', node, app, userId });
        }
      }
    },
  };
}
