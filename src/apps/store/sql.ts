// The app store of the SQL databases (postgres.ts, mysql.ts give the connection and the
// dialect): reads the whole table, detects its shape from its columns, and writes it in that
// shape (peer-rows.ts for soketi's and sockudo's: unmapped columns kept).

import { AppStoreUnavailable, withTimeout, type AppStore, type StoredApp, type TableSchema } from './port';
import { appToPeerRow, columnNames, presentColumns } from './peer-rows';
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
  /** The table's columns by snake_case name. */
  private columns = new Map<string, string>();

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
    this.columns = columnNames(r.fields);
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

  async put(app: Record<string, unknown>): Promise<void> {
    const schema = this.schema ?? await this.open();
    if (schema === 'ringcast') {
      const r = appToRow(app);
      await this.run('writing an app', this.conn.execute(this.dialect.upsert(this.table), [r.id, r.key, r.secret, r.enabled, r.options]));
      return;
    }
    // a peer's table: the columns ringcast maps are set, every other one is kept
    const row = appToPeerRow(schema, app, `${this.driver} table ${this.table}`, false);
    const label = `the ${schema} table ${this.table}`;
    const q = (c: string) => this.dialect.quote(c);
    const t = q(this.table);
    const idCol = q(this.idColumn());
    const found = await this.run('reading an app', this.conn.query(`SELECT 1 FROM ${t} WHERE ${idCol} = ?`, [row.columns.id]));
    if (found.rows.length > 0) {
      const cols = presentColumns(row, this.columns, label, false).filter(([c]) => c !== this.idColumn());
      await this.run('writing an app', this.conn.execute(
        `UPDATE ${t} SET ${cols.map(([c]) => `${q(c)} = ?`).join(', ')} WHERE ${idCol} = ?`, [...cols.map(([, v]) => v), row.columns.id]));
      return;
    }
    const cols = presentColumns(row, this.columns, label, true);
    await this.run('writing an app', this.conn.execute(
      `INSERT INTO ${t} (${cols.map(([c]) => q(c)).join(', ')}) VALUES (${cols.map(() => '?').join(', ')})`, cols.map(([, v]) => v)));
  }

  /** The id column's own name (`id` in every shape; a peer's table may spell it `app_id` or `AppId`). */
  private idColumn(): string {
    return this.columns.get('id') ?? 'id';
  }

  async remove(id: string): Promise<boolean> {
    if (!this.schema) await this.open();
    const n = await this.run('deleting an app', this.conn.execute(`DELETE FROM ${this.dialect.quote(this.table)} WHERE ${this.dialect.quote(this.idColumn())} = ?`, [id]));
    return n > 0;
  }

  close(): Promise<void> {
    return this.conn.close().catch(() => undefined);
  }
}
