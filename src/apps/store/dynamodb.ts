// DynamoDB app store (app_manager.driver dynamodb): the AWS SDK v3 client, credentials
// the SDK's usual way, `database.dynamodb.endpoint_url` for a DynamoDB-compatible server.
// The table's shape comes from its keys: hash key AppId (GSI AppKeyIndex) is soketi's,
// a GSI named KeyIndex is sockudo's, hash key id otherwise is ringcast's own.

import { CreateTableCommand, DeleteItemCommand, DescribeTableCommand, DynamoDBClient, GetItemCommand, PutItemCommand, ScanCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import type { Config } from '../../config/types';
import { AppStoreUnavailable, STORE_TIMEOUT_MS, withTimeout, type AppStore, type StoredApp, type TableSchema } from './port';
import { appToPeerRow, presentColumns } from './peer-rows';
import { appToRow, rowToApp } from './tables';

/** soketi's attribute name of a snake_case column: AppId, AppKey, AppSecret, MaxConnections, … */
function pascal(col: string): string {
  const special: Record<string, string> = { id: 'AppId', key: 'AppKey', secret: 'AppSecret' };
  return special[col] ?? col.split('_').map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join('');
}

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

  /** The hash key's attribute: soketi's AppId, id otherwise. */
  private idAttribute(schema: TableSchema): string {
    return schema === 'soketi' ? 'AppId' : 'id';
  }

  async put(app: Record<string, unknown>): Promise<void> {
    const schema = this.schema ?? await this.open();
    if (schema === 'ringcast') {
      await this.run('writing an app', this.client.send(new PutItemCommand({ TableName: this.table, Item: marshall(appToRow(app)) })));
      return;
    }
    // a peer's table: the attributes ringcast maps are set, every other one is kept
    const row = appToPeerRow(schema, app, `dynamodb table ${this.table}`, true);
    const names = Object.keys({ ...row.insertOnly, ...row.columns });
    const attrs = presentColumns(row, new Map(names.map((c) => [c, schema === 'soketi' ? pascal(c) : c])), `the ${schema} table ${this.table}`, true);
    const idAttr = this.idAttribute(schema);
    const old = await this.run('reading an app', this.client.send(new GetItemCommand({ TableName: this.table, Key: marshall({ [idAttr]: row.columns.id }) })));
    const insertOnly = new Set(Object.keys(row.insertOnly).map((c) => (schema === 'soketi' ? pascal(c) : c)));
    const set = Object.fromEntries(attrs.filter(([a]) => !(old.Item && insertOnly.has(a))));
    // the old item's attributes as they are (their own types), ringcast's set over them
    const item = { ...old.Item, ...marshall(set, { removeUndefinedValues: true }) };
    await this.run('writing an app', this.client.send(new PutItemCommand({ TableName: this.table, Item: item })));
  }

  async remove(id: string): Promise<boolean> {
    const schema = this.schema ?? await this.open();
    const r = await this.run('deleting an app', this.client.send(new DeleteItemCommand({ TableName: this.table, Key: marshall({ [this.idAttribute(schema)]: id }), ReturnValues: 'ALL_OLD' })));
    return r.Attributes !== undefined;
  }

  close(): Promise<void> {
    this.client.destroy();
    return Promise.resolve();
  }
}
