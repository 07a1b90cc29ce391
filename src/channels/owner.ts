// The owner shard's records of the channels it owns (owner = hash(app, channel) % shards).
// Only the owner decides the transitions that must happen exactly once per process:
// occupied / vacated and presence member_added / member_removed.

import type { ChannelInfo, PresenceJoinReply, ReconcileChannel, RestoreMember } from '../bus/messages';
import { SubscriptionStatus } from '../protocol/codes';
import { channelHash } from './topic';

export interface OwnerEvents {
  occupied(app: string, channel: string): void;
  vacated(app: string, channel: string): void;
  /** First connection of a user: tell the other members (never the joining socket). */
  memberAdded(app: string, channel: string, userId: unknown, userInfo: unknown, exceptSocketId: string): void;
  /** Last connection of a user left. */
  memberRemoved(app: string, channel: string, userId: unknown): void;
  /** The channel's subscription count changed (now `total`). */
  countChanged(app: string, channel: string, total: number): void;
  /** A record re-created by a rebuild (restore): no `occupied`, the channel never emptied. */
  restored?(app: string, channel: string): void;
}

export interface Member {
  id: unknown;
  info: unknown;
  /** Connections of this user to the channel, per shard. */
  byShard: Map<number, number>;
  conns: number;
}

/** One joined socket of a presence channel: its user and shard; n > 1 only while a repeated join's leave is on its way. */
interface JoinedSocket {
  key: string;
  shard: number;
  n: number;
}

interface ChannelRecord {
  perShard: Int32Array;
  total: number;
  members: Map<string, Member> | null;
  /** Presence: the joined sockets by socket_id (a leave names its socket; one never joined is ignored). */
  sockets: Map<string, JoinedSocket> | null;
}

/** What a reconciliation changed (OwnerStore.reconcile): subscriptions counted anew, sockets joined or removed. */
export interface Corrections {
  subscriptions: number;
  joins: number;
  leaves: number;
}

/** Presence user ids may be strings or numbers; members are keyed by their string form. */
export function userKey(id: unknown): string {
  return typeof id === 'string' ? id : JSON.stringify(id);
}

export class OwnerStore {
  private readonly apps = new Map<string, Map<string, ChannelRecord>>();

  constructor(private readonly shards: number, private readonly events: OwnerEvents) {}

  /** A non-presence subscription was added (+1) or removed (-1) on `shard`. */
  sub(app: string, channel: string, shard: number, delta: number): void {
    const rec = delta > 0 ? this.ensure(app, channel, false) : this.get(app, channel);
    if (!rec) return;
    this.count(app, channel, rec, shard, delta);
  }

  join(
    app: string, channel: string, shard: number, socketId: string,
    userId: unknown, userInfo: unknown, maxMembers: number,
  ): PresenceJoinReply {
    const existing = this.get(app, channel);
    const key = userKey(userId);
    const known = existing?.members?.get(key);
    if (!known && existing?.members && existing.members.size >= maxMembers) {
      return { ok: false, type: 'LimitReached', status: SubscriptionStatus.MemberLimit, error: `presence channel ${channel} is full (${maxMembers} members)` };
    }
    const rec = existing ?? this.ensure(app, channel, true);
    const members = this.addSocket(app, channel, rec, shard, socketId, userId, userInfo, socketId);
    // The snapshot includes the joining user: pusher-js expects `me` in the member list.
    const snapshot: [unknown, unknown][] = [];
    for (const mem of members.values()) snapshot.push([mem.id, mem.info]);
    return { ok: true, members: snapshot };
  }

  /**
   * A presence subscription of socket `socketId` went away (unsubscribe, close, or a join
   * its shard gave up on). Keyed by socket: a leave for a socket this record never joined
   * (its join was refused, never arrived, or the socket already left) changes nothing, so
   * another tab of the same user keeps its count. False when ignored.
   */
  leave(app: string, channel: string, socketId: string): boolean {
    const rec = this.get(app, channel);
    const s = rec?.sockets?.get(socketId);
    if (!rec || !s) return false;
    this.removeSocket(app, channel, rec, socketId, s, 1);
    return true;
  }

