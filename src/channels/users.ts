// Watchlists, owner side: whether a user is online is decided once per process, by the
// user's owner shard (userOwnerOf: the owner of the channel '#server-to-user-<id>', so the
// same hash as every channel). The owner counts the user's signed-in connections per shard
// (apps with enable_watchlist_events only) and which shards have watchers of the user; on
// the first connection it tells those shards `online`, on the last one `offline`. The
// shards hand the events to their watching sockets (ws/watchlist.ts).
//
// Shard crash (docs/architecture.md, "Shard failure"):
//   surviving owner   dropShard(): the dead shard's watchers are forgotten, its connections
//                     leave; users it alone held go offline (told once, to the survivors).
//   replacement       the survivors' `user_restore` messages re-create the records of the
//                     users it owns (restore(), no event), each with the state the survivor
//                     last told its watchers (`known`); when the rebuild is done, finish()
//                     sends each survivor `offline` for users it was told were online and
//                     that only the dead shard held, and `online` for users whose event was
//                     lost in the dead rings — so every watcher hears each transition once.
//
// In a cluster (adapter.driver not local; adapter/watchlist.ts) the owner also keeps, per
// user, the other nodes where the user is online: a user is online while it has a
// connection here or on any other node. Node-local transitions (first / last connection
// on this node) go to the other nodes through the primary (UserClusterPort); the events
// to this node's watchers are decided on the cluster-wide state, so each watcher hears
// `online` when the first node gets the user and `offline` when the last one loses it.
// No thread, bus or socket here: test/channels/users.test.ts drives it directly.

import type { Logger } from 'pino';
import type { ControlMsg, UserRestore } from '../bus/messages';
import { SERVER_TO_USER_PREFIX } from '../protocol/channels';
import { ownerOf } from './owner';
import { logLimited } from '../log';

/** The shard that owns a user's online state. */
export function userOwnerOf(app: string, userId: string, shards: number): number {
  return ownerOf(app, SERVER_TO_USER_PREFIX + userId, shards);
}

export type WatchOp = 'online' | 'offline';
/** Sends one `watchlist` event to a shard. */
export type Notify = (shard: number, app: string, op: WatchOp, userIds: string[]) => void;

interface UserRecord {
  /** Signed-in connections, all shards of this node. */
  conns: number;
  byShard: Map<number, number>;
  /** Watchers of this user per shard. */
  watchers: Map<number, number>;
  /** The other nodes where the user is online (a cluster only). */
  remote: Set<string>;
}

/** Where node-local transitions go in a cluster (through the primary to the other nodes). */
export interface UserClusterPort {
  /** The user's first signed-in connection on this node (online) or its last one closed (offline). */
  changed(op: WatchOp, app: string, userId: string): void;
  /** After a rebuild: every user this shard owns that is online on this node. */
  state(users: [app: string, userId: string][]): void;
}

const isOnline = (rec: UserRecord) => rec.conns > 0 || rec.remote.size > 0;

export class UserStore {
  private readonly apps = new Map<string, Map<string, UserRecord>>();
  /**
   * A replacement shard rebuilding its records: no events (the other nodes' state can
   * arrive then; finishRebuild() tells the watchers what changed, once).
   */
  quiet = false;

  constructor(private readonly notify: Notify, private readonly cluster: UserClusterPort | null = null) {}

  /** A signed-in connection of `userId` was added (+1) or closed (-1) on `shard`. */
  conn(app: string, userId: string, shard: number, delta: number): void {
    const rec = delta > 0 ? this.ensure(app, userId) : this.get(app, userId);
    if (!rec) return;
    const here = rec.byShard.get(shard) ?? 0;
    if (delta < 0 && here <= 0) return; // never below zero on a shard
    this.setConns(app, userId, rec, shard, here + delta);
  }

  /**
   * A shard's periodic report (channels/reconcile.ts): its signed-in connections of the
   * users this shard owns. A count that differs from the records was changed by a
   * `user_conn` notice that a full ring dropped: set to the reported one, with the
   * transitions that follow (online / offline to the watchers). Returns how many differed.
   */
  reconcileShard(shard: number, reported: readonly (readonly [string, string, number])[]): number {
    const want = new Map<string, readonly [string, string, number]>();
    for (const u of reported) want.set(u[0] + '\0' + u[1], u);
    let fixed = 0;
    for (const [app, users] of [...this.apps]) {
      for (const [id, rec] of [...users]) {
        const k = app + '\0' + id;
        const n = want.get(k)?.[2] ?? 0;
        want.delete(k);
        if ((rec.byShard.get(shard) ?? 0) === n) continue;
        this.setConns(app, id, rec, shard, n);
        fixed++;
      }
    }
    for (const [app, id, n] of want.values()) {
      if (n <= 0) continue;
      this.setConns(app, id, this.ensure(app, id), shard, n);
      fixed++;
    }
    return fixed;
  }

