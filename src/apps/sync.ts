// The primary's copy of a database app store (app_manager.driver postgres, mysql,
// dynamodb): the whole apps table is read at start (unreachable: start-up fails naming
// the store), then again every app_manager.cache.ttl seconds (every second with the cache
// off), on an app API write, and when another node announces a change. A read that
// differs from the apps in force is applied as a config reload is (reload/primary.ts):
// new apps connect, disabled ones' connections close with 4003, deleted ones' with 4001,
// changed limits apply to what comes next. Every shard answers from its registry in
// memory, so a lookup (connect, API call) never waits for the database and a flood of
// unknown keys costs it nothing. A failed read keeps the apps in force (app_store_stale,
// a warning at most every STALE_LOG_MS).

import type { Logger } from 'pino';
import { validateStoredApp } from '../config/apps';
import type { AppConfig, Config } from '../config/types';
import { AppStoreUnavailable, createAppStore, type AppStore, type TableSchema } from './store';

/** The metrics the app store keeps (metrics/types.ts MetricsSink is one: apps/ sits below metrics/). */
export interface MetricsSink {
  inc(name: 'app_store_reads_total' | 'app_store_rows_skipped_total', labels?: Record<string, string>): void;
  set(name: 'app_store_apps' | 'app_store_stale', labels: undefined, value: number): void;
  observe(name: 'app_store_read_duration_seconds', labels: undefined, value: number): void;
}

/** A failing store is logged at most this often. */
const STALE_LOG_MS = 30_000;

export interface StoreStatus {
  driver: string;
  store: string;
  table_schema: TableSchema;
  /** false while the last read failed (the apps read before are served). */
  ok: boolean;
  apps: number;
  /** Unix ms of the last read that succeeded. */
  last_read: number;
  error: string | null;
}

/**
 * The apps of the store that can be used beside the configured ones: valid (else logged
 * and skipped), with an id and a key no configured app or earlier row has.
 */
export function usableApps(rows: { raw: Record<string, unknown>; label: string }[], configured: readonly AppConfig[], config: Config, log: Logger, metrics: MetricsSink,
  checked?: { before: ReadonlyMap<string, AppConfig>; now: Map<string, AppConfig> }): AppConfig[] {
  const ids = new Set(configured.map((a) => a.id));
  const keys = new Set(configured.map((a) => a.key));
  const out: AppConfig[] = [];
  for (const row of rows) {
    // a row as it was at the last read is not checked again: the app checked then is kept
    const sig = checked ? JSON.stringify(row.raw) : '';
    const known = checked?.before.get(sig);
    const { app, issues } = known ? { app: known, issues: [] } : validateStoredApp(row.raw, config, row.label);
    if (app && checked) checked.now.set(sig, app);
    const clash = app && (ids.has(app.id) ? `id ${JSON.stringify(app.id)}` : keys.has(app.key) ? `key ${JSON.stringify(app.key)}` : null);
    if (!app || clash) {
      metrics.inc('app_store_rows_skipped_total');
      log.warn({ row: row.label, issues: app ? [`another app (configured, or an earlier row) has the ${clash}`] : issues }, 'app store: a row is not used');
      continue;
    }
    ids.add(app.id);
    keys.add(app.key);
    out.push(app);
  }
  return out;
}

export class AppSync {
  private stored: AppConfig[];
  private configured: AppConfig[];
  /** The apps checked at the last read, by their row (JSON): an unchanged row is not checked again. */
  private checked = new Map<string, AppConfig>();
  private timer: NodeJS.Timeout | null = null;
  private reading: Promise<void> | null = null;
  private lastRead = Date.now();
  private error: string | null = null;
  private loggedAt = 0;
  private apply: ((apps: AppConfig[]) => Promise<unknown>) | null = null;
  /** Tells the other nodes of a cluster to read the store now (main.ts sets it with a cluster adapter). */
  announce: (() => void) | null = null;
  /** Int32[1] the shards read for /up (shard/init.ts appStoreUp): 1 while the last read succeeded. */
  readonly up = new SharedArrayBuffer(4);
  private readonly upFlag = new Int32Array(this.up);

  private constructor(readonly store: AppStore, private readonly schema: TableSchema, private readonly config: Config,
    stored: AppConfig[], private readonly log: Logger, private readonly metrics: MetricsSink) {
    this.configured = [...config.apps];
    this.stored = stored;
    metrics.set('app_store_apps', undefined, stored.length);
    metrics.set('app_store_stale', undefined, 0);
    Atomics.store(this.upFlag, 0, 1);
  }

