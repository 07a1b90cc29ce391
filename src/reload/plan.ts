// Config reload of the apps (SIGHUP), the plan: what changes between the running config
// and the one just read, and the counter slot of every app (apps/registry.ts). Pure: the
// primary's reloader (reload/primary.ts) sends the result to every shard (`apps`), which
// applies it (reload/shard.ts) and answers `apps_applied`.
//
// Only the apps are reloaded. Every other setting (ports, workers, drivers, limits of the
// server) is fixed at start: a difference there is named in the plan (`restartKeys`) and
// logged, not applied.

import type { AppSlots } from '../apps/registry';
import type { AppConfig, Config } from '../config/types';

/** Primary → shard: the apps now in force and their counter slots; answered by `apps_applied`. */
export interface AppsCommand {
  type: 'apps';
  apps: AppConfig[];
  slots: Record<string, number>;
}

/** Shard → primary: the new apps are in force; `closed` connections of removed or disabled apps; `error` if refused. */
export interface AppsApplied {
  type: 'apps_applied';
  closed: number;
  error: string | null;
}

export class ReloadError extends Error {
  readonly code = 'RC_ERR_RELOAD';
}

export interface ReloadPlan {
  apps: AppConfig[];
  /** Every app id ever held by this process → its slot (removed ids keep theirs). */
  slots: Record<string, number>;
  added: string[];
  /** Ids gone from the file: their connections are closed with 4001. */
  removed: string[];
  /** Ids whose settings changed (secret, limits, origins, webhooks, key, enabled). */
  changed: string[];
  /** Ids enabled before and disabled now: their connections are closed with 4003. */
  disabled: string[];
  /** Top-level settings other than `apps` that differ: they need a restart. */
  restartKeys: string[];
}

/** Top-level keys whose values differ (JSON), `apps` aside. */
function changedKeys(a: Config, b: Config): string[] {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  keys.delete('apps');
  return [...keys].filter((k) => JSON.stringify(a[k as keyof Config]) !== JSON.stringify(b[k as keyof Config])).sort();
}

/**
 * The plan from `current` to `next`. `capacity`: slots in the shared counters; a reload
 * that would need more (more distinct app ids than that over the life of the process)
 * throws ReloadError and changes nothing.
 */
export function planReload(current: Config, slots: AppSlots, next: Config, capacity: number): ReloadPlan {
  const out: Record<string, number> = { ...slots };
  let free = Object.values(out).reduce((m, s) => Math.max(m, s + 1), 0);
  const before = new Map(current.apps.map((a) => [a.id, a]));
  const plan: ReloadPlan = { apps: [...next.apps], slots: out, added: [], removed: [], changed: [], disabled: [], restartKeys: changedKeys(current, next) };
  for (const app of next.apps) {
    const old = before.get(app.id);
    if (!old) {
      plan.added.push(app.id);
      if (out[app.id] === undefined) {
        if (free >= capacity) {
          throw new ReloadError(`cannot add app ${JSON.stringify(app.id)}: this process has room for ${capacity} app ids in all; restart ringcast to add more`);
        }
        out[app.id] = free++;
      }
      continue;
    }
    before.delete(app.id);
    if (JSON.stringify(old) !== JSON.stringify(app)) plan.changed.push(app.id);
    if (old.enabled && !app.enabled) plan.disabled.push(app.id);
  }
  plan.removed = [...before.keys()];
  return plan;
}

/**
 * How many slots the shared counters get at start: the apps, plus room for apps added by
 * reloads; more with a database app store (`store`), whose apps come and go without a restart.
 */
export function slotCapacity(apps: number, store = false): number {
  return store ? apps * 2 + 65_536 : apps + 1024;
}
