// The cluster-wide transitions behind the occupancy and member webhooks, decided on the
// primary, once per transition in the whole cluster.
//
// Every node's node-local transitions travel on the control subject (`member` messages;
// occupied / vacated in the `occ` list of `counts`), and each node receives its own back
// too. A backend delivers one subject's messages to every subscriber in one order (one
// Redis server or Sentinel master, one Redis Cluster shard — sharded pub/sub keeps a
// channel on one — one nats-server). So every node that applies them, its own included,
// *at the place the backend gave them*, holds the same view after each message and finds
// the same transitions: a user's first node (member_added), last node gone
// (member_removed), a channel's first node with subscribers (channel_occupied), last one
// gone (channel_vacated). The node whose message made the transition sends the webhook;
// the others only apply it. Of two nodes adding the same user at the same moment, only
// the one the backend ordered first finds nobody else: once, not twice.
//
// NATS orders each publisher only (adapter/transport.ts `ordered`): two nodes removing
// the same user at the same moment can each see the other's removal last, and neither
// would send member_removed (or both would send member_added). Over such a backend one
// node decides every transition of the cluster, from its own view: the decider, the node
// with the smallest id, which is the oldest (ids start with the node's start time,
// adapter/cluster.ts), so a node joining never takes the role with a view still being
// filled by the others' `sync`. Any order of the other nodes' messages gives the decider
// a consistent view (each node's own messages keep their order), so each transition is
// sent once. The price: while a killed decider is not yet declared failed
// (node_timeout_ms), the transitions of the survivors are applied but not sent.
//
// Where the view can differ between nodes (documented in docs/scaling.md):
//  - a node that just joined learns the others' state from their `sync` (applied without
//    webhooks: those transitions happened before it);
//  - a failed node's members and channels are removed by every survivor when its own
//    cleanup pass declares it failed; the webhooks for them go out from one survivor, the
//    one with the smallest node id (the same for every survivor once each has seen the
//    failure); if it comes back (it was paused, not killed), its state's members and
//    channels are added back, their webhooks from that survivor too;
//  - while the backend is down, this node's transitions are applied at once (nobody else
//    hears of them; the webhook is sent as on a single node);
//  - over a *cluster* of nats-servers, publishers on different servers are not ordered
//    the same for every subscriber: "once" holds up to one backend hop, as before.

import { userKey } from '../channels/owner';
import type { WebhookEvent } from '../bus/messages';

export type Emit = (app: string, e: WebhookEvent) => void;

interface Member {
  id: unknown;
  nodes: Set<string>;
}

const keyOf = (app: string, channel: string) => app + '\u0000' + channel;
const split = (k: string): [string, string] => {
  const i = k.indexOf('\u0000');
  return [k.slice(0, i), k.slice(i + 1)];
};

export class ClusterTransitions {
  /** app\0channel → user key → the nodes that have the user. */
  private readonly members = new Map<string, Map<string, Member>>();
  /** app\0channel → the nodes with subscribers. */
  private readonly occupied = new Map<string, Set<string>>();

  /**
   * `self`: this node's id; `emit`: sends a webhook. `decides`: null over an ordered
   * backend (each node sends its own transitions); else whether this node is the decider
   * now (it sends every node's).
   */
  constructor(private readonly self: string, private readonly emit: Emit, private readonly decides: (() => boolean) | null = null) {}

  /**
   * Whether this node sends the webhook of a transition `node` made. `alone`: a
   * transition nobody else hears of (the backend is down, or this node has left): this
   * node sends its own, as a single node would. `sender`, when given, decides (a rejoined
   * node's state coming back: the node that sent its failure's webhooks sends them).
   */
  private sends(node: string, quiet: boolean, alone: boolean, sender: boolean | undefined): boolean {
    if (quiet) return false;
    if (sender !== undefined) return sender;
    if (alone || this.decides === null) return node === this.self;
    return this.decides();
  }

  /** A node-local member transition of `node`, at its place in the backend's order. */
  member(node: string, op: 'added' | 'removed', app: string, channel: string, userId: unknown, quiet = false, alone = false, sender?: boolean): void {
    const k = keyOf(app, channel);
    const uk = userKey(userId);
    if (op === 'added') {
      let users = this.members.get(k);
      if (!users) this.members.set(k, (users = new Map<string, Member>()));
      let m = users.get(uk);
      if (!m) users.set(uk, (m = { id: userId, nodes: new Set() }));
      const first = m.nodes.size === 0;
      m.nodes.add(node);
      if (first && this.sends(node, quiet, alone, sender)) this.emit(app, { name: 'member_added', channel, user_id: userId });
      return;
    }
    const users = this.members.get(k);
    const m = users?.get(uk);
    if (!users || !m || !m.nodes.delete(node) || m.nodes.size > 0) return;
    users.delete(uk);
    if (users.size === 0) this.members.delete(k);
    if (this.sends(node, quiet, alone, sender)) this.emit(app, { name: 'member_removed', channel, user_id: m.id });
  }

  /** A node-level occupancy transition of `node` (its first subscriber of the channel, or its last gone). */
  occupancy(node: string, op: 'occupied' | 'vacated', app: string, channel: string, quiet = false, alone = false, sender?: boolean): void {
    const k = keyOf(app, channel);
    let nodes = this.occupied.get(k);
    if (op === 'occupied') {
      if (!nodes) this.occupied.set(k, (nodes = new Set()));
      const first = nodes.size === 0;
      nodes.add(node);
      if (first && this.sends(node, quiet, alone, sender)) this.emit(app, { name: 'channel_occupied', channel });
      return;
    }
    if (!nodes || !nodes.delete(node) || nodes.size > 0) return;
    this.occupied.delete(k);
    if (this.sends(node, quiet, alone, sender)) this.emit(app, { name: 'channel_vacated', channel });
  }

  /**
   * `node` is gone: its members and channels leave the view. `sender`: this node sends
   * the webhooks of what that empties (member_removed first, then channel_vacated, as
   * a channel's last subscribers leaving would).
   */
  nodeGone(node: string, sender: boolean): void {
    for (const [k, users] of [...this.members]) {
      for (const [uk, m] of [...users]) {
        if (!m.nodes.delete(node) || m.nodes.size > 0) continue;
        users.delete(uk);
        const [app, channel] = split(k);
        if (sender) this.emit(app, { name: 'member_removed', channel, user_id: m.id });
      }
      if (users.size === 0) this.members.delete(k);
    }
    for (const [k, nodes] of [...this.occupied]) {
      if (!nodes.delete(node) || nodes.size > 0) continue;
      this.occupied.delete(k);
      const [app, channel] = split(k);
      if (sender) this.emit(app, { name: 'channel_vacated', channel });
    }
  }

  /** For tests and metrics: the nodes the view has for a user / a channel. */
  nodesOf(app: string, channel: string, userId?: unknown): string[] {
    const k = keyOf(app, channel);
    const set = userId === undefined ? this.occupied.get(k) : this.members.get(k)?.get(userKey(userId))?.nodes;
    return set ? [...set].sort() : [];
  }
}