  /** Sets the user's connections on `shard` to `n` (≥ 0), with the transitions that follow. */
  private setConns(app: string, userId: string, rec: UserRecord, shard: number, n: number): void {
    const was = isOnline(rec);
    const wasHere = rec.conns > 0;
    rec.conns += n - (rec.byShard.get(shard) ?? 0);
    if (n > 0) rec.byShard.set(shard, n);
    else rec.byShard.delete(shard);
    if (!wasHere && rec.conns > 0) this.cluster?.changed('online', app, userId);
    else if (wasHere && rec.conns === 0) this.cluster?.changed('offline', app, userId);
    if (was !== isOnline(rec)) this.tell(app, userId, rec, was ? 'offline' : 'online');
    this.tidy(app, userId, rec);
  }

  /** A watcher on `shard` watches `userIds`: counted; returns those online now. */
  watch(app: string, userIds: readonly string[], shard: number): string[] {
    const online: string[] = [];
    for (const id of userIds) {
      const rec = this.ensure(app, id);
      rec.watchers.set(shard, (rec.watchers.get(shard) ?? 0) + 1);
      if (isOnline(rec)) online.push(id);
    }
    return online;
  }

  unwatch(app: string, userIds: readonly string[], shard: number): void {
    for (const id of userIds) {
      const rec = this.get(app, id);
      if (!rec) continue;
      const n = (rec.watchers.get(shard) ?? 0) - 1;
      if (n > 0) rec.watchers.set(shard, n);
      else rec.watchers.delete(shard);
      this.tidy(app, id, rec);
    }
  }

  /**
   * Shard `shard` died: its watchers are gone and its connections with them. Users left
   * without a connection go offline; the other shards' watchers are told, once per shard.
   */
  dropShard(shard: number): void {
    const out = new Grouped();
    for (const [app, users] of [...this.apps]) {
      for (const [id, rec] of [...users]) {
        rec.watchers.delete(shard);
        const c = rec.byShard.get(shard);
        if (c !== undefined) {
          rec.byShard.delete(shard);
          rec.conns -= c;
          if (rec.conns <= 0) {
            rec.conns = 0;
            this.cluster?.changed('offline', app, id);
            if (!this.quiet && rec.remote.size === 0) for (const s of rec.watchers.keys()) out.add(s, app, 'offline', id);
          }
        }
        this.tidy(app, id, rec);
      }
    }
    out.send(this.notify);
  }

  /** Rebuild: a survivor's part of a user this (replacement) shard owns. No event. */
  restore(u: UserRestore, shard: number): void {
    if (u.conns <= 0 && u.watchers <= 0) return;
    const rec = this.ensure(u.app, u.userId);
    if (u.conns > 0) {
      rec.byShard.set(shard, (rec.byShard.get(shard) ?? 0) + u.conns);
      rec.conns += u.conns;
    }
    if (u.watchers > 0) rec.watchers.set(shard, (rec.watchers.get(shard) ?? 0) + u.watchers);
  }

  /** Another node's transition of the user (a cluster). */
  remote(app: string, userId: string, node: string, op: WatchOp): void {
    if (op === 'online') {
      const rec = this.ensure(app, userId);
      const was = isOnline(rec);
      rec.remote.add(node);
      if (!was) this.tell(app, userId, rec, 'online');
      return;
    }
    const rec = this.get(app, userId);
    if (!rec || !rec.remote.delete(node)) return;
    if (!isOnline(rec)) this.tell(app, userId, rec, 'offline');
    this.tidy(app, userId, rec);
  }

  /** Node `node` stopped or was declared failed: its users leave; those left nowhere go offline. */
  dropNode(node: string): void {
    const out = new Grouped();
    for (const [app, users] of [...this.apps]) {
      for (const [id, rec] of [...users]) {
        if (!rec.remote.delete(node)) continue;
        if (!this.quiet && !isOnline(rec)) for (const s of rec.watchers.keys()) out.add(s, app, 'offline', id);
        this.tidy(app, id, rec);
      }
    }
    out.send(this.notify);
  }

  /** Whether the user is online anywhere in the cluster. */
  online(app: string, userId: string): boolean {
    const rec = this.get(app, userId);
    return rec !== undefined && isOnline(rec);
  }

  /** The users online on this node (signed-in connections here). */
  localOnline(): [app: string, userId: string][] {
    const out: [string, string][] = [];
    for (const [app, users] of this.apps) for (const [id, rec] of users) if (rec.conns > 0) out.push([app, id]);
    return out;
  }

  /** Users with a record (tests and logs). */
  get size(): number {
    let n = 0;
    for (const users of this.apps.values()) n += users.size;
    return n;
  }

  private tell(app: string, userId: string, rec: UserRecord, op: WatchOp): void {
    if (this.quiet) return;
    for (const s of rec.watchers.keys()) this.notify(s, app, op, [userId]);
  }

  private get(app: string, userId: string): UserRecord | undefined {
    return this.apps.get(app)?.get(userId);
  }

