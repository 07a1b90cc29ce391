// Presence across nodes, the primary's part. Each node's owner shards decide node-local
// transitions (a user's first / last connection on this node) and tell the primary
// (`cluster_member`); the primary tells every other node, whose primary hands it to the
// channel's owner shard there (`remote_member`). The owner (channels/owner-service.ts,
// channels/remote-presence.ts) then knows on which nodes each user is, and:
//
//  - clients hear member_added when the first node gets the user, member_removed when
//    the last node loses them (each node tells its own sockets: once per socket);
//  - the member hooks (webhooks) fire on the node where the local transition happened,
//    only when no other node had the user then: once per user transition in the cluster.
//    Two nodes adding the same user within one backend hop of each other can both see
//    the user as new; that window is the bound on "once".
//  - a node that joins gets every node's members (`sync`, one message per owner shard,
//    sent in the order of that shard's increments, so a later leave is never overtaken);
//  - a node that stops (`bye`) or is declared failed (silent for node_timeout_ms) is
//    dropped by every survivor; its members go (member_removed to each node's clients).
//    A failed node's member_removed hooks fire on one survivor only: the one with the
//    smallest node id. A node that stops cleanly sends its own as its sockets close.

import type { Logger } from 'pino';
import type { ControlMsg, RequestBody } from '../bus/messages';
import { ownerOf } from '../channels/owner';
import type { ClusterNode } from './cluster';
import type { ChannelCount } from './wire';

export interface PresenceBus {
  control(to: number, msg: ControlMsg): void;
  request<T>(to: number, body: RequestBody): Promise<T>;
}

export interface ClusterPresence {
  /** A shard's `cluster_member` (a node-local transition) or `cluster_count`. */
  fromShard(msg: Extract<ControlMsg, { type: 'cluster_member' | 'cluster_count' }>): void;
  /**
   * Shard `shard` was restarted (its rings are new, before the survivors re-announce):
   * writes it the other nodes' members and counts of the channels it owns, which died with
   * the old thread. Written before the survivors' restores, they are read before them.
   */
  resend(shard: number): void;
  stop(): void;
}

/** What the other nodes told this one, kept on the primary for shard restarts. */
class Replica {
  /** node → channel key → user key → [app, channel, user_id, user_info] */
  readonly members = new Map<string, Map<string, Map<string, [string, string, unknown, unknown]>>>();
  /** node → channel key → [app, channel, total] */
  readonly counts = new Map<string, Map<string, ChannelCount>>();

  member(node: string, op: 'added' | 'removed', app: string, channel: string, userId: unknown, userInfo: unknown): void {
    const k = `${app}\u0000${channel}`;
    let chans = this.members.get(node);
    if (!chans) this.members.set(node, (chans = new Map<string, Map<string, [string, string, unknown, unknown]>>()));
    let users = chans.get(k);
    if (!users) chans.set(k, (users = new Map<string, [string, string, unknown, unknown]>()));
    if (op === 'added') users.set(JSON.stringify(userId), [app, channel, userId, userInfo]);
    else users.delete(JSON.stringify(userId));
    if (users.size === 0) chans.delete(k);
  }

  count(node: string, [app, channel, total]: ChannelCount): void {
    let chans = this.counts.get(node);
    if (!chans) this.counts.set(node, (chans = new Map<string, ChannelCount>()));
    const k = `${app}\u0000${channel}`;
    if (total > 0) chans.set(k, [app, channel, total]);
    else chans.delete(k);
  }

  drop(node: string): void {
    this.members.delete(node);
    this.counts.delete(node);
  }
}

/** How long subscription counts are gathered before they go to the other nodes. */
export const COUNT_FLUSH_MS = 100;