  /**
   * Periodic reconciliation (docs/owner-reconciliation.md): shard `shard`'s local truth of
   * every channel this shard owns where it has subscribers (`report`, written after every
   * notice it sent before: the ring is FIFO). The records' part of that shard is brought to
   * it with ordinary transitions (occupied / vacated, member_added / member_removed, counts):
   *  - non-presence: the shard's count becomes the reported one;
   *  - presence: reported joined sockets missing here join; sockets here that the shard
   *    neither holds joined nor waits an answer for (`pending`: the join is on its way
   *    back) leave; a socket counted twice (a repeated join whose leave was lost) once;
   *  - a channel the report does not name loses the shard's part.
   */
  reconcile(shard: number, report: readonly ReconcileChannel[]): Corrections {
    const c: Corrections = { subscriptions: 0, joins: 0, leaves: 0 };
    const named = new Set<string>();
    for (const r of report) {
      named.add(r.app + ' ' + r.channel);
      if (r.members === null) {
        const rec = this.get(r.app, r.channel);
        if (rec?.members) continue; // a presence record under a non-presence report: cannot be (same name)
        const delta = r.subs - (rec?.perShard[shard] ?? 0);
        if (delta === 0) continue;
        c.subscriptions += Math.abs(delta);
        this.count(r.app, r.channel, rec ?? this.ensure(r.app, r.channel, false), shard, delta);
        continue;
      }
      const want = new Map<string, [unknown, unknown]>();
      for (const [id, info, , socketIds] of r.members) for (const sid of socketIds) want.set(sid, [id, info]);
      // joins first: a user with a surviving socket is never removed and added again
      for (const [sid, [id, info]] of want) {
        const rec = this.get(r.app, r.channel) ?? this.ensure(r.app, r.channel, true);
        if (rec.sockets!.has(sid)) continue;
        this.addSocket(r.app, r.channel, rec, shard, sid, id, info, '');
        c.joins++;
      }
      const rec = this.get(r.app, r.channel);
      if (!rec?.sockets) continue;
      const pending = new Set(r.pending);
      for (const [sid, s] of [...rec.sockets]) {
        if (s.shard !== shard) continue;
        const keep = want.has(sid) || pending.has(sid) ? 1 : 0;
        if (s.n <= keep) continue;
        c.leaves += s.n - keep;
        this.removeSocket(r.app, r.channel, rec, sid, s, s.n - keep);
      }
    }
    for (const [app, chans] of [...this.apps]) {
      for (const [channel, rec] of [...chans]) {
        if (rec.perShard[shard] <= 0 || named.has(app + ' ' + channel)) continue;
        if (rec.sockets) {
          for (const [sid, s] of [...rec.sockets]) {
            if (s.shard !== shard) continue;
            c.leaves += s.n;
            this.removeSocket(app, channel, rec, sid, s, s.n);
          }
        }
        const n = rec.perShard[shard];
        if (n > 0) {
          c.subscriptions += n;
          this.count(app, channel, rec, shard, -n);
        }
      }
    }
    return c;
  }

  /**
   * Shard `shard` died: its connections are gone. Drops its counts from every record this
   * shard owns; a member whose last connection was there is removed (member_removed, once),
   * a channel left without subscribers is vacated.
   */
  dropShard(shard: number): void {
    for (const [app, chans] of [...this.apps]) {
      for (const [channel, rec] of [...chans]) {
        const n = rec.perShard[shard];
        if (rec.sockets) for (const [sid, s] of [...rec.sockets]) if (s.shard === shard) rec.sockets.delete(sid);
        if (rec.members) {
          for (const [key, m] of [...rec.members]) {
            const c = m.byShard.get(shard);
            if (c === undefined) continue;
            m.byShard.delete(shard);
            m.conns -= c;
            if (m.conns <= 0) {
              rec.members.delete(key);
              this.events.memberRemoved(app, channel, m.id);
            }
          }
        }
        if (n > 0) this.count(app, channel, rec, shard, -n);
      }
    }
  }

  /**
   * Rebuild after this shard was restarted: shard `shard` re-announces what it holds of a
   * channel this shard owns (`subs` subscriptions; for presence, its members with their
   * connection counts there). Adds them without member_added or occupied: for the clients
   * nothing changed.
   */
  restore(app: string, channel: string, shard: number, subs: number, members: RestoreMember[] | null): void {
    if (subs <= 0) return;
    const fresh = !this.get(app, channel);
    const rec = this.ensure(app, channel, members !== null);
    if (fresh) this.events.restored?.(app, channel);
    if (members) {
      const map = rec.members ?? (rec.members = new Map<string, Member>());
      const socks = rec.sockets ?? (rec.sockets = new Map<string, JoinedSocket>());
      for (const [id, info, conns, socketIds] of members) {
        const key = userKey(id);
        let m = map.get(key);
        if (!m) map.set(key, (m = { id, info, byShard: new Map<number, number>(), conns: 0 }));
        m.conns += conns;
        m.byShard.set(shard, (m.byShard.get(shard) ?? 0) + conns);
        for (const sid of socketIds) socks.set(sid, { key, shard, n: 1 });
      }
    }
    rec.perShard[shard] += subs;
    rec.total += subs;
    this.events.countChanged(app, channel, rec.total);
  }

  /** Current members of a presence channel by key (the rebuild compares them with the shadows). */
  memberMap(app: string, channel: string): ReadonlyMap<string, Member> {
    return this.get(app, channel)?.members ?? new Map();
  }

  info(app: string, channel: string): ChannelInfo {
    const rec = this.get(app, channel);
    if (!rec) return { occupied: false, subscription_count: 0, user_count: null };
    return {
      occupied: rec.total > 0,
      subscription_count: rec.total,
      user_count: rec.members ? rec.members.size : null,
    };
  }

