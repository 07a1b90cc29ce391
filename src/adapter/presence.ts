// Presence across nodes, the primary's part. Each node's owner shards decide node-local
// transitions (a user's first / last connection on this node) and tell the primary
// (`cluster_member`); the primary tells every other node, whose primary hands it to the
// channel's owner shard there (`remote_member`). The owner (channels/owner-service.ts,
// channels/remote-presence.ts) then knows on which nodes each user is, and:
//
//  - clients hear member_added when the first node gets the user, member_removed when
//    the last node loses them (each node tells its own sockets: once per socket);
//  - the member and occupancy webhooks are decided here, on the primary, for the whole
//    cluster in the backend's order (adapter/transitions.ts): this node's occupied /
//    vacated transitions travel with its subscription counts (`occ`), and its own
//    messages are applied when the backend echoes them back;
//  - a node that joins gets every node's members (`sync`, one message per owner shard,
//    sent in the order of that shard's increments, so a later leave is never overtaken);
//  - a node whose backend was unreachable (member changes and counts sent meanwhile are
//    lost, both ways) sends every node its whole state when the backend is back, and each
//    answers with its own: a shard's `sync` replaces what the receiver held of its sender
//    in the channels that shard owns, so members that came or went meanwhile are added or
//    removed (member_added / member_removed to the clients). The view behind the webhooks
//    is corrected quietly: while the backend was down each node sent the webhooks of what
//    it saw (adapter/transitions.ts);
//  - a node seen again after this one declared it failed (a stall, a partition: it never
//    sent `bye` and does not know) is sent this node's state with `ask` and answers with
//    its own, the same exchange, so its members are back here; its answer's members and
//    channels are transitions (member_added, channel_occupied from the node that decides),
//    since its failure's member_removed and channel_vacated went out;
//  - a node that stops (`bye`) or is declared failed (silent for node_timeout_ms) is
//    dropped by every survivor; its members go (member_removed to each node's clients).
//    A failed node's member_removed / channel_vacated hooks fire on one survivor only:
//    the one with the smallest node id. A node that stops cleanly (`bye` first) decides
//    its own as its sockets close, on what it knew of the others then.

import type { Logger } from 'pino';
import type { ControlMsg, RequestBody } from '../bus/messages';
import { ownerOf } from '../channels/owner';
import type { ClusterNode } from './cluster';
import { ClusterTransitions, type Emit } from './transitions';
import type { ChannelCount, NodeMsg, Occupancy } from './wire';
import { logLimited } from '../log';

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

/** Members per `sync` part: user_info can be large, a backend message is not (NATS: 1 MiB by default). */
export const MEMBERS_PER_SYNC = 200;
/** Subscription counts per `sync` part. */
export const COUNTS_PER_SYNC = 5000;

type SyncMember = [app: string, channel: string, userId: unknown, userInfo: unknown];
type SyncMsg = Extract<NodeMsg, { t: 'sync' }>;

/** A shard's state cut into `sync` parts (at least one: an empty part says "nothing"). */
export function syncParts(node: string, to: string, shard: number, shards: number, members: SyncMember[], counts: ChannelCount[], perMembers = MEMBERS_PER_SYNC, perCounts = COUNTS_PER_SYNC, ask = false): SyncMsg[] {
  const parts: SyncMsg[] = [];
  for (let i = 0; i < members.length; i += perMembers) parts.push({ t: 'sync', node, to, shard, shards, members: members.slice(i, i + perMembers), counts: [] });
  for (let i = 0; i < counts.length; i += perCounts) parts.push({ t: 'sync', node, to, shard, shards, members: [], counts: counts.slice(i, i + perCounts) });
  if (parts.length === 0) parts.push({ t: 'sync', node, to, shard, shards, members: [], counts: [] });
  parts.forEach((p, i) => {
    p.first = i === 0;
    p.last = i === parts.length - 1;
    if (ask) p.ask = true;
  });
  return parts;
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

  has(node: string, app: string, channel: string, userId: unknown): boolean {
    return this.members.get(node)?.get(`${app}\u0000${channel}`)?.has(JSON.stringify(userId)) ?? false;
  }

  drop(node: string): void {
    this.members.delete(node);
    this.counts.delete(node);
  }
}

const noTransitions: Pick<ClusterTransitions, 'member' | 'occupancy' | 'nodeGone'> = {
  member: () => undefined,
  occupancy: () => undefined,
  nodeGone: () => undefined,
};

/** How long subscription counts are gathered before they go to the other nodes. */
export const COUNT_FLUSH_MS = 100;

