// The app store keys (app_manager.driver, table_schema, cache; database.postgres, mysql,
// dynamodb): defaults, environment overrides, clear errors for bad values, no apps needed
// in the file with a database driver, and `ringcast app-store init` refusing the array driver.

import t from 'tap';
import { loadConfig } from '../../src/config';
import { initAppStore } from '../../src/apps/init';
import { detectSchema, rowToApp, snake } from '../../src/apps/store/tables';

t.test('defaults, and the environment overrides every key', async (t) => {
  const d = loadConfig({ env: {}, overrides: { apps: [{ id: 'a', key: 'k', secret: 's' }] } });
  t.same(d.app_manager, { driver: 'array', table_schema: 'auto', cache: { enabled: true, ttl: 60 } });
  t.match(d.database.postgres, { host: '127.0.0.1', port: 5432, username: 'postgres', password: null, database: 'ringcast', table_name: 'apps' });
  t.match(d.database.dynamodb, { region: 'us-east-1', table_name: 'apps', endpoint_url: null });
  const c = loadConfig({
    env: {
      APP_MANAGER_DRIVER: 'mysql', APP_MANAGER_TABLE_SCHEMA: 'soketi', APP_MANAGER_CACHE_ENABLED: 'false', APP_MANAGER_CACHE_TTL: '5',
      DATABASE_MYSQL_HOST: 'db', DATABASE_MYSQL_PORT: '3307', DATABASE_MYSQL_USERNAME: 'u', DATABASE_MYSQL_PASSWORD: 'p',
      DATABASE_MYSQL_DATABASE: 'd', DATABASE_MYSQL_TABLE_NAME: 'applications',
      DATABASE_POSTGRES_HOST: 'pg', DATABASE_POSTGRES_PORT: '5433', DATABASE_POSTGRES_USERNAME: 'pu', DATABASE_POSTGRES_PASSWORD: 'pp',
      DATABASE_POSTGRES_DATABASE: 'pd', DATABASE_POSTGRES_TABLE_NAME: 'pt',
      DATABASE_DYNAMODB_REGION: 'eu-west-1', DATABASE_DYNAMODB_TABLE_NAME: 'dt', DATABASE_DYNAMODB_ENDPOINT_URL: 'http://localhost:8000',
    },
  });
  t.same(c.apps, [], 'a database driver needs no app in the file');
  t.same(c.app_manager, { driver: 'mysql', table_schema: 'soketi', cache: { enabled: false, ttl: 5 } });
  t.same(c.database.mysql, { host: 'db', port: 3307, username: 'u', password: 'p', database: 'd', table_name: 'applications' });
  t.same(c.database.postgres, { host: 'pg', port: 5433, username: 'pu', password: 'pp', database: 'pd', table_name: 'pt' });
  t.same(c.database.dynamodb, { region: 'eu-west-1', table_name: 'dt', endpoint_url: 'http://localhost:8000' });
});

t.test('bad values: clear errors naming the key', async (t) => {
  const bad = (overrides: object) => () => loadConfig({ env: {}, overrides: { apps: [], ...overrides } });
  t.throws(bad({ app_manager: { driver: 'oracle' } }), /app_manager\.driver must be one of array, memory, postgres, mysql, dynamodb, got "oracle"/);
  t.throws(bad({ app_manager: { driver: 'postgres', table_schema: 'reverb' } }), /app_manager\.table_schema must be one of auto, ringcast, soketi, sockudo/);
  t.throws(bad({ app_manager: { driver: 'postgres', cache: { ttl: 0 } } }), /app_manager\.cache\.ttl must be/);
  t.throws(bad({ app_manager: { driver: 'mysql' }, database: { mysql: { table_name: ' ' } } }), /database\.mysql\.table_name/);
  t.throws(bad({ app_manager: { driver: 'dynamodb' }, database: { dynamodb: { region: 7 } } }), /database\.dynamodb\.region/);
  t.throws(() => loadConfig({ env: { APP_MANAGER_CACHE_TTL: 'soon' }, overrides: { apps: [] } }), /APP_MANAGER_CACHE_TTL/);
  t.throws(bad({}), /no apps configured/, 'the array driver still needs an app');
});

t.test('app-store init needs a database driver', async (t) => {
  const err: string[] = [];
  t.equal(await initAppStore(null, { SERVICE_DEFAULT_APP_ID: 'a', SERVICE_DEFAULT_APP_KEY: 'k', SERVICE_DEFAULT_APP_SECRET: 's' }, () => undefined, (s) => err.push(s)), 78);
  t.match(err.join(''), /app-store init needs app_manager.driver postgres, mysql or dynamodb/);
  t.equal(await initAppStore(null, { APP_MANAGER_DRIVER: 'nope' }, () => undefined, (s) => err.push(s)), 78, 'a bad configuration: 78');
});

t.test('table shapes: detection and the peers\' names and values', async (t) => {
  t.equal(snake('MaxEventPayloadInKb'), 'max_event_payload_in_kb');
  t.equal(detectSchema(['id', 'key', 'secret', 'enabled', 'options']), 'ringcast');
  t.equal(detectSchema(['AppId', 'AppKey', 'AppSecret']), 'soketi');
  t.equal(detectSchema(['id', 'key', 'secret', 'max_read_req_per_sec']), 'soketi');
  t.equal(detectSchema(['id', 'key', 'secret', 'policy']), 'sockudo');
  t.equal(detectSchema(['id', 'name']), null);
  t.equal(detectSchema(['id', 'key', 'secret']), null, 'too little to tell');
  t.same(rowToApp('soketi', { AppId: 7, AppKey: 'k', AppSecret: 's', Enabled: Buffer.from([1]), EnableClientMessages: '0', MaxConnections: '-1', MaxEventBatchSize: 0 }),
    { id: '7', key: 'k', secret: 's', enabled: true, max_connections: null, enable_client_messages: false }, 'a Buffer or a digit string as booleans; -1 unlimited; 0 = default');
  t.same(rowToApp('ringcast', { id: 'a', key: 'k', secret: 's', enabled: 'true', options: '[1]' }), { id: 'a', key: 'k', secret: 's', enabled: true, options: [1] },
    'options that are not a mapping are left for validation to name');
  t.same(rowToApp('sockudo', { id: 'a', key: 'k', secret: 's', webhooks: 'not json' }), { id: 'a', key: 'k', secret: 's', webhooks: 'not json' });
});