  /** Occupied channels of an app whose name starts with prefix: [name, user_count or null]. */
  list(app: string, prefix: string): [string, number | null][] {
    const out: [string, number | null][] = [];
    const chans = this.apps.get(app);
    if (!chans) return out;
    for (const [name, rec] of chans) {
      if (rec.total > 0 && name.startsWith(prefix)) out.push([name, rec.members ? rec.members.size : null]);
    }
    return out;
  }

  users(app: string, channel: string): unknown[] {
    const rec = this.get(app, channel);
    if (!rec?.members) return [];
    return Array.from(rec.members.values(), (m) => m.id);
  }

  members(app: string, channel: string): [unknown, unknown][] {
    const rec = this.get(app, channel);
    if (!rec?.members) return [];
    return Array.from(rec.members.values(), (m) => [m.id, m.info] as [unknown, unknown]);
  }

  /** Every member of every presence channel this shard owns: [app, channel, user_id, user_info]. */
  presenceEntries(): [string, string, unknown, unknown][] {
    const out: [string, string, unknown, unknown][] = [];
    for (const [app, chans] of this.apps) {
      for (const [channel, rec] of chans) {
        if (rec.members) for (const m of rec.members.values()) out.push([app, channel, m.id, m.info]);
      }
    }
    return out;
  }

  /** Every channel this shard owns with subscribers: [app, channel, subscription count]. */
  countEntries(): [string, string, number][] {
    const out: [string, string, number][] = [];
    for (const [app, chans] of this.apps) for (const [channel, rec] of chans) if (rec.total > 0) out.push([app, channel, rec.total]);
    return out;
  }

  private get(app: string, channel: string): ChannelRecord | undefined {
    return this.apps.get(app)?.get(channel);
  }

  private ensure(app: string, channel: string, presence: boolean): ChannelRecord {
    let chans = this.apps.get(app);
    if (!chans) this.apps.set(app, (chans = new Map<string, ChannelRecord>()));
    let rec = chans.get(channel);
    if (!rec) {
      rec = {
        perShard: new Int32Array(this.shards), total: 0,
        members: presence ? new Map<string, Member>() : null,
        sockets: presence ? new Map<string, JoinedSocket>() : null,
      };
      chans.set(channel, rec);
    }
    return rec;
  }

  /** Socket `socketId` of `shard` joins (member_added on the user's first connection, not to `except`). */
  private addSocket(
    app: string, channel: string, rec: ChannelRecord, shard: number, socketId: string, userId: unknown, userInfo: unknown, except: string,
  ): Map<string, Member> {
    const key = userKey(userId);
    const members = rec.members ?? (rec.members = new Map<string, Member>());
    const socks = rec.sockets ?? (rec.sockets = new Map<string, JoinedSocket>());
    let m = members.get(key);
    if (!m) {
      m = { id: userId, info: userInfo, byShard: new Map<number, number>(), conns: 0 };
      members.set(key, m);
    }
    m.conns++;
    m.byShard.set(shard, (m.byShard.get(shard) ?? 0) + 1);
    const s = socks.get(socketId);
    if (s) s.n++;
    else socks.set(socketId, { key, shard, n: 1 });
    // Counted first: a channel is occupied before its first member is added (webhook order).
    this.count(app, channel, rec, shard, 1);
    if (m.conns === 1) this.events.memberAdded(app, channel, userId, userInfo, except);
    return members;
  }

  /** `times` of socket `sid`'s joins leave (member_removed when its user has no connection left). */
  private removeSocket(app: string, channel: string, rec: ChannelRecord, sid: string, s: JoinedSocket, times: number): void {
    for (let i = 0; i < times; i++) {
      if (--s.n <= 0) rec.sockets!.delete(sid);
      const m = rec.members?.get(s.key);
      if (m) {
        m.conns--;
        const left = (m.byShard.get(s.shard) ?? 0) - 1;
        if (left > 0) m.byShard.set(s.shard, left);
        else m.byShard.delete(s.shard);
        if (m.conns <= 0) {
          rec.members!.delete(s.key);
          this.events.memberRemoved(app, channel, m.id);
        }
      }
      this.count(app, channel, rec, s.shard, -1);
    }
  }

  private count(app: string, channel: string, rec: ChannelRecord, shard: number, delta: number): void {
    const before = rec.total;
    if (delta < 0 && rec.perShard[shard] <= 0) return; // never below zero on a shard
    rec.perShard[shard] += delta;
    rec.total += delta;
    if (before === 0 && rec.total > 0) this.events.occupied(app, channel);
    this.events.countChanged(app, channel, Math.max(0, rec.total));
    if (rec.total <= 0) {
      const chans = this.apps.get(app)!;
      chans.delete(channel);
      if (chans.size === 0) this.apps.delete(app);
      if (before > 0) this.events.vacated(app, channel);
    }
  }
}

/** Which shard owns a channel (FNV-1a of app and channel, channels/topic.ts). */
export function ownerOf(app: string, channel: string, shards: number): number {
  return shards === 1 ? 0 : channelHash(app, channel) % shards;
}
