// A shard's part in surviving a shard crash (docs/architecture.md, "Shard failure").
//
//  - crash: an uncaught exception or unhandled rejection in this thread. The thread must
//    not end while it holds uWS sockets (the whole process would abort), so it closes its
//    listener and every client socket (clients see an abnormal close and reconnect), stops
//    its bus, tells the primary `crashed` and ends by itself once uWS has no socket left.
//    Closing sockets send no unsub / presence_leave: the rebuild accounts for them.
//  - rewire (survivor): another shard crashed; swap the bus ends for it, drop its counts
//    from the records this shard owns, re-announce to the replacement the local
//    subscriptions of the channels it owns (channels/rebuild.ts), answer `rewired`.
//  - rebuild (replacement): apply the survivors' `restore` messages, deferring every other
//    owner operation until they are all in, then tell the primary `restored`.
//  - test hook: `test_crash` (only with RINGCAST_TEST_HOOKS=1) throws for real.

import type { Logger } from 'pino';
import type { Bus } from '../bus/bus';
import type { ControlMsg } from '../bus/messages';
import type { OwnerStore } from '../channels/owner';
import { PresenceShadows, RESTORE_BATCH, Rebuild, collectRestore, type LocalSocket } from '../channels/rebuild';
import type { MemberTally } from '../channels/reconcile';
import type { RemotePresence } from '../channels/remote-presence';
import type { UserOwner } from '../channels/users';
import type { Watchlists } from '../ws/watchlist';
import type { Socket } from '../ws/types';
import type { PrimaryCommand, ShardEvent, ShardInit } from './init';
import { logLimited } from '../log';

/** Control messages answered from the owner records: deferred while a rebuild runs. */
const OWNER_OPS: ReadonlySet<ControlMsg['type']> = new Set<ControlMsg['type']>([
  'sub', 'presence_join', 'presence_leave', 'channel_info', 'channels_list', 'members',
  'user_conn', 'watch', 'unwatch', 'reconcile',
]);

/** This shard's sockets with subscriptions, as the rebuild and the reconciliation read them. */
export function localSockets(sockets: ReadonlyMap<string, Socket>): LocalSocket[] {
  const out: LocalSocket[] = [];
  for (const ws of sockets.values()) {
    const d = ws.getUserData();
    if (d.app && d.channels.size > 0) out.push({ id: d.id, app: d.app.id, channels: d.channels });
  }
  return out;
}

export interface FailoverDeps {
  init: ShardInit;
  bus: Bus;
  owner: OwnerStore;
  sockets: Map<string, Socket>;
  log: Logger;
  post(e: ShardEvent): void;
  /** The shard's control handler (deferred owner operations are replayed through it). */
  onControl(msg: ControlMsg, from: number): void;
  /** Marks the shard as going down, closes the listener and every socket (abnormally), stops the bus. */
  closeEverything(): void;
  /** Lets the thread end (closes parentPort): called after `crashed` is posted. */
  endThread(): void;
  /** True once a graceful shutdown has begun. */
  stopping(): boolean;
  /** Watchlists: the owner records of this shard's users, and its watchers (channels/users.ts). */
  users?: { owner: UserOwner; watchlists: Watchlists };
  /** In a cluster: the other nodes' members of the channels this shard owns (channels/remote-presence.ts). */
  remote?: RemotePresence;
  /** Replacement shard: the records are rebuilt, deferred operations not yet applied (the webhook sync). */
  onRebuilt?(): void;
  /** Member events per pair of shards (channels/reconcile.ts): counted here, reset with a restarted peer. */
  tally?: MemberTally;
}

export interface Failover {
  readonly shadows: PresenceShadows;
  /** True when a rebuild is running and took the message (it is replayed later). */
  defer(msg: ControlMsg, from: number): boolean;
  /** A `restore` message from a survivor (ignored when no rebuild runs). */
  restore(msg: Extract<ControlMsg, { type: 'restore' }>, from: number): void;
  /** Lifecycle commands of this module (`rewire`, `test_crash`); false for others. */
  command(cmd: PrimaryCommand): boolean;
  /** The test hook armed a throw in the next WebSocket message callback (consumes it). */
  throwInWsMessage(): void;
  readonly crashed: boolean;
}

