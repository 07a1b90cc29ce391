// Rebuilding the channel records of a crashed shard (docs/architecture.md, "Shard failure").
//
// Records live only on the owner shard, so when shard i dies the records of the channels
// hashed to i are lost. Every surviving shard still knows its own part of them:
//
//   survivor side   collectRestore(): per channel owned by i, the local subscription count
//                   and, for presence, each local member with its connection count there;
//                   PresenceShadows: per presence channel with local members, the member
//                   ids this shard's clients were told about (last snapshot + every member
//                   event since — every member event reaches every shard).
//   new owner side  Rebuild: applies the survivors' `restore` messages to its OwnerStore
//                   (no member_added, no occupied), defers every other owner operation
//                   until each survivor has sent its last batch (or a timeout), then sends
//                   each survivor, for each of its shadow sets, the member events its clients
//                   missed: member_removed for users no surviving connection holds any more
//                   (they lived only on the dead shard), member_added for a restored user
//                   the shard was never told about (its event was lost in the dead ring).
//
// So each client hears member_removed exactly once per user that is gone, and nothing
// for users that are still connected elsewhere. Records of channels owned by a *surviving*
// shard are fixed by that owner itself (OwnerStore.dropShard).

import type { ControlMsg, ReconcileChannel, RestoreChannel, RestoreMember } from '../bus/messages';
import { ownerOf, userKey, type OwnerStore } from './owner';

const keyOf = (app: string, channel: string) => app + ' ' + channel;

interface Shadow {
  app: string;
  channel: string;
  /** Joined local sockets on the channel; the set is dropped when this reaches 0. */
  local: number;
  /** userKey → user_id of the members this shard's clients know. */
  ids: Map<string, unknown>;
}

/** Survivor side: what this shard's clients know of each presence channel they are in. */
export class PresenceShadows {
  private readonly sets = new Map<string, Shadow>();

  /** A local socket joined: the owner's snapshot (it includes the joiner) is the newest state. */
  joined(app: string, channel: string, snapshot: readonly [unknown, unknown][]): void {
    const k = keyOf(app, channel);
    let s = this.sets.get(k);
    if (!s) this.sets.set(k, (s = { app, channel, local: 0, ids: new Map() }));
    s.local++;
    s.ids.clear();
    for (const [id] of snapshot) s.ids.set(userKey(id), id);
  }

  /** A joined local socket left the channel (unsubscribe or close). */
  left(app: string, channel: string): void {
    const k = keyOf(app, channel);
    const s = this.sets.get(k);
    if (s && --s.local <= 0) this.sets.delete(k);
  }

  /** A member event reached this shard (and its clients). */
  apply(app: string, channel: string, op: 'added' | 'removed', userId: unknown): void {
    const s = this.sets.get(keyOf(app, channel));
    if (!s) return;
    if (op === 'added') s.ids.set(userKey(userId), userId);
    else s.ids.delete(userKey(userId));
  }

  ids(app: string, channel: string): unknown[] | null {
    const s = this.sets.get(keyOf(app, channel));
    return s ? [...s.ids.values()] : null;
  }

  get size(): number {
    return this.sets.size;
  }
}

/** The part of a local subscription the rebuild needs (ws/types Subscription fits). */
export interface LocalSubscription {
  type: string;
  joined: boolean;
  userId: unknown;
  userInfo?: unknown;
}

/** One local socket: its socket_id, app id and its subscriptions by channel. */
export interface LocalSocket {
  id: string;
  app: string;
  channels: ReadonlyMap<string, LocalSubscription>;
}

/** Channels per `restore` message (a message bigger than half a ring is chunked by the ring anyway). */
export const RESTORE_BATCH = 500;

type Collected = ReconcileChannel & { byUser: Map<string, RestoreMember> | null };

/**
 * What this shard holds of the channels owned by shard `owner` (every owner: null), per
 * owner: subscriptions and, for presence, each local member with its sockets, the
 * shadow set, and (with `pending`) the sockets whose join is not answered yet. Shared
 * by the rebuild (collectRestore) and the periodic reconciliation (channels/reconcile.ts).
 */