  private ensure(app: string, userId: string): UserRecord {
    let users = this.apps.get(app);
    if (!users) this.apps.set(app, (users = new Map<string, UserRecord>()));
    let rec = users.get(userId);
    if (!rec) users.set(userId, (rec = { conns: 0, byShard: new Map(), watchers: new Map(), remote: new Set() }));
    return rec;
  }

  /** A record with neither a connection nor a watcher is dropped. */
  private tidy(app: string, userId: string, rec: UserRecord): void {
    if (rec.conns > 0 || rec.watchers.size > 0 || rec.remote.size > 0) return;
    const users = this.apps.get(app)!;
    users.delete(userId);
    if (users.size === 0) this.apps.delete(app);
  }
}

/** Events to several shards, grouped per (shard, app, op) into one message each. */
class Grouped {
  private readonly byKey = new Map<string, { shard: number; app: string; op: WatchOp; ids: string[] }>();

  add(shard: number, app: string, op: WatchOp, id: string): void {
    const k = `${shard} ${op} ${app}`;
    let g = this.byKey.get(k);
    if (!g) this.byKey.set(k, (g = { shard, app, op, ids: [] }));
    g.ids.push(id);
  }

  send(notify: Notify): void {
    for (const g of this.byKey.values()) notify(g.shard, g.app, g.op, g.ids);
  }
}

/** Owner messages of the watchlists (the rest of ControlMsg is not this service's). */
export type UserMsg = Extract<ControlMsg, { type: 'user_conn' | 'watch' | 'unwatch' | 'user_restore' | 'remote_user' }>;
const USER_TYPES: ReadonlySet<string> = new Set<UserMsg['type']>(['user_conn', 'watch', 'unwatch', 'user_restore', 'remote_user']);

export function isUserMsg(msg: ControlMsg): msg is UserMsg {
  return USER_TYPES.has(msg.type);
}

export interface UserOwnerDeps {
  /** Writes a control message to a shard (bus.control; throws BusFullError). */
  control(to: number, msg: ControlMsg): void;
  /** Answers a request (bus.reply). */
  reply(to: number, req: number, body: unknown): void;
  log: Logger;
  /** In a cluster: where node-local transitions go (null or absent: a single node). */
  cluster?: UserClusterPort | null;
  /** A replacement shard: quiet until finishRebuild(). */
  rebuilding?: boolean;
}

export interface UserOwner {
  readonly store: UserStore;
  handle(msg: UserMsg, from: number): void;
  /** Replacement shard: the survivors' `user_restore` are in; tell each what its watchers missed. */
  finishRebuild(): void;
  /** A survivor died too during the rebuild: nothing to tell it. */
  peerGone(shard: number): void;
  /** Another node stopped or was declared failed (`remote_node_gone`). */
  nodeGone(node: string): void;
}

export function createUserOwner(deps: UserOwnerDeps): UserOwner {
  const { log } = deps;
  const notify: Notify = (shard, app, op, userIds) => {
    try {
      deps.control(shard, { type: 'watchlist', app, op, userIds });
    } catch (err) {
      logLimited(log, 'error', { err, shard, op, users: userIds.length }, 'watchlist event not delivered: internal queue full');
    }
  };
  const store = new UserStore(notify, deps.cluster ?? null);
  store.quiet = deps.rebuilding === true;
  /** Rebuild: survivor shard → `${app} ${userId}` → [app, userId, known]. */
  const known = new Map<number, Map<string, [string, string, boolean]>>();

  return {
    store,
    handle(msg, from) {
      switch (msg.type) {
        case 'user_conn':
          return store.conn(msg.app, msg.userId, msg.shard, msg.delta);
        case 'watch':
          return deps.reply(from, msg.req, store.watch(msg.app, msg.userIds, from));
        case 'unwatch':
          return store.unwatch(msg.app, msg.userIds, msg.shard);
        case 'remote_user':
          return store.remote(msg.app, msg.userId, msg.node, msg.op);
        case 'user_restore':
          for (const u of msg.users) {
            store.restore(u, from);
            if (u.known === null || u.watchers <= 0) continue;
            let m = known.get(from);
            if (!m) known.set(from, (m = new Map<string, [string, string, boolean]>()));
            m.set(`${u.app} ${u.userId}`, [u.app, u.userId, u.known]);
          }
          return;
      }
    },
    finishRebuild() {
      store.quiet = false;
      // the other nodes learn what this node's state is now (the primary sends the changes)
      deps.cluster?.state(store.localOnline());
      const out = new Grouped();
      for (const [shard, users] of known) {
        for (const [app, id, wasOnline] of users.values()) {
          const now = store.online(app, id);
          if (wasOnline !== now) out.add(shard, app, now ? 'online' : 'offline', id);
        }
      }
      known.clear();
      out.send(notify);
    },
    peerGone(shard) {
      known.delete(shard);
    },
    nodeGone(node) {
      store.dropNode(node);
    },
  };
}
