// The app store of the SQL databases (postgres.ts, mysql.ts give the connection and the
// dialect): reads the whole table, detects its shape from its columns, writes ringcast's own.

import { AppStoreUnavailable, withTimeout, type AppStore, type StoredApp, type TableSchema } from './port';
import { appToRow, detectSchema, rowToApp } from './tables';

export interface SqlResult {
  rows: Record<string, unknown>[];
  fields: string[];
}

export interface SqlConnection {
  /** `?` placeholders are numbered by the dialect. */
  query(sql: string, params?: unknown[]): Promise<SqlResult>;
  /** Affected rows of a write. */
  execute(sql: string, params?: unknown[]): Promise<number>;
  close(): Promise<void>;
}

export interface SqlDialect {
  quote(identifier: string): string;
  /** CREATE TABLE of ringcast's own table. */
  createTable(table: string): string;
  /** Insert-or-replace of one row of ringcast's own table (id, key, secret, enabled, options). */
  upsert(table: string): string;
}

export class SqlAppStore implements AppStore {
  private schema: TableSchema | null = null;

  constructor(
    readonly driver: 'postgres' | 'mysql',
    readonly name: string,
    private readonly conn: SqlConnection,
    private readonly dialect: SqlDialect,
    private readonly table: string,
    private readonly wanted: 'auto' | TableSchema,
  ) {}

  private run<T>(what: string, p: Promise<T>): Promise<T> {
    return withTimeout(this.name, what, p);
  }

  async open(): Promise<TableSchema> {
    const t = this.dialect.quote(this.table);
    const r = await this.run('reading the table\'s columns', this.conn.query(`SELECT * FROM ${t} WHERE 1 = 0`));
    const found = detectSchema(r.fields);
    if (this.wanted !== 'auto') {
      this.schema = this.wanted;
      return this.wanted;
    }
    if (!found) {
      throw new AppStoreUnavailable(`app store ${this.name}: the columns of table ${this.table} (${r.fields.join(', ')}) are none of ringcast's, soketi's or sockudo's; set app_manager.table_schema, or create ringcast's own table with \`ringcast app-store init\``);
    }
    this.schema = found;
    return found;
  }

  async list(): Promise<StoredApp[]> {
    const schema = this.schema ?? await this.open();
    const r = await this.run('reading the apps', this.conn.query(`SELECT * FROM ${this.dialect.quote(this.table)}`));
    return r.rows.map((row) => {
      const raw = rowToApp(schema, row);
      return { raw, label: `${this.driver} table ${this.table}, id ${JSON.stringify(String(raw.id))}` };
    });
  }

  async init(): Promise<void> {
    await this.run('creating the table', this.conn.execute(this.dialect.createTable(this.table)));
    this.schema = 'ringcast';
  }

  private async ownTable(): Promise<void> {
    const schema = this.schema ?? await this.open();
    if (schema !== 'ringcast') throw new AppStoreUnavailable(`app store ${this.name}: table ${this.table} has ${schema}'s columns; ringcast writes only its own table (\`ringcast app-store init\`)`);
  }

  async put(app: Record<string, unknown>): Promise<void> {
    await this.ownTable();
    const r = appToRow(app);
    await this.run('writing an app', this.conn.execute(this.dialect.upsert(this.table), [r.id, r.key, r.secret, r.enabled, r.options]));
  }

  async remove(id: string): Promise<boolean> {
    await this.ownTable();
    const n = await this.run('deleting an app', this.conn.execute(`DELETE FROM ${this.dialect.quote(this.table)} WHERE id = ?`, [id]));
    return n > 0;
  }

  close(): Promise<void> {
    return this.conn.close().catch(() => undefined);
  }
}
