// The shard's reconciliation timer (channels/reconcile.ts, docs/owner-reconciliation.md):
// every bus.owner_reconcile_interval_ms it reports its subscriptions to every owner shard
// (itself included: handled at once), sends again the subscription_count events its own
// channels could not deliver, and re-sends the webhook state of the channels it owns
// (the primary's ledger re-decides them: webhooks/ledger.ts). Timer work only.

import type { Logger } from 'pino';
import type { Bus } from '../bus/bus';
import { BusFullError } from '../bus/errors';
import type { ReconcileUser } from '../bus/messages';
import { userOwnerOf } from '../channels/users';
import type { OwnerService } from '../channels/owner-service';
import type { PresenceShadows } from '../channels/rebuild';
import { reconcileReports, type MemberTally } from '../channels/reconcile';
import { logLimited } from '../log';
import { metersFor } from '../metrics/meters';
import type { MetricsSink } from '../metrics/types';
import type { Socket } from '../ws/types';
import { localSockets } from './failover';

export interface ReconcilerDeps {
  /** 0: off. */
  intervalMs: number;
  shards: number;
  bus: Pick<Bus, 'control'>;
  sockets: ReadonlyMap<string, Socket>;
  shadows: PresenceShadows;
  tally: MemberTally;
  owner: Pick<OwnerService, 'tick'>;
  log: Logger;
  metrics: MetricsSink;
  /** False once the shard stops or crashed: nothing is reported. */
  active(): boolean;
  /** Sends the owned channels' webhook state to the primary; null without webhooks (or in a cluster). */
  syncWebhooks: (() => void) | null;
}

export function startReconciler(deps: ReconcilerDeps): { stop(): void } {
  if (deps.intervalMs <= 0) return { stop: () => undefined };
  const meters = metersFor(deps.metrics);
  const timer = setInterval(() => {
    if (!deps.active()) return;
    const reports = reconcileReports(localSockets(deps.sockets), deps.shards, deps.shadows, deps.tally);
    for (let o = 0; o < reports.length; o++) reports[o].users = [];
    // watchlists: signed-in connections per user, to the user's owner (channels/users.ts)
    const conns = new Map<string, ReconcileUser>();
    for (const ws of deps.sockets.values()) {
      const d = ws.getUserData();
      if (d.closed || d.userId === null || !d.app?.enable_watchlist_events) continue;
      const k = d.app.id + '\0' + d.userId;
      const u = conns.get(k);
      if (u) u[2]++;
      else conns.set(k, [d.app.id, d.userId, 1]);
    }
    for (const u of conns.values()) reports[userOwnerOf(u[0], u[1], deps.shards)].users!.push(u);
    for (let o = 0; o < reports.length; o++) {
      try {
        deps.bus.control(o, reports[o]);
      } catch (err) {
        if (err instanceof BusFullError) meters.busFullAt('owner');
        logLimited(deps.log, 'error', { err, shard: o }, 'reconciliation report not sent (internal queue full): the next one follows in one interval');
      }
    }
    deps.owner.tick();
    deps.syncWebhooks?.();
  }, deps.intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