export function collectLocal(
  sockets: Iterable<LocalSocket>, owner: number | null, shards: number, shadows: PresenceShadows, pending: boolean,
): Map<number, ReconcileChannel[]> {
  const byChannel = new Map<string, Collected & { owner: number }>();
  for (const sock of sockets) {
    for (const [channel, sub] of sock.channels) {
      if (!sub.joined && (!pending || sub.type !== 'presence')) continue;
      const o = ownerOf(sock.app, channel, shards);
      if (owner !== null && o !== owner) continue;
      const k = keyOf(sock.app, channel);
      let rc = byChannel.get(k);
      if (!rc) {
        const presence = sub.type === 'presence';
        rc = {
          owner: o, app: sock.app, channel, subs: 0, members: null, pending: presence && pending ? [] : null,
          shadow: presence ? shadows.ids(sock.app, channel) : null, byUser: presence ? new Map() : null,
        };
        byChannel.set(k, rc);
      }
      if (!sub.joined) {
        rc.pending!.push(sock.id);
        continue;
      }
      rc.subs++;
      if (rc.byUser) {
        const uk = userKey(sub.userId);
        const m = rc.byUser.get(uk);
        if (m) {
          m[2]++;
          m[3].push(sock.id);
        } else rc.byUser.set(uk, [sub.userId, sub.userInfo ?? null, 1, [sock.id]]);
      }
    }
  }
  const out = new Map<number, ReconcileChannel[]>();
  for (const rc of byChannel.values()) {
    let list = out.get(rc.owner);
    if (!list) out.set(rc.owner, (list = []));
    list.push({ app: rc.app, channel: rc.channel, subs: rc.subs, members: rc.byUser ? [...rc.byUser.values()] : null, shadow: rc.shadow, pending: rc.pending });
  }
  return out;
}

/**
 * Survivor side: what this shard holds of the channels owned by shard `owner`, as
 * `restore` messages (at least one; `last` on the final one). Subscriptions still waiting
 * for a presence answer are left out: their join is retried against the new owner.
 */
export function collectRestore(
  sockets: Iterable<LocalSocket>, owner: number, shards: number, shadows: PresenceShadows,
): Extract<ControlMsg, { type: 'restore' }>[] {
  const all: RestoreChannel[] = (collectLocal(sockets, owner, shards, shadows, false).get(owner) ?? [])
    .map(({ app, channel, subs, members, shadow }) => ({ app, channel, subs, members, shadow }));
  const out: Extract<ControlMsg, { type: 'restore' }>[] = [];
  for (let i = 0; i < all.length; i += RESTORE_BATCH) out.push({ type: 'restore', channels: all.slice(i, i + RESTORE_BATCH), last: false });
  if (out.length === 0) out.push({ type: 'restore', channels: [], last: true });
  else out[out.length - 1].last = true;
  return out;
}

type MemberMsg = Extract<ControlMsg, { type: 'member' }>;

/** A member event for one shard: (shard, member message). */
export type SendMember = (shard: number, msg: MemberMsg) => void;

/** Other nodes' members of a channel (channels/remote-presence.ts), or null on a single node. */
export type RemoteMembers = { members(app: string, channel: string): [unknown, unknown][] } | null;

/** Members now: this node's records and, in a cluster, the other nodes'. */
export function currentMembers(
  owner: Pick<OwnerStore, 'memberMap'>, remote: RemoteMembers, app: string, channel: string,
): ReadonlyMap<string, { id: unknown; info: unknown }> {
  const local = owner.memberMap(app, channel);
  const others = remote?.members(app, channel) ?? [];
  if (others.length === 0) return local;
  const all = new Map<string, { id: unknown; info: unknown }>(local);
  for (const [id, info] of others) if (!all.has(userKey(id))) all.set(userKey(id), { id, info });
  return all;
}

/**
 * The member events that bring a shard's clients from what they were told (`known`, its
 * shadow set: userKey → user_id) to `current`: member_removed for users gone, then
 * member_added for users they never heard of.
 */
export function missedMemberEvents(
  app: string, channel: string, known: ReadonlyMap<string, unknown>, current: ReadonlyMap<string, { id: unknown; info: unknown }>,
): MemberMsg[] {
  const out: MemberMsg[] = [];
  for (const [k, id] of known) {
    if (!current.has(k)) out.push({ type: 'member', op: 'removed', app, channel, userId: id, userInfo: null, except: '' });
  }
  for (const [k, m] of current) {
    if (!known.has(k)) out.push({ type: 'member', op: 'added', app, channel, userId: m.id, userInfo: m.info, except: '' });
  }
  return out;
}

