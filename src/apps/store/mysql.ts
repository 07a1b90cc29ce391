// MySQL / MariaDB app store (app_manager.driver mysql): `mysql2`, a pool of two
// connections, every query bounded (STORE_TIMEOUT_MS). `database.mysql.host` may be the
// path of the server's Unix socket.

import { createPool, type FieldPacket, type ResultSetHeader, type RowDataPacket } from 'mysql2/promise';
import type { Config } from '../../config/types';
import { STORE_TIMEOUT_MS } from './port';
import { SqlAppStore, type SqlDialect } from './sql';

const quote = (id: string) => `\`${id.replace(/`/g, '``')}\``;

const dialect: SqlDialect = {
  quote,
  createTable: (t) => `CREATE TABLE ${quote(t)} (
  id varchar(255) NOT NULL PRIMARY KEY,
  \`key\` varchar(255) NOT NULL UNIQUE,
  secret varchar(255) NOT NULL,
  enabled tinyint(1) NOT NULL DEFAULT 1,
  options longtext NOT NULL,
  created_at timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
  updated_at timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP
)`,
  upsert: (t) => `INSERT INTO ${quote(t)} (id, \`key\`, secret, enabled, options) VALUES (?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE \`key\` = VALUES(\`key\`), secret = VALUES(secret), enabled = VALUES(enabled), options = VALUES(options)`,
};

export function mysqlStore(config: Config): SqlAppStore {
  const d = config.database.mysql;
  const socket = d.host.startsWith('/');
  const pool = createPool({
    ...(socket ? { socketPath: d.host } : { host: d.host, port: d.port }),
    user: d.username, password: d.password ?? undefined, database: d.database,
    connectionLimit: 2, connectTimeout: STORE_TIMEOUT_MS, supportBigNumbers: true,
  });
  // an idle connection that dies: the next query reports it
  pool.pool.on('connection', (c) => { c.on('error', () => undefined); });
  const name = `mysql ${socket ? d.host : `${d.host}:${d.port}`} database ${d.database} table ${d.table_name}`;
  return new SqlAppStore('mysql', name, {
    async query(sql, params) {
      const [rows, fields] = await pool.query<RowDataPacket[]>({ sql, timeout: STORE_TIMEOUT_MS }, params);
      return { rows, fields: fields.map((f: FieldPacket) => f.name) };
    },
    async execute(sql, params) {
      const [r] = await pool.query<ResultSetHeader>({ sql, timeout: STORE_TIMEOUT_MS }, params);
      return r.affectedRows;
    },
    close: () => pool.end(),
  }, dialect, d.table_name, config.app_manager.table_schema);
}