  /** Opens the store of `config` and reads its apps; rejects (AppStoreUnavailable, naming the store) when it cannot. */
  static async open(config: Config, log: Logger, metrics: MetricsSink, store: AppStore | null = createAppStore(config)): Promise<AppSync | null> {
    if (!store) return null;
    try {
      const schema = await store.open();
      const rows = await AppSync.timed(metrics, store.list());
      const checked = { before: new Map<string, AppConfig>(), now: new Map<string, AppConfig>() };
      const sync = new AppSync(store, schema, config, usableApps(rows, config.apps, config, log, metrics, checked), log, metrics);
      sync.checked = checked.now;
      log.info({ store: store.name, table_schema: schema, apps: sync.stored.length }, 'app store: apps read');
      return sync;
    } catch (err) {
      await store.close();
      if (err instanceof AppStoreUnavailable) throw err;
      throw new AppStoreUnavailable(`app store ${store.name}: ${(err as Error).message}`);
    }
  }

  private static async timed<T>(metrics: MetricsSink, p: Promise<T>): Promise<T> {
    const t0 = performance.now();
    try {
      const r = await p;
      metrics.inc('app_store_reads_total', { result: 'ok' });
      return r;
    } catch (err) {
      metrics.inc('app_store_reads_total', { result: 'error' });
      throw err;
    } finally {
      metrics.observe('app_store_read_duration_seconds', undefined, (performance.now() - t0) / 1000);
    }
  }

  /** After a write through ringcast: read the table now, and have every other node do so (`announce`). */
  async changed(): Promise<void> {
    await this.refresh();
    this.announce?.();
  }

  /** The store's apps in force (the configured ones aside). */
  storedApps(): readonly AppConfig[] {
    return this.stored;
  }

  /** The configured apps, then the store's: what the server starts with. */
  apps(): AppConfig[] {
    return [...this.configured, ...this.stored];
  }

  /** `next` (a config just read again, SIGHUP) with the store's apps beside its own. */
  withStored(next: Config): Config {
    this.configured = [...next.apps];
    this.stored = this.stored.filter((a) => !next.apps.some((c) => c.id === a.id || c.key === a.key));
    return { ...next, apps: this.apps() };
  }

  /** Reads the table every cache.ttl seconds (1 with the cache off) and hands a changed app list to `apply`. */
  start(apply: (apps: AppConfig[]) => Promise<unknown>): void {
    this.apply = apply;
    const c = this.config.app_manager.cache;
    this.timer = setInterval(() => void this.refresh(), (c.enabled ? c.ttl : 1) * 1000);
    this.timer.unref();
  }

  /** Reads the table now (one read at a time: a call during a read waits for it and reads again). */
  refresh(): Promise<void> {
    const next = (this.reading ?? Promise.resolve()).then(() => this.readOnce());
    this.reading = next;
    return next.finally(() => {
      if (this.reading === next) this.reading = null;
    });
  }

  private async readOnce(): Promise<void> {
    let rows;
    try {
      rows = await AppSync.timed(this.metrics, this.store.list());
    } catch (err) {
      this.error = (err as Error).message;
      this.metrics.set('app_store_stale', undefined, 1);
      Atomics.store(this.upFlag, 0, 0);
      if (Date.now() - this.loggedAt >= STALE_LOG_MS) {
        this.loggedAt = Date.now();
        this.log.warn({ store: this.store.name, error: this.error, apps: this.stored.length }, 'app store unreachable: the apps read before are served');
      }
      return;
    }
    if (this.error !== null) this.log.info({ store: this.store.name }, 'app store reachable again');
    this.error = null;
    this.loggedAt = 0;
    this.lastRead = Date.now();
    this.metrics.set('app_store_stale', undefined, 0);
    Atomics.store(this.upFlag, 0, 1);
    const checked = { before: this.checked, now: new Map<string, AppConfig>() };
    const stored = usableApps(rows, this.configured, this.config, this.log, this.metrics, checked);
    this.checked = checked.now;
    const same = stored.length === this.stored.length && stored.every((a, i) => a === this.stored[i]);
    if (same || JSON.stringify(stored) === JSON.stringify(this.stored)) return;
    this.stored = stored;
    this.metrics.set('app_store_apps', undefined, stored.length);
    await this.apply?.(this.apps()).catch((err: unknown) => this.log.error({ error: (err as Error).message }, 'app store: the apps read could not be applied'));
  }

  status(): StoreStatus {
    return {
      driver: this.store.driver, store: this.store.name, table_schema: this.schema, ok: this.error === null,
      apps: this.stored.length, last_read: this.lastRead, error: this.error,
    };
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.reading?.catch(() => undefined);
    await this.store.close();
  }
}
