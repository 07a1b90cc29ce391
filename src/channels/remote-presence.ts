// The presence members other nodes of the cluster have, for the channels this shard owns:
// per channel, per user, the set of nodes where the user has a connection. The owner
// service reads it to decide cluster-wide transitions (a user present on any node is a
// member; member_added when the first node gets them, member_removed when the last one
// loses them) and adds these members to the snapshot a joining socket receives.
//
// Fed by the primary (adapter/presence.ts): a `remote_member` message for each node-local
// transition of another node, and `remote_node_gone` when a node stopped or was declared
// failed. Adds are idempotent per node (a node's sync after it was first seen repeats
// what its increments said).

import { userKey } from './owner';

interface RemoteMember {
  id: unknown;
  info: unknown;
  nodes: Set<string>;
}

export class RemotePresence {
  /** app → channel → user key → member */
  private readonly apps = new Map<string, Map<string, Map<string, RemoteMember>>>();

  /** Node `node` has the user now. Returns true when no other node had them before. */
  add(app: string, channel: string, node: string, id: unknown, info: unknown): boolean {
    let chans = this.apps.get(app);
    if (!chans) this.apps.set(app, (chans = new Map<string, Map<string, RemoteMember>>()));
    let users = chans.get(channel);
    if (!users) chans.set(channel, (users = new Map<string, RemoteMember>()));
    const key = userKey(id);
    let m = users.get(key);
    if (!m) users.set(key, (m = { id, info, nodes: new Set() }));
    const first = m.nodes.size === 0;
    m.nodes.add(node);
    return first;
  }

  /** Node `node` lost the user. Returns true when no node has them any more. */
  remove(app: string, channel: string, node: string, key: string): boolean {
    const users = this.apps.get(app)?.get(channel);
    const m = users?.get(key);
    if (!users || !m || !m.nodes.delete(node)) return false;
    if (m.nodes.size > 0) return false;
    users.delete(key);
    if (users.size === 0) this.drop(app, channel);
    return true;
  }

  /**
   * Node `node` is gone: removes it everywhere. Returns the [app, channel, user id] of the
   * users no node has any more.
   */
  dropNode(node: string): [string, string, unknown][] {
    const gone: [string, string, unknown][] = [];
    for (const [app, chans] of [...this.apps]) {
      for (const [channel, users] of [...chans]) {
        for (const [key, m] of [...users]) {
          if (!m.nodes.delete(node) || m.nodes.size > 0) continue;
          users.delete(key);
          gone.push([app, channel, m.id]);
        }
        if (users.size === 0) this.drop(app, channel);
      }
    }
    return gone;
  }

  has(app: string, channel: string, key: string): boolean {
    return this.apps.get(app)?.get(channel)?.has(key) ?? false;
  }

  /** Remote members of a channel as [user_id, user_info]. */
  members(app: string, channel: string): [unknown, unknown][] {
    const users = this.apps.get(app)?.get(channel);
    return users ? Array.from(users.values(), (m) => [m.id, m.info] as [unknown, unknown]) : [];
  }

  /** How many remote users are not in `local` (for the member limit over the cluster). */
  othersThan(app: string, channel: string, local: ReadonlyMap<string, unknown>): number {
    const users = this.apps.get(app)?.get(channel);
    if (!users) return 0;
    let n = 0;
    for (const key of users.keys()) if (!local.has(key)) n++;
    return n;
  }

  private drop(app: string, channel: string): void {
    const chans = this.apps.get(app);
    chans?.delete(channel);
    if (chans?.size === 0) this.apps.delete(app);
  }
}

/**
 * The subscription counts other nodes last reported for the channels this shard owns
 * (per channel, per node). The owner adds their sum to its own for subscription_count
 * and decides cluster-wide occupied / vacated with it.
 */
export class RemoteCounts {
  /** app → channel → node → count */
  private readonly apps = new Map<string, Map<string, Map<string, number>>>();

  /** Sets node's count; returns the remote sum before and after. */
  set(app: string, channel: string, node: string, n: number): { before: number; after: number } {
    const before = this.sum(app, channel);
    let chans = this.apps.get(app);
    if (!chans) this.apps.set(app, (chans = new Map<string, Map<string, number>>()));
    let nodes = chans.get(channel);
    if (!nodes) chans.set(channel, (nodes = new Map<string, number>()));
    if (n > 0) nodes.set(node, n);
    else nodes.delete(node);
    if (nodes.size === 0) {
      chans.delete(channel);
      if (chans.size === 0) this.apps.delete(app);
    }
    return { before, after: this.sum(app, channel) };
  }

  sum(app: string, channel: string): number {
    const nodes = this.apps.get(app)?.get(channel);
    if (!nodes) return 0;
    let n = 0;
    for (const c of nodes.values()) n += c;
    return n;
  }

  /** Node is gone: returns the [app, channel] whose remote sum it changed. */
  dropNode(node: string): [string, string][] {
    const out: [string, string][] = [];
    for (const [app, chans] of [...this.apps]) {
      for (const [channel, nodes] of [...chans]) {
        if (!nodes.delete(node)) continue;
        out.push([app, channel]);
        if (nodes.size === 0) chans.delete(channel);
      }
      if (chans.size === 0) this.apps.delete(app);
    }
    return out;
  }
}
