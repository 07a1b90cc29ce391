// The app store port: where apps live when `app_manager.driver` is a database (postgres,
// mysql, dynamodb). One file per backend; index.ts picks one. A store reads whole tables
// (list) in one of three shapes (tables.ts): ringcast's own, soketi's or sockudo's, and
// writes every one of them (the app API; peer-rows.ts maps an app to a peer's columns).
// `ringcast app-store init` creates only ringcast's own.

export type TableSchema = 'ringcast' | 'soketi' | 'sockudo';

/** One row or item, as ringcast app fields (tables.ts), and how messages name it. */
export interface StoredApp {
  raw: Record<string, unknown>;
  /** e.g. `postgres table apps, id "7"`. */
  label: string;
}

export interface AppStore {
  readonly driver: 'postgres' | 'mysql' | 'dynamodb';
  /** Names the store in messages: driver, address, database and table. */
  readonly name: string;
  /** Connects and detects the table's shape (app_manager.table_schema auto); rejects naming the store. */
  open(): Promise<TableSchema>;
  /** Every app of the table. */
  list(): Promise<StoredApp[]>;
  /** Creates ringcast's own table; rejects if a table of that name exists. */
  init(): Promise<void>;
  /**
   * Writes (inserts or replaces) an app: in ringcast's own table id, key, secret, enabled and
   * the rest as options; in a peer's table the columns it maps, every other column kept.
   * Rejects with AppStoreRefused (nothing written) for a field the table cannot hold.
   */
  put(app: Record<string, unknown>): Promise<void>;
  /** Deletes an app by id; false if there was none. */
  remove(id: string): Promise<boolean>;
  close(): Promise<void>;
}

/** The store did not answer, or answered with an error (message names the store). */
export class AppStoreUnavailable extends Error {
  readonly code = 'RC_ERR_APP_STORE';
}

/** Every query of a store gives up after this (ms): a store that hangs is a store that is down. */
export const STORE_TIMEOUT_MS = 3000;

/** Rejects with AppStoreUnavailable naming `store` when `p` takes longer than STORE_TIMEOUT_MS. */
export function withTimeout<T>(store: string, what: string, p: Promise<T>, ms = STORE_TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new AppStoreUnavailable(`app store ${store}: ${what} did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).catch((err: unknown) => {
    if (err instanceof AppStoreUnavailable) throw err;
    throw new AppStoreUnavailable(`app store ${store}: ${what} failed: ${(err as Error).message || String(err)}`);
  }).finally(() => clearTimeout(timer));
}