export interface ClusterPresenceDeps {
  cluster: ClusterNode;
  bus: PresenceBus;
  shards: number;
  log: Logger;
  /** Sends an occupancy or member webhook this node decided (null: the node has no webhook service). */
  webhook: Emit | null;
  /**
   * Whether the backend gives every node one order of the control subject (Transport.
   * ordered): each node then sends its own transitions; else the oldest node sends all
   * (adapter/transitions.ts).
   */
  ordered: boolean;
  /** Called on every change of the backend's reachability (Transport.onState). */
  onBackendState(listener: (up: boolean) => void): void;
  /** Test hook: members per `sync` part (MEMBERS_PER_SYNC). */
  membersPerSync?: number;
}

export function startClusterPresence(deps: ClusterPresenceDeps): ClusterPresence {
  const { cluster, bus, shards, log } = deps;
  // the cluster-wide view costs memory (every occupied channel, every presence member of
  // the cluster): kept only when this node sends webhooks
  /**
   * The oldest node: the smallest id (adapter/cluster.ts); it also sends a failed node's
   * hooks. Not once this node has stopped: the others have dropped it at its `bye` and
   * the next oldest decides.
   */
  const decider = () => !stopped && cluster.oldest() === cluster.id;
  const transitions = deps.webhook ? new ClusterTransitions(cluster.id, deps.webhook, deps.ordered ? null : decider) : noTransitions;

  function tell(to: number, msg: ControlMsg): void {
    try {
      bus.control(to, msg);
    } catch (err) {
      logLimited(log, 'error', { err, shard: to, type: msg.type }, 'cluster presence: a shard\'s queue is full; a remote member change is lost');
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

  const occupancy = (node: string, occ: Occupancy[] | undefined, alone = false) => {
    for (const [op, app, channel] of occ ?? []) transitions.occupancy(node, op, app, channel, false, alone);
  };
  // this node's own transitions, back at their place in the backend's order
  cluster.onEcho((msg) => {
    if (msg.t === 'member') transitions.member(cluster.id, msg.op, msg.app, msg.channel, msg.userId);
    else if (msg.t === 'counts') occupancy(cluster.id, msg.occ);
  });

  cluster.onPeerMsg((msg) => {
    if (msg.t === 'member') {
      transitions.member(msg.node, msg.op, msg.app, msg.channel, msg.userId);
      remoteMember(msg.node, msg.op, msg.app, msg.channel, msg.userId, msg.userInfo);
    } else if (msg.t === 'counts') {
      occupancy(msg.node, msg.occ);
      remoteCounts(msg.node, msg.counts);
    } else if (msg.t === 'sync' && (msg.to === cluster.id || msg.to === '*')) {
      syncPart(msg);
      // a node back from an outage, or one that dropped this one and sees it again: it
      // missed what this one did meanwhile too
      if ((msg.to === '*' || msg.ask === true) && msg.first && msg.shard === 0) sendState(msg.node);
    }
  });

  /** Nodes asked for their state after they rejoined → the shards whose answer is in. */
  const answering = new Map<string, Set<number>>();

  /** `${node}\0${shard}` → the members and channels listed so far of the state it is sending. */
  const incoming = new Map<string, { members: Set<string>; counts: Set<string> }>();
  const memberKey = (app: string, channel: string, userId: unknown) => `${app}\u0000${channel}\u0000${JSON.stringify(userId)}`;

  /**
   * A part of a node's state for the channels one of its shards owns: state, not
   * transitions (no webhooks: those happened before this node heard of them). At the
   * last part, what this node held of the sender in those channels and was not listed is
   * gone there.
   */
  function syncPart(msg: SyncMsg): void {
    const node = msg.node;
    const whole = msg.shard !== undefined && msg.shards !== undefined;
    const k = `${node}\u0000${msg.shard}`;
    if (whole && msg.first) incoming.set(k, { members: new Set(), counts: new Set() });
    const listed = whole ? incoming.get(k) : undefined;
    if (whole && !listed) return; // a part whose first one was lost (backend down): the next state replaces it
    // the answer of a node this one declared failed and asked (`rejoined`): the webhooks of
    // its failure went out, so its members and channels coming back are transitions too
    // (sent by the survivor that sent the failure's, as nodeGone decides below)
    const quiet = !(msg.to === cluster.id && answering.has(node));
    const sender = quiet ? undefined : decider();
    for (const [app, channel, userId, userInfo] of msg.members) {
      listed?.members.add(memberKey(app, channel, userId));
      if (replica.has(node, app, channel, userId)) continue;
      transitions.member(node, 'added', app, channel, userId, quiet, false, sender);
      remoteMember(node, 'added', app, channel, userId, userInfo);
    }
    for (const c of msg.counts) {
      const [app, channel, total] = c;
      listed?.counts.add(`${app}\u0000${channel}`);
      if (total > 0) transitions.occupancy(node, 'occupied', app, channel, quiet, false, sender);
    }
    remoteCounts(node, msg.counts);
    if (!listed || !msg.last) return;
    incoming.delete(k);
    if (!quiet) {
      const done = answering.get(node)!;
      done.add(msg.shard!);
      if (done.size >= msg.shards!) answering.delete(node);
    }
    const mine = (app: string, channel: string) => ownerOf(app, channel, msg.shards!) === msg.shard;
    for (const users of [...(replica.members.get(node)?.values() ?? [])]) {
      for (const [app, channel, userId, userInfo] of [...users.values()]) {
        if (!mine(app, channel) || listed.members.has(memberKey(app, channel, userId))) continue;
        transitions.member(node, 'removed', app, channel, userId, true);
        remoteMember(node, 'removed', app, channel, userId, userInfo);
      }
    }
    const vacated: ChannelCount[] = [];
    for (const [ck, [app, channel]] of replica.counts.get(node) ?? []) {
      if (!mine(app, channel) || listed.counts.has(ck)) continue;
      transitions.occupancy(node, 'vacated', app, channel, true);
      vacated.push([app, channel, 0]);
    }
    remoteCounts(node, vacated);
  }

  /** This node's members and counts, one owner shard at a time, each shard's parts in one go. */
  function sendState(to: string, ask = false): void {
    for (let s = 0; s < shards; s++) {
      bus.request<{ members: SyncMember[]; counts: ChannelCount[] }>(s, { type: 'local_presence' }).then(
        ({ members, counts }) => {
          for (const part of syncParts(cluster.id, to, s, shards, members, counts, deps.membersPerSync, undefined, ask)) {
            if (!cluster.broadcast(part)) {
              log.warn({ to, shard: s, members: members.length }, 'cluster presence: this node\'s members not sent: the backend is down');
              return;
            }
          }
        },
        (err: Error) => log.error({ err, shard: s, to }, 'cluster presence: could not read a shard\'s members for the other nodes'),
      );
    }
  }

  // subscription counts: the latest per channel, sent every COUNT_FLUSH_MS (a node's
  // subscribe storm is one message per channel per flush, not one per subscribe)
  // and this node's occupancy transitions since the last flush, in order (a channel
  // occupied and vacated within one flush is both, though its count went out as 0)
  const pendingCounts = new Map<string, ChannelCount>();
  const nodeTotals = new Map<string, number>();
  let pendingOcc: Occupancy[] = [];
  let stopped = false;
  const sendCounts = () => {
    if (pendingCounts.size === 0 && pendingOcc.length === 0) return;
    const counts = [...pendingCounts.values()];
    const occ = pendingOcc;
    pendingCounts.clear();
    pendingOcc = [];
    if (!cluster.broadcast({ t: 'counts', node: cluster.id, counts, occ })) {
      log.warn({ channels: counts.length }, 'cluster: subscription counts not sent: the backend is down');
      occupancy(cluster.id, occ, true); // nobody else hears of them: decided on what this node knows
    }
  };
  const flush = setInterval(sendCounts, COUNT_FLUSH_MS);
  flush.unref();

  // each owner shard's part goes out as soon as it comes: its later increments follow it
  // a node seen again after this one dropped it (declared failed) is asked for its state
  cluster.onNodeJoined((node, rejoined) => {
    if (rejoined) answering.set(node, new Set());
    sendState(node, rejoined);
  });
  deps.onBackendState((up) => {
    if (up) sendState('*');
  });

  cluster.onNodeGone((node, failed) => {
    replica.drop(node);
    answering.delete(node);
    for (const k of [...incoming.keys()]) if (k.startsWith(`${node}\u0000`)) incoming.delete(k);
    // a failed node's webhooks go out from one survivor; a stopped one decided its own
    transitions.nodeGone(node, failed && decider());
    for (let s = 0; s < shards; s++) tell(s, { type: 'remote_node_gone', node });
  });

  return {
    fromShard(msg) {
      if (msg.type === 'cluster_count') {
        const { app, channel, total } = msg;
        const k = `${app}\u0000${channel}`;
        const before = nodeTotals.get(k) ?? 0;
        const op = before === 0 && total > 0 ? 'occupied' : before > 0 && total === 0 ? 'vacated' : null;
        // once the node has left the cluster (stop: `bye` sent), it decides alone
        if (op && stopped) transitions.occupancy(cluster.id, op, app, channel, false, true);
        else if (op) pendingOcc.push([op, app, channel]);
        if (total > 0) nodeTotals.set(k, total);
        else nodeTotals.delete(k);
        pendingCounts.set(k, [app, channel, total]);
        return;
      }
      const { op, app, channel, userId, userInfo } = msg;
      // a channel's occupied goes before its first member_added (as on a single node)
      if (pendingOcc.length > 0) sendCounts();
      if (!cluster.broadcast({ t: 'member', node: cluster.id, op, app, channel, userId, userInfo })) {
        transitions.member(cluster.id, op, app, channel, userId, false, true); // nobody else hears of it
      }
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
      sendCounts(); // before the `bye`
      stopped = true;
    },
  };
}
