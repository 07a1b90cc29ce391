// app_manager.driver postgres on a real PostgreSQL (test/helpers/postgres.ts): soketi's
// and sockudo's tables read as they are, ringcast's own, live changes, outage and
// recovery, start-up refused when unreachable (test/helpers/app-store-suite.ts).

import t from 'tap';
import { PostgresServer } from '../helpers/postgres';
import { appStoreSuite, connectResult } from '../helpers/app-store-suite';
import { eventually, startServer } from '../helpers/server';
import { freePort } from '../helpers/net';

const DB = 'ringcast';

async function createTable(pg: PostgresServer, table: string, columns: string, rows: Record<string, unknown>[]): Promise<void> {
  await pg.query(`CREATE TABLE ${table} (${columns})`, [], DB);
  for (const r of rows) {
    const cols = Object.keys(r);
    await pg.query(`INSERT INTO ${table} (${cols.map((c) => `"${c}"`).join(', ')}) VALUES (${cols.map((_, i) => `$${i + 1}`).join(', ')})`, Object.values(r), DB);
  }
}

t.test('postgres app store', async (t) => {
  const pg = await PostgresServer.start();
  t.teardown(() => pg.stop());
  await pg.query(`CREATE DATABASE ${DB}`);
  const closedPort = await freePort();
  // trust authentication: the password is sent only if the server asks for one
  const database = (table: string) => ({ host: pg.host, port: pg.port, username: 'postgres', password: 'unused', database: DB, table_name: table });
  appStoreSuite(t, {
    driver: 'postgres',
    config: (table) => ({ app_manager: { driver: 'postgres' }, database: { postgres: database(table) } }),
    env: (table) => ({
      APP_MANAGER_DRIVER: 'postgres', DATABASE_POSTGRES_HOST: pg.host, DATABASE_POSTGRES_PORT: String(pg.port),
      DATABASE_POSTGRES_USERNAME: 'postgres', DATABASE_POSTGRES_DATABASE: DB, DATABASE_POSTGRES_TABLE_NAME: table,
    }),
    // soketi 1.6.1 tests/fixtures/postgres_schema.sql
    soketiTable: (table, rows) => createTable(pg, table, `
      id varchar(255) PRIMARY KEY, key varchar(255) NOT NULL, secret varchar(255) NOT NULL,
      max_connections integer NOT NULL, enable_client_messages smallint NOT NULL, enabled smallint NOT NULL,
      max_backend_events_per_sec integer NOT NULL, max_client_events_per_sec integer NOT NULL, max_read_req_per_sec integer NOT NULL,
      webhooks json, max_presence_members_per_channel integer, max_presence_member_size_in_kb integer,
      max_channel_name_length integer, max_event_channels_at_once integer, max_event_name_length integer,
      max_event_payload_in_kb integer, max_event_batch_size integer, enable_user_authentication smallint NOT NULL`, rows),
    // sockudo 5.0.1 crates/sockudo-app pgsql_app_manager.rs (JSONB columns)
    sockudoTable: (table, rows) => createTable(pg, table, `
      id varchar(255) PRIMARY KEY, key varchar(255) UNIQUE NOT NULL, secret varchar(255) NOT NULL,
      max_connections integer NOT NULL, enable_client_messages boolean NOT NULL DEFAULT false, enabled boolean NOT NULL DEFAULT true,
      max_backend_events_per_second integer, max_client_events_per_second integer NOT NULL, max_read_requests_per_second integer,
      max_presence_members_per_channel integer, max_presence_member_size_in_kb integer, max_channel_name_length integer,
      max_event_channels_at_once integer, max_event_name_length integer, max_event_payload_in_kb integer, max_event_batch_size integer,
      enable_user_authentication boolean DEFAULT false, enable_watchlist_events boolean DEFAULT false,
      webhooks jsonb, allowed_origins jsonb, channel_delta_compression jsonb, policy jsonb, idempotency jsonb, connection_recovery jsonb,
      created_at timestamptz DEFAULT now(), updated_at timestamptz DEFAULT now()`, rows),
    pause: () => pg.pause(),
    resume: () => pg.resume(),
    unreachable: () => ({ app_manager: { driver: 'postgres' }, database: { postgres: { ...database('apps'), port: closedPort } } }),
    readRow: async (table, id) => (await pg.query(`SELECT * FROM ${table} WHERE id = $1`, [id], DB))[0] ?? null,
  });

  t.test('the app API on a trimmed soketi table: a field whose column is missing is refused, the others written', async (t) => {
    // soketi's columns without the optional limits (camelCase names, as soketi also reads them)
    await pg.query(`CREATE TABLE trimmed (id varchar(255) PRIMARY KEY, key varchar(255) NOT NULL, secret varchar(255) NOT NULL,
      "maxConnections" integer NOT NULL, enabled smallint NOT NULL, "enableClientMessages" smallint NOT NULL,
      "maxBackendEventsPerSec" integer NOT NULL, "maxClientEventsPerSec" integer NOT NULL, "maxReadReqPerSec" integer NOT NULL)`, [], DB);
    const token = 'console-token-trimmed';
    const srv = await startServer({
      apps: [], app_manager: { driver: 'postgres', table_schema: 'soketi' }, database: { postgres: database('trimmed') },
      console: { enabled: true, host: '127.0.0.1', port: 0, token },
    });
    t.teardown(() => srv.stop());
    const post = async (body: unknown) => {
      const r = await fetch(`http://127.0.0.1:${srv.server.consolePort}/api/app-store/apps`, {
        method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
      });
      return { status: r.status, body: await r.json() as Record<string, unknown> };
    };
    t.match(await post({ id: 't1', key: 't1-key', max_event_batch_size: 5 }), { status: 422, body: { error: /max_event_batch_size: the soketi table trimmed has no column max_event_batch_size/ } });
    t.same(await pg.query('SELECT id FROM trimmed', [], DB), [], 'nothing written');
    t.match(await post({ id: 't1', key: 't1-key', max_connections: 2 }), { status: 201 });
    t.match((await pg.query('SELECT * FROM trimmed', [], DB))[0], { id: 't1', maxConnections: 2, enableClientMessages: 1, maxReadReqPerSec: -1 }, 'the camelCase columns written');
    t.equal(await connectResult(srv, 't1-key'), 'ok');
  });

  t.test('app_manager.table_schema named; app_manager.cache.enabled false: the table is read every second', async (t) => {
    const srv = await startServer({
      apps: [], app_manager: { driver: 'postgres', table_schema: 'sockudo', cache: { enabled: false, ttl: 3600 } }, database: { postgres: database('applications') },
    });
    t.teardown(() => srv.stop());
    t.equal(srv.server.appStore?.status().table_schema, 'sockudo');
    await pg.query("INSERT INTO applications (id, key, secret, max_connections, max_client_events_per_second) VALUES ('k3', 'k3-key', 'k3-secret', 1, 10)", [], DB);
    await eventually(async () => (await connectResult(srv, 'k3-key')) === 'ok', 5000, 'the new row in force within about a second (ttl 3600 aside)');
  });
});
