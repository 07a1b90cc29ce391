// The owner shard's records of the channels it owns (owner = hash(app, channel) % shards).
// Only the owner decides the transitions that must happen exactly once per process:
// occupied / vacated and presence member_added / member_removed.

import type { ChannelInfo, PresenceJoinReply } from '../bus/messages';
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

interface ChannelRecord {
  perShard: Int32Array;
  total: number;
  members: Map<string, Member> | null;
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
    const members = rec.members ?? (rec.members = new Map<string, Member>());
    let m = known;
    if (!m) {
      m = { id: userId, info: userInfo, byShard: new Map<number, number>(), conns: 0 };
      members.set(key, m);
    }
    m.conns++;
    m.byShard.set(shard, (m.byShard.get(shard) ?? 0) + 1);
    // Counted first: a channel is occupied before its first member is added (webhook order).
    this.count(app, channel, rec, shard, 1);
    if (m.conns === 1) this.events.memberAdded(app, channel, userId, userInfo, socketId);
    // The snapshot includes the joining user: pusher-js expects `me` in the member list.
    const snapshot: [unknown, unknown][] = [];
    for (const mem of members.values()) snapshot.push([mem.id, mem.info]);
    return { ok: true, members: snapshot };
  }

  leave(app: string, channel: string, shard: number, key: string): void {
    const rec = this.get(app, channel);
    if (!rec) return;
    const m = rec.members?.get(key);
    if (m) {
      m.conns--;
      const left = (m.byShard.get(shard) ?? 0) - 1;
      if (left > 0) m.byShard.set(shard, left);
      else m.byShard.delete(shard);
      if (m.conns <= 0) {
        rec.members!.delete(key);
        this.events.memberRemoved(app, channel, m.id);
      }
    }
    this.count(app, channel, rec, shard, -1);
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
  restore(app: string, channel: string, shard: number, subs: number, members: [unknown, unknown, number][] | null): void {
    if (subs <= 0) return;
    const fresh = !this.get(app, channel);
    const rec = this.ensure(app, channel, members !== null);
    if (fresh) this.events.restored?.(app, channel);
    if (members) {
      const map = rec.members ?? (rec.members = new Map<string, Member>());
      for (const [id, info, conns] of members) {
        const key = userKey(id);
        let m = map.get(key);
        if (!m) map.set(key, (m = { id, info, byShard: new Map<number, number>(), conns: 0 }));
        m.conns += conns;
        m.byShard.set(shard, (m.byShard.get(shard) ?? 0) + conns);
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
      rec = { perShard: new Int32Array(this.shards), total: 0, members: presence ? new Map<string, Member>() : null };
      chans.set(channel, rec);
    }
    return rec;
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
