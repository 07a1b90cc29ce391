// app_manager.driver dynamodb on dynalite, a local DynamoDB-compatible server
// (test/helpers/dynalite.ts), through the SDK's endpoint option: soketi's table (AppId,
// GSI AppKeyIndex, PascalCase attributes) and sockudo's (id, GSI KeyIndex) read as they
// are, ringcast's own, live changes, outage and recovery, start-up refused when
// unreachable (test/helpers/app-store-suite.ts).

import t from 'tap';
import { CreateTableCommand, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { DYNAMO_ENV, DynaliteServer } from '../helpers/dynalite';
import { appStoreSuite } from '../helpers/app-store-suite';
import { freePort } from '../helpers/net';

Object.assign(process.env, DYNAMO_ENV); // the SDK's credentials, as in production

t.test('dynamodb app store', async (t) => {
  const db = await DynaliteServer.start();
  t.teardown(() => db.stop());
  const client = db.client();
  t.teardown(() => client.destroy());
  const closedPort = await freePort();
  const dynamodb = (table: string) => ({ region: 'us-east-1', table_name: table, endpoint_url: db.url });
  async function createTable(table: string, hash: string, index: string, indexKey: string, rows: Record<string, unknown>[]): Promise<void> {
    await client.send(new CreateTableCommand({
      TableName: table, BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: [{ AttributeName: hash, AttributeType: 'S' }, { AttributeName: indexKey, AttributeType: 'S' }],
      KeySchema: [{ AttributeName: hash, KeyType: 'HASH' }],
      GlobalSecondaryIndexes: [{ IndexName: index, KeySchema: [{ AttributeName: indexKey, KeyType: 'HASH' }], Projection: { ProjectionType: 'ALL' } }],
    }));
    for (const r of rows) await client.send(new PutItemCommand({ TableName: table, Item: marshall(r, { removeUndefinedValues: true, convertEmptyValues: false }) }));
  }
  appStoreSuite(t, {
    driver: 'dynamodb',
    config: (table) => ({ app_manager: { driver: 'dynamodb' }, database: { dynamodb: dynamodb(table) } }),
    env: (table) => ({ APP_MANAGER_DRIVER: 'dynamodb', DATABASE_DYNAMODB_ENDPOINT_URL: db.url, DATABASE_DYNAMODB_TABLE_NAME: table }),
    // soketi 1.6.1 tests/fixtures/dynamodb_schema.js: hash AppId, GSI AppKeyIndex on AppKey
    soketiTable: (table, rows) => createTable(table, 'AppId', 'AppKeyIndex', 'AppKey', rows),
    // sockudo 5.0.1 dynamodb_app_manager.rs: hash id, GSI KeyIndex on key (null attributes left out)
    sockudoTable: (table, rows) => createTable(table, 'id', 'KeyIndex', 'key',
      rows.map((r) => Object.fromEntries(Object.entries(r).filter(([, v]) => v !== null)))),
    pause: () => db.pause(),
    resume: () => db.resume(),
    unreachable: () => ({ app_manager: { driver: 'dynamodb' }, database: { dynamodb: { ...dynamodb('apps'), endpoint_url: `http://127.0.0.1:${closedPort}` } } }),
    readRow: async (table, id) => {
      const r = await client.send(new GetItemCommand({ TableName: table, Key: marshall({ [table.includes('soketi') ? 'AppId' : 'id']: id }) }));
      return r.Item ? unmarshall(r.Item) : null;
    },
  });
});
