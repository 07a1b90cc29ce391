// Lookup of the configured apps, one per thread. Lookups are by value (id/key strings),
// so a registry built from a structured clone of the config in a worker gives the same
// answers as the primary's. index(app) is the app's slot in the shared per-app counters
// (channels/counters.ts): at start, its position in config.apps (0..n-1); an app added by
// a config reload (SIGHUP, reload/plan.ts) gets the next free slot, and a slot is never
// reused for another id, so a connection counted before a reload releases the same slot.

import type { AppConfig } from '../config/types';

/** App id → slot in the shared per-app counters; the primary assigns them (reload/plan.ts). */
export type AppSlots = Readonly<Record<string, number>>;

/** The slots of the apps a process starts with: their positions in config.apps. */
export function initialSlots(apps: readonly Pick<AppConfig, 'id'>[]): Record<string, number> {
  const slots: Record<string, number> = {};
  apps.forEach((app, i) => { slots[app.id] = i; });
  return slots;
}

/** Where a database app store's lookups are counted (app_store_lookups_total; set by the shard). */
export interface LookupCounters {
  hit: { inc(): void };
  miss: { inc(): void };
  /** A lookup found while the store's last read failed: served from the apps read before. */
  stale: { inc(): void };
  storeDown(): boolean;
}

export class AppRegistry {
  private counters: LookupCounters | null = null;
  private apps: readonly AppConfig[] = [];
  private ids = new Map<string, AppConfig>();
  private keys = new Map<string, AppConfig>();
  private slots: AppSlots = {};

  constructor(apps: readonly AppConfig[], slots: AppSlots = initialSlots(apps)) {
    this.replace(apps, slots);
  }

  /**
   * Swaps in a new app list (a config reload). Indexes are built aside and swapped at
   * once, so a lookup never sees half of each. Throws, changing nothing, on a duplicate id
   * or key or an app without a slot.
   */
  replace(apps: readonly AppConfig[], slots: AppSlots): void {
    const ids = new Map<string, AppConfig>();
    const keys = new Map<string, AppConfig>();
    for (const app of apps) {
      if (ids.has(app.id)) throw new Error(`duplicate app id ${JSON.stringify(app.id)}`);
      if (keys.has(app.key)) throw new Error(`duplicate app key ${JSON.stringify(app.key)}`);
      if (slots[app.id] === undefined) throw new RangeError(`no counter slot for app id ${JSON.stringify(app.id)}`);
      ids.set(app.id, app);
      keys.set(app.key, app);
    }
    this.apps = apps;
    this.ids = ids;
    this.keys = keys;
    this.slots = slots;
  }

  byId(id: string): AppConfig | undefined {
    return this.ids.get(id);
  }

  byKey(key: string): AppConfig | undefined {
    return this.keys.get(key);
  }

  /** Counts the lookups of lookupKey / lookupId from now on (a database app store). */
  countLookups(c: LookupCounters): void {
    this.counters = c;
  }

  /** byKey for a client's request (a connection opening): counted as a hit, miss or stale lookup. */
  lookupKey(key: string): AppConfig | undefined {
    return this.counted(this.keys.get(key));
  }

  /** byId for a client's request (an HTTP API call): counted as a hit, miss or stale lookup. */
  lookupId(id: string): AppConfig | undefined {
    return this.counted(this.ids.get(id));
  }

  private counted(app: AppConfig | undefined): AppConfig | undefined {
    const c = this.counters;
    if (c !== null) {
      if (app === undefined) c.miss.inc();
      else if (c.storeDown()) c.stale.inc();
      else c.hit.inc();
    }
    return app;
  }

  /** Stable slot of the app (by id) in the shared counters. Throws for an app this registry does not hold. */
  index(app: Pick<AppConfig, 'id'>): number {
    const i = this.ids.has(app.id) ? this.slots[app.id] : undefined;
    if (i === undefined) throw new RangeError(`unknown app id ${JSON.stringify(app.id)}`);
    return i;
  }

  get size(): number {
    return this.apps.length;
  }

  all(): readonly AppConfig[] {
    return this.apps;
  }
}
