// DynamoDB app store (app_manager.driver dynamodb): the AWS SDK v3 client, credentials
// the SDK's usual way, `database.dynamodb.endpoint_url` for a DynamoDB-compatible server.
// The table's shape comes from its keys: hash key AppId (GSI AppKeyIndex) is soketi's,
// a GSI named KeyIndex is sockudo's, hash key id otherwise is ringcast's own.

import { CreateTableCommand, DeleteItemCommand, DescribeTableCommand, DynamoDBClient, PutItemCommand, ScanCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import type { Config } from '../../config/types';
import { AppStoreUnavailable, STORE_TIMEOUT_MS, withTimeout, type AppStore, type StoredApp, type TableSchema } from './port';
import { appToRow, rowToApp } from './tables';

export class DynamoAppStore implements AppStore {
  readonly driver = 'dynamodb';
  readonly name: string;
  private readonly client: DynamoDBClient;
  private readonly table: string;
  private readonly wanted: Config['app_manager']['table_schema'];
  private schema: TableSchema | null = null;

  constructor(config: Config) {
    const d = config.database.dynamodb;
    this.table = d.table_name;
    this.wanted = config.app_manager.table_schema;
    this.name = `dynamodb ${d.endpoint_url ?? d.region} table ${d.table_name}`;
    this.client = new DynamoDBClient({
      region: d.region, ...(d.endpoint_url ? { endpoint: d.endpoint_url } : {}),
      maxAttempts: 2, requestHandler: { connectionTimeout: STORE_TIMEOUT_MS, requestTimeout: STORE_TIMEOUT_MS },
    });
  }

  private run<T>(what: string, p: Promise<T>): Promise<T> {
    return withTimeout(this.name, what, p);
  }

  async open(): Promise<TableSchema> {
    const t = await this.run('describing the table', this.client.send(new DescribeTableCommand({ TableName: this.table })));
    if (this.wanted !== 'auto') return (this.schema = this.wanted);
    const hash = t.Table?.KeySchema?.find((k) => k.KeyType === 'HASH')?.AttributeName;
    const indexes = (t.Table?.GlobalSecondaryIndexes ?? []).map((i) => i.IndexName);
    const found: TableSchema | null = hash === 'AppId' || indexes.includes('AppKeyIndex') ? 'soketi'
      : indexes.includes('KeyIndex') ? 'sockudo' : hash === 'id' ? 'ringcast' : null;
    if (!found) {
      throw new AppStoreUnavailable(`app store ${this.name}: the key of table ${this.table} (${hash ?? 'none'}) is none of ringcast's (id), soketi's (AppId) or sockudo's (id, index KeyIndex); set app_manager.table_schema`);
    }
    return (this.schema = found);
  }

  async list(): Promise<StoredApp[]> {
    const schema = this.schema ?? await this.open();
    const out: StoredApp[] = [];
    let start: Record<string, AttributeValue> | undefined;
    do {
      const page = await this.run('reading the apps', this.client.send(new ScanCommand({ TableName: this.table, ExclusiveStartKey: start })));
      for (const item of page.Items ?? []) {
        const raw = rowToApp(schema, unmarshall(item, { wrapNumbers: false }));
        out.push({ raw, label: `dynamodb table ${this.table}, id ${JSON.stringify(String(raw.id))}` });
      }
      start = page.LastEvaluatedKey;
    } while (start);
    return out;
  }

  async init(): Promise<void> {
    await this.run('creating the table', this.client.send(new CreateTableCommand({
      TableName: this.table, BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
    })));
    this.schema = 'ringcast';
  }

  private async ownTable(): Promise<void> {
    const schema = this.schema ?? await this.open();
    if (schema !== 'ringcast') throw new AppStoreUnavailable(`app store ${this.name}: table ${this.table} is ${schema}'s; ringcast writes only its own table (\`ringcast app-store init\`)`);
  }

  async put(app: Record<string, unknown>): Promise<void> {
    await this.ownTable();
    await this.run('writing an app', this.client.send(new PutItemCommand({ TableName: this.table, Item: marshall(appToRow(app)) })));
  }

  async remove(id: string): Promise<boolean> {
    await this.ownTable();
    const r = await this.run('deleting an app', this.client.send(new DeleteItemCommand({ TableName: this.table, Key: marshall({ id }), ReturnValues: 'ALL_OLD' })));
    return r.Attributes !== undefined;
  }

  close(): Promise<void> {
    this.client.destroy();
    return Promise.resolve();
  }
}
