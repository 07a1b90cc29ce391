// Watchlists, the shard's side (apps with enable_watchlist_events): a socket that signs in
// with `user_data.watchlist` gets `pusher_internal:watchlist_events`
// {"events":[{"name":"online"|"offline","user_ids":[…]}]} — at sign-in, the watched users
// online then; afterwards each watched user's first signed-in connection (online) and the
// close of its last one (offline), wherever they are. Whether a user is online is decided
// by the user's owner shard (channels/users.ts); this file tells the owners about this
// shard's signed-in sockets and watchers, and hands the owners' events to the watchers.
// Across nodes the owners also hear of other nodes' users: adapter/watchlist.ts.
//
// Order: a new watcher asks each owner of its watched users for the ones online (`watch`).
// An event from that owner that reaches this shard before the answer describes an older
// state than the answer (one owner → this shard is one FIFO ring), so the watcher skips
// the events of an owner it is still waiting for: the answer says it all.

import type { UserRestore } from '../bus/messages';
import { BusPeerRestartedError } from '../bus/errors';
import type { UserDirectory } from '../channels/user-directory';
import type { WatchOp } from '../channels/users';
import { metersFor } from '../metrics/meters';
import type { MetricsSink } from '../metrics/types';
import { Ev } from '../protocol/events';
import { frame } from '../protocol/frames';
import type { Logger } from 'pino';
import { sendFrame } from './send';
import type { Socket, SocketData, WatchState } from './types';

/** Most user ids in one watchlist (Pusher's limit). */
export const MAX_WATCHLIST = 100;

/** The watchlist of a user_data object: the distinct ids, or an error message. */
export function parseWatchlist(user: Record<string, unknown>): string[] | string {
  const w = user.watchlist;
  if (w === undefined) return [];
  if (!Array.isArray(w) || w.some((id) => typeof id !== 'string' || id.length === 0)) {
    return 'user_data.watchlist must be an array of non-empty user id strings';
  }
  if (w.length > MAX_WATCHLIST) return `user_data.watchlist has ${w.length} user ids, more than the ${MAX_WATCHLIST} allowed`;
  return [...new Set(w as string[])];
}

interface Entry {
  app: string;
  userId: string;
  /** What this shard's watchers were last told about the user (null: nothing yet). */
  online: boolean | null;
  sockets: Set<Socket>;
}

export interface Watchlists {
  /** A socket signed in (the first time) as `userId`, watching `watchlist`. */
  signedIn(ws: Socket, d: SocketData, userId: string, watchlist: string[]): void;
  /** The socket closed. `tell`: false while the shard stops or crashes (the owners are not told). */
  closed(d: SocketData, tell: boolean): void;
  /** A `watchlist` event from the owner `from`. */
  deliver(app: string, op: WatchOp, userIds: string[], from: number): void;
  /** Survivor side of a rebuild: what this shard holds of the users the dead shard owned. */
  collectRestore(dead: number, sockets: Iterable<Socket>): UserRestore[];
}