/**
 * New owner side: collects the survivors' `restore` messages. Owner operations that arrive
 * meanwhile are deferred (defer()) so that the records first reach the state before the
 * crash (minus the dead shard's connections) and only then change; finish() runs when every
 * expected survivor sent its last batch, or after `timeoutMs` (a survivor that never answers
 * does not hold the channels hostage).
 */
export class Rebuild {
  private readonly waiting: Set<number>;
  /** channel key → survivor shard → its shadow set (userKey → user_id). */
  private readonly shadows = new Map<string, { app: string; channel: string; byShard: Map<number, Map<string, unknown>> }>();
  private readonly deferred: { msg: ControlMsg; from: number }[] = [];
  private timer: NodeJS.Timeout | null = null;
  private finished = false;
  /**
   * Runs once the records hold the restored state, before the deferred operations change
   * it (the webhook sync, webhooks/ledger.ts, reports exactly that state).
   */
  onRecords: (() => void) | null = null;
  /** Stats for the log line: channels and members restored, member events sent. */
  readonly stats = { channels: 0, members: 0, removed: 0, added: 0, timedOut: false };

  constructor(
    expected: readonly number[],
    private readonly owner: OwnerStore,
    private readonly sendMember: SendMember,
    private readonly replay: (msg: ControlMsg, from: number) => void,
    private readonly onDone: (r: Rebuild) => void,
    timeoutMs = 3000,
    /** In a cluster: the other nodes' members (the primary re-sent them before the restores). */
    private readonly remote: RemoteMembers = null,
  ) {
    this.waiting = new Set(expected);
    if (this.waiting.size === 0) {
      queueMicrotask(() => this.finish());
    } else {
      this.timer = setTimeout(() => {
        this.stats.timedOut = true;
        this.finish();
      }, timeoutMs);
      this.timer.unref();
    }
  }

  get done(): boolean {
    return this.finished;
  }

  /** Survivors that have not sent their last batch yet. */
  get pending(): number[] {
    return [...this.waiting];
  }

  restore(msg: Extract<ControlMsg, { type: 'restore' }>, from: number): void {
    if (this.finished) return; // too late (timed out): the deferred operations already ran
    for (const c of msg.channels) {
      this.owner.restore(c.app, c.channel, from, c.subs, c.members);
      this.stats.channels++;
      if (c.members) this.stats.members += c.members.length;
      if (c.shadow) {
        const k = keyOf(c.app, c.channel);
        let s = this.shadows.get(k);
        if (!s) this.shadows.set(k, (s = { app: c.app, channel: c.channel, byShard: new Map() }));
        const ids = new Map<string, unknown>();
        for (const id of c.shadow) ids.set(userKey(id), id);
        s.byShard.set(from, ids);
      }
    }
    if (msg.last) {
      this.waiting.delete(from);
      if (this.waiting.size === 0) this.finish();
    }
  }

  /** Shard `shard` died too (or was restarted) meanwhile: do not wait for it, forget its shadows. */
  peerGone(shard: number): void {
    if (this.finished) return;
    for (const s of this.shadows.values()) s.byShard.delete(shard);
    this.waiting.delete(shard);
    if (this.waiting.size === 0) queueMicrotask(() => this.finish());
  }

  /** An owner operation that must wait for the rebuild. */
  defer(msg: ControlMsg, from: number): void {
    this.deferred.push({ msg, from });
  }

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    for (const { app, channel, byShard } of this.shadows.values()) {
      const current = currentMembers(this.owner, this.remote, app, channel);
      for (const [shard, known] of byShard) {
        for (const m of missedMemberEvents(app, channel, known, current)) {
          if (m.op === 'removed') this.stats.removed++;
          else this.stats.added++;
          this.sendMember(shard, m);
        }
      }
    }
    this.shadows.clear();
    this.onRecords?.();
    for (const { msg, from } of this.deferred.splice(0)) this.replay(msg, from);
    this.onDone(this);
  }
}
