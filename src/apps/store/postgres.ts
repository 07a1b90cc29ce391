// PostgreSQL app store (app_manager.driver postgres): `pg`, a pool of two connections,
// every query bounded (STORE_TIMEOUT_MS). `database.postgres.host` may be a directory
// holding the server's Unix socket.

import { Pool } from 'pg';
import type { Config } from '../../config/types';
import { STORE_TIMEOUT_MS } from './port';
import { SqlAppStore, type SqlDialect } from './sql';

const quote = (id: string) => `"${id.replace(/"/g, '""')}"`;

const dialect: SqlDialect = {
  quote,
  createTable: (t) => `CREATE TABLE ${quote(t)} (
  id varchar(255) PRIMARY KEY,
  key varchar(255) NOT NULL UNIQUE,
  secret varchar(255) NOT NULL,
  enabled boolean NOT NULL DEFAULT true,
  options text NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
)`,
  upsert: (t) => `INSERT INTO ${quote(t)} (id, key, secret, enabled, options) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO UPDATE SET key = EXCLUDED.key, secret = EXCLUDED.secret, enabled = EXCLUDED.enabled, options = EXCLUDED.options, updated_at = now()`,
};

/** `?` → `$1`, `$2`, … */
function numbered(sql: string): string {
  let i = 0;
  return sql.replace(/\?/g, () => `$${++i}`);
}

export function postgresStore(config: Config): SqlAppStore {
  const d = config.database.postgres;
  const pool = new Pool({
    host: d.host, port: d.port, user: d.username, password: d.password ?? undefined, database: d.database,
    max: 2, connectionTimeoutMillis: STORE_TIMEOUT_MS, query_timeout: STORE_TIMEOUT_MS, statement_timeout: STORE_TIMEOUT_MS,
    idleTimeoutMillis: 30_000,
  });
  pool.on('error', () => undefined); // an idle connection that dies: the next query reports it
  const name = `postgres ${d.host}:${d.port} database ${d.database} table ${d.table_name}`;
  return new SqlAppStore('postgres', name, {
    async query(sql, params) {
      const r = await pool.query(numbered(sql), params);
      return { rows: r.rows as Record<string, unknown>[], fields: r.fields.map((f) => f.name) };
    },
    async execute(sql, params) {
      const r = await pool.query(numbered(sql), params);
      return r.rowCount ?? 0;
    },
    close: () => pool.end(),
  }, dialect, d.table_name, config.app_manager.table_schema);
}
