// Read-only lookup of the configured apps, built once per thread from the config.
// Lookups are by value (id/key strings), so a registry built from a structured clone
// of the config in a worker gives the same answers and the same indexes as the main
// thread's: index(app) is the app's position in config.apps (0..n-1), stable for the
// life of the process and used to address per-app slots in shared counters.

import type { AppConfig } from '../config/types';

export class AppRegistry {
  private readonly apps: readonly AppConfig[];
  private readonly ids = new Map<string, number>();
  private readonly keys = new Map<string, number>();

  constructor(apps: readonly AppConfig[]) {
    this.apps = apps;
    apps.forEach((app, i) => {
      if (this.ids.has(app.id)) throw new Error(`duplicate app id ${JSON.stringify(app.id)}`);
      if (this.keys.has(app.key)) throw new Error(`duplicate app key ${JSON.stringify(app.key)}`);
      this.ids.set(app.id, i);
      this.keys.set(app.key, i);
    });
  }

  byId(id: string): AppConfig | undefined {
    const i = this.ids.get(id);
    return i === undefined ? undefined : this.apps[i];
  }

  byKey(key: string): AppConfig | undefined {
    const i = this.keys.get(key);
    return i === undefined ? undefined : this.apps[i];
  }

  /** Stable 0..n-1 index of the app (by id). Throws for an app this registry does not hold. */
  index(app: Pick<AppConfig, 'id'>): number {
    const i = this.ids.get(app.id);
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