export function startClusterPresence(deps: { cluster: ClusterNode; bus: PresenceBus; shards: number; log: Logger }): ClusterPresence {
  const { cluster, bus, shards, log } = deps;

  function tell(to: number, msg: ControlMsg): void {
    try {
      bus.control(to, msg);
    } catch (err) {
      log.error({ err, shard: to, type: msg.type }, 'cluster presence: a shard\'s queue is full; a remote member change is lost');
    }
  }

  const replica = new Replica();
  const remoteCounts = (node: string, counts: ChannelCount[]) => {
    for (const c of counts) {
      replica.count(node, c);
      const [app, channel, total] = c;
      tell(ownerOf(app, channel, shards), { type: 'remote_count', node, app, channel, total });
    }
  };
  const remoteMember = (node: string, op: 'added' | 'removed', app: string, channel: string, userId: unknown, userInfo: unknown) => {
    replica.member(node, op, app, channel, userId, userInfo);
    tell(ownerOf(app, channel, shards), { type: 'remote_member', op, node, app, channel, userId, userInfo });
  };

  cluster.onPeerMsg((msg) => {
    if (msg.t === 'member') {
      remoteMember(msg.node, msg.op, msg.app, msg.channel, msg.userId, msg.userInfo);
    } else if (msg.t === 'counts') {
      remoteCounts(msg.node, msg.counts);
    } else if (msg.t === 'sync' && msg.to === cluster.id) {
      for (const [app, channel, userId, userInfo] of msg.members) remoteMember(msg.node, 'added', app, channel, userId, userInfo);
      remoteCounts(msg.node, msg.counts);
    }
  });

  // subscription counts: the latest per channel, sent every COUNT_FLUSH_MS (a node's
  // subscribe storm is one message per channel per flush, not one per subscribe)
  const pendingCounts = new Map<string, ChannelCount>();
  const flush = setInterval(() => {
    if (pendingCounts.size === 0) return;
    const counts = [...pendingCounts.values()];
    pendingCounts.clear();
    if (!cluster.broadcast({ t: 'counts', node: cluster.id, counts })) {
      log.warn({ channels: counts.length }, 'cluster: subscription counts not sent: the backend is down');
    }
  }, COUNT_FLUSH_MS);
  flush.unref();

  cluster.onNodeJoined((node) => {
    // each owner shard's part goes out as soon as it comes: its later increments follow it
    for (let s = 0; s < shards; s++) {
      bus.request<{ members: [string, string, unknown, unknown][]; counts: ChannelCount[] }>(s, { type: 'local_presence' }).then(
        ({ members, counts }) => {
          if (members.length > 0 || counts.length > 0) cluster.broadcast({ t: 'sync', node: cluster.id, to: node, members, counts });
        },
        (err: Error) => log.error({ err, shard: s, node }, 'cluster presence: could not read a shard\'s members for a new node'),
      );
    }
  });

  cluster.onNodeGone((node, failed) => {
    replica.drop(node);
    const cleaner = failed && cluster.nodes().sort()[0] === cluster.id;
    for (let s = 0; s < shards; s++) tell(s, { type: 'remote_node_gone', node, webhooks: cleaner });
  });

  return {
    fromShard(msg) {
      if (msg.type === 'cluster_count') {
        pendingCounts.set(`${msg.app}\u0000${msg.channel}`, [msg.app, msg.channel, msg.total]);
        return;
      }
      const { op, app, channel, userId, userInfo } = msg;
      cluster.broadcast({ t: 'member', node: cluster.id, op, app, channel, userId, userInfo });
    },
    resend(shard) {
      for (const [node, chans] of replica.members) {
        for (const users of chans.values()) {
          for (const [app, channel, userId, userInfo] of users.values()) {
            if (ownerOf(app, channel, shards) === shard) tell(shard, { type: 'remote_member', op: 'added', node, app, channel, userId, userInfo });
          }
        }
      }
      for (const [node, chans] of replica.counts) {
        for (const [app, channel, total] of chans.values()) {
          if (ownerOf(app, channel, shards) === shard) tell(shard, { type: 'remote_count', node, app, channel, total });
        }
      }
    },
    stop() {
      clearInterval(flush);
    },
  };
}