export function createWatchlists(deps: { users: UserDirectory; log: Logger; metrics: MetricsSink; out(canonical: string): string }): Watchlists {
  const { users, log } = deps;
  const meters = metersFor(deps.metrics);
  const entries = new Map<string, Entry>();
  const keyOf = (app: string, userId: string) => app + ' ' + userId;

  function send(ws: Socket, appId: string, op: WatchOp, ids: string[]): void {
    const data = JSON.stringify({ events: [{ name: op, user_ids: ids }] });
    sendFrame(meters, ws, appId, Ev.WatchlistEvents, frame(deps.out(Ev.WatchlistEvents), data));
  }

  /** Asks `owner` which of `ids` are online; one retry when that owner was replaced meanwhile. */
  function ask(ws: Socket, d: SocketData, w: WatchState, app: string, owner: number, ids: string[], retry: boolean): void {
    w.status.set(owner, 'pending');
    users.watch(app, owner, ids).then((online) => {
      if (d.closed || d.watch !== w) return;
      w.status.set(owner, 'ok');
      const on = new Set(online);
      for (const id of ids) {
        const e = entries.get(keyOf(app, id));
        if (e) e.online = on.has(id);
      }
      if (online.length > 0) send(ws, app, 'online', online);
    }, (err: Error) => {
      if (d.closed || d.watch !== w) return;
      if (retry && err instanceof BusPeerRestartedError) return ask(ws, d, w, app, owner, ids, false);
      w.status.set(owner, 'failed');
      log.error({ err, owner, users: ids.length }, 'watchlist: the owner of these users did not answer; their events may be missed');
    });
  }

  return {
    signedIn(ws, d, userId, watchlist) {
      const app = d.app!.id;
      users.connection(app, userId, 1);
      if (watchlist.length === 0) return;
      const w: WatchState = { ws, ids: watchlist, status: new Map() };
      d.watch = w;
      const byOwner = new Map<number, string[]>();
      for (const id of watchlist) {
        const k = keyOf(app, id);
        let e = entries.get(k);
        if (!e) entries.set(k, (e = { app, userId: id, online: null, sockets: new Set() }));
        e.sockets.add(ws);
        const o = users.ownerOf(app, id);
        const list = byOwner.get(o);
        if (list) list.push(id);
        else byOwner.set(o, [id]);
      }
      for (const [owner, ids] of byOwner) ask(ws, d, w, app, owner, ids, true);
    },

    closed(d, tell) {
      if (!d.app?.enable_watchlist_events) return;
      const app = d.app.id;
      if (tell && d.userId !== null) users.connection(app, d.userId, -1);
      const w = d.watch;
      if (!w) return;
      d.watch = null;
      const byOwner = new Map<number, string[]>();
      for (const id of w.ids) {
        const k = keyOf(app, id);
        const e = entries.get(k);
        if (e) {
          e.sockets.delete(w.ws);
          if (e.sockets.size === 0) entries.delete(k);
        }
        const o = users.ownerOf(app, id);
        // counted by the owner once asked (a pending question is answered before this arrives)
        if (w.status.get(o) === 'failed') continue;
        const list = byOwner.get(o);
        if (list) list.push(id);
        else byOwner.set(o, [id]);
      }
      if (tell) for (const [owner, ids] of byOwner) users.unwatch(app, owner, ids);
    },

    deliver(app, op, userIds, from) {
      const per = new Map<Socket, string[]>();
      for (const id of userIds) {
        const e = entries.get(keyOf(app, id));
        if (!e) continue;
        e.online = op === 'online';
        for (const ws of e.sockets) {
          if (ws.getUserData().watch?.status.get(from) === 'pending') continue;
          const list = per.get(ws);
          if (list) list.push(id);
          else per.set(ws, [id]);
        }
      }
      for (const [ws, ids] of per) send(ws, app, op, ids);
    },

    collectRestore(dead, sockets) {
      const byUser = new Map<string, UserRestore>();
      const rec = (app: string, userId: string) => {
        const k = keyOf(app, userId);
        let u = byUser.get(k);
        if (!u) byUser.set(k, (u = { app, userId, conns: 0, watchers: 0, known: null }));
        return u;
      };
      for (const ws of sockets) {
        const d = ws.getUserData();
        if (d.closed || !d.app?.enable_watchlist_events || d.userId === null) continue;
        if (users.ownerOf(d.app.id, d.userId) === dead) rec(d.app.id, d.userId).conns++;
      }
      for (const e of entries.values()) {
        if (users.ownerOf(e.app, e.userId) !== dead) continue;
        // Watchers still waiting for the dead owner are left out: they ask the replacement.
        let n = 0;
        for (const ws of e.sockets) if (ws.getUserData().watch?.status.get(dead) === 'ok') n++;
        if (n === 0) continue;
        const u = rec(e.app, e.userId);
        u.watchers = n;
        u.known = e.online;
      }
      return [...byUser.values()];
    },
  };
}
