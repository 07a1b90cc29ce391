// app_manager.driver mysql on a real MariaDB (test/helpers/mariadb.ts): soketi's and
// sockudo's tables read as they are, ringcast's own, live changes, outage and recovery,
// start-up refused when unreachable (test/helpers/app-store-suite.ts).

import t from 'tap';
import { MariaDbServer } from '../helpers/mariadb';
import { appStoreSuite } from '../helpers/app-store-suite';
import { freePort } from '../helpers/net';

const DB = 'ringcast';

async function createTable(db: MariaDbServer, table: string, columns: string, rows: Record<string, unknown>[]): Promise<void> {
  await db.query(`CREATE TABLE \`${table}\` (${columns})`, [], DB);
  for (const r of rows) {
    const cols = Object.keys(r);
    await db.query(`INSERT INTO \`${table}\` (${cols.map((c) => `\`${c}\``).join(', ')}) VALUES (${cols.map(() => '?').join(', ')})`, Object.values(r), DB);
  }
}

t.test('mysql app store', async (t) => {
  const db = await MariaDbServer.start();
  t.teardown(() => db.stop());
  await db.query(`CREATE DATABASE ${DB}`);
  const closedPort = await freePort();
  // the server runs without grant tables: the password is not checked
  const database = (table: string) => ({ host: '127.0.0.1', port: db.port, username: 'root', password: 'unused', database: DB, table_name: table });
  appStoreSuite(t, {
    driver: 'mysql',
    config: (table) => ({ app_manager: { driver: 'mysql' }, database: { mysql: database(table) } }),
    // through the server's Unix socket (database.mysql.host: a path)
    env: (table) => ({
      APP_MANAGER_DRIVER: 'mysql', DATABASE_MYSQL_HOST: db.socket,
      DATABASE_MYSQL_USERNAME: 'root', DATABASE_MYSQL_DATABASE: DB, DATABASE_MYSQL_TABLE_NAME: table,
    }),
    // soketi 1.6.1 tests/fixtures/mysql_schema.sql
    soketiTable: (table, rows) => createTable(db, table, `
      \`id\` varchar(255) NOT NULL, \`key\` varchar(255) NOT NULL, \`secret\` varchar(255) NOT NULL,
      \`max_connections\` integer(10) NOT NULL, \`enable_client_messages\` tinyint(1) NOT NULL, \`enabled\` tinyint(1) NOT NULL,
      \`max_backend_events_per_sec\` integer(10) NOT NULL, \`max_client_events_per_sec\` integer(10) NOT NULL,
      \`max_read_req_per_sec\` integer(10) NOT NULL, \`webhooks\` json,
      \`max_presence_members_per_channel\` integer(10) NULL, \`max_presence_member_size_in_kb\` integer(10) NULL,
      \`max_channel_name_length\` integer(10) NULL, \`max_event_channels_at_once\` integer(10) NULL,
      \`max_event_name_length\` integer(10) NULL, \`max_event_payload_in_kb\` integer(10) NULL,
      \`max_event_batch_size\` integer(10) NULL, \`enable_user_authentication\` tinyint(1) NOT NULL,
      PRIMARY KEY (\`id\`)`, rows),
    // sockudo 5.0.1 crates/sockudo-app mysql_app_manager.rs
    sockudoTable: (table, rows) => createTable(db, table, `
      id VARCHAR(255) PRIMARY KEY, \`key\` VARCHAR(255) UNIQUE NOT NULL, secret VARCHAR(255) NOT NULL,
      max_connections INT UNSIGNED NOT NULL, enable_client_messages BOOLEAN NOT NULL DEFAULT FALSE, enabled BOOLEAN NOT NULL DEFAULT TRUE,
      max_backend_events_per_second INT UNSIGNED NULL, max_client_events_per_second INT UNSIGNED NOT NULL,
      max_read_requests_per_second INT UNSIGNED NULL, max_presence_members_per_channel INT UNSIGNED NULL,
      max_presence_member_size_in_kb INT UNSIGNED NULL, max_channel_name_length INT UNSIGNED NULL,
      max_event_channels_at_once INT UNSIGNED NULL, max_event_name_length INT UNSIGNED NULL,
      max_event_payload_in_kb INT UNSIGNED NULL, max_event_batch_size INT UNSIGNED NULL,
      enable_user_authentication BOOLEAN NULL DEFAULT FALSE, enable_watchlist_events BOOLEAN NULL DEFAULT FALSE,
      webhooks JSON NULL, allowed_origins JSON NULL, channel_delta_compression JSON NULL, policy JSON NULL,
      idempotency JSON NULL, connection_recovery JSON NULL,
      created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP`, rows),
    pause: () => db.pause(),
    resume: () => db.resume(),
    unreachable: () => ({ app_manager: { driver: 'mysql' }, database: { mysql: { ...database('apps'), port: closedPort } } }),
    readRow: async (table, id) => (await db.query(`SELECT * FROM \`${table}\` WHERE id = ?`, [id], DB) as Record<string, unknown>[])[0] ?? null,
  });
});