export function createFailover(deps: FailoverDeps): Failover {
  const { init, bus, owner, log } = deps;
  const shadows = new PresenceShadows();
  let crashed = false;
  let wsMessageBomb = false;

  const sendMember = (shard: number, msg: Extract<ControlMsg, { type: 'member' }>) => {
    try {
      bus.control(shard, msg);
      if (deps.tally) deps.tally.sent[shard]++;
    } catch (err) {
      logLimited(log, 'error', { err, channel: msg.channel, shard }, 'rebuild: member event not delivered (internal queue full)');
    }
  };

  let rebuild: Rebuild | null = null;
  if (init.restoreFrom) {
    // The users' records are complete when the channels' are (each survivor sends its
    // `user_restore` before its last `restore`): their missed events go out before any
    // deferred operation is replayed, as the member events do.
    let usersDone = false;
    const finishUsers = () => {
      if (usersDone) return;
      usersDone = true;
      deps.users?.owner.finishRebuild();
    };
    rebuild = new Rebuild(init.restoreFrom, owner, sendMember, (msg, from) => {
      finishUsers();
      deps.onControl(msg, from);
    }, (r) => {
      finishUsers();
      const s = r.stats;
      if (s.timedOut) log.warn({ missing: r.pending }, 'rebuild: some shards did not re-announce in time; going on without them');
      log.info(s, 'rebuild done: channel records of this shard restored from the surviving shards');
      deps.post({ type: 'restored', ...s });
    }, undefined, deps.remote ?? null);
    rebuild.onRecords = () => deps.onRebuilt?.();
  }

  function rewire(cmd: Extract<PrimaryCommand, { type: 'rewire' }>): void {
    const dead = cmd.shard;
    if (crashed || deps.stopping()) return deps.post({ type: 'rewired', shard: dead });
    // 1. fresh rings: nothing more from the dead thread; its pending answers are rejected
    //    (in a later microtask, so a retried presence join goes out after the restore below)
    bus.rewire(dead, cmd.toPeer, cmd.fromPeer, cmd.doorbell);
    deps.tally?.reset(dead);
    // 2. the dead shard's connections leave the records this shard owns (member_removed once)
    owner.dropShard(dead);
    deps.users?.owner.store.dropShard(dead);
    rebuild?.peerGone(dead);
    deps.users?.owner.peerGone(dead);
    // 3. re-announce what this shard holds of the channels the replacement owns
    const msgs: ControlMsg[] = [];
    const users = deps.users?.watchlists.collectRestore(dead, deps.sockets.values()) ?? [];
    for (let i = 0; i < users.length; i += RESTORE_BATCH) msgs.push({ type: 'user_restore', users: users.slice(i, i + RESTORE_BATCH) });
    msgs.push(...collectRestore(localSockets(deps.sockets), dead, init.shards, shadows));
    let channels = 0;
    for (const m of msgs) {
      if (m.type === 'restore') channels += m.channels.length;
      try {
        bus.control(dead, m);
      } catch (err) {
        log.error({ err, shard: dead }, 'rebuild: restore batch not sent (internal queue full)');
      }
    }
    log.info({ shard: dead, channels, users: users.length }, 'shard restarted: rewired and re-announced local subscriptions');
    deps.post({ type: 'rewired', shard: dead });
  }

  function crash(err: unknown, origin: string): void {
    if (crashed) {
      log.error({ err, origin }, 'error while the shard is going down after a crash');
      return;
    }
    crashed = true;
    log.fatal({ err, origin }, 'shard crashed: closing its listener and sockets; the primary starts a replacement');
    if (deps.stopping()) {
      // A graceful shutdown is already draining this shard: cut the clients, let it finish.
      try {
        deps.closeEverything();
      } catch (e) {
        log.error({ err: e }, 'closing after a crash failed');
      }
      return;
    }
    try {
      deps.closeEverything();
    } catch (e) {
      log.error({ err: e }, 'closing after a crash failed');
    }
    deps.post({ type: 'crashed', error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) });
    deps.endThread();
  }

  process.on('uncaughtException', (err, origin) => crash(err, origin));
  process.on('unhandledRejection', (reason) => crash(reason, 'unhandledRejection'));

  return {
    shadows,
    get crashed() {
      return crashed;
    },
    defer(msg, from) {
      if (!rebuild || rebuild.done || !OWNER_OPS.has(msg.type)) return false;
      rebuild.defer(msg, from);
      return true;
    },
    restore(msg, from) {
      if (rebuild) rebuild.restore(msg, from);
      else log.warn({ from }, 'restore message without a rebuild: ignored');
    },
    command(cmd) {
      if (cmd.type === 'rewire') {
        rewire(cmd);
        return true;
      }
      if (cmd.type === 'test_crash') {
        if (!init.testHooks) {
          log.warn('test_crash ignored: RINGCAST_TEST_HOOKS is off');
          return true;
        }
        if (cmd.how === 'ws_message') wsMessageBomb = true;
        else setTimeout(() => { throw new Error(`test crash of shard ${init.shardId} (RINGCAST_TEST_HOOKS)`); }, 0);
        return true;
      }
      return false;
    },
    throwInWsMessage() {
      if (!wsMessageBomb) return;
      wsMessageBomb = false;
      throw new Error(`test crash of shard ${init.shardId} in a WebSocket message callback (RINGCAST_TEST_HOOKS)`);
    },
  };
}
