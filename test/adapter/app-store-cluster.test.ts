// test-modes: once (the announcement is the primary's: two nodes of one shard each)
// An app changed through one node's app API is announced over the cluster adapter (the
// `apps` control message): the other node reads the app store at once, not after its
// app_manager.cache.ttl (an hour here). Real redis-server, dynalite as the store.

import t from 'tap';
import { CreateTableCommand } from '@aws-sdk/client-dynamodb';
import { DYNAMO_ENV, DynaliteServer } from '../helpers/dynalite';
import { RedisServer } from '../helpers/redis';
import { startNodePair } from '../helpers/cluster';
import { connectResult } from '../helpers/app-store-suite';
import { eventually } from '../helpers/server';

Object.assign(process.env, DYNAMO_ENV);
const TOKEN = 'console-token-for-the-cluster';

t.test('an app API change reaches every node at once', async (t) => {
  const redis = await RedisServer.start();
  t.teardown(() => redis.stop());
  const db = await DynaliteServer.start();
  t.teardown(() => db.stop());
  const client = db.client();
  t.teardown(() => client.destroy());
  await client.send(new CreateTableCommand({
    TableName: 'apps', BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }], KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
  }));
  const [a, b] = await startNodePair(t, {
    workers: 1, apps: [],
    adapter: { driver: 'redis' }, database: { redis: { host: '127.0.0.1', port: redis.port }, dynamodb: { table_name: 'apps', endpoint_url: db.url } },
    app_manager: { driver: 'dynamodb', cache: { ttl: 3600 } },
    console: { enabled: true, host: '127.0.0.1', port: 0, token: TOKEN },
  });
  const r = await fetch(`http://127.0.0.1:${a.server.consolePort}/api/app-store/apps`, {
    method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ id: 'c1', key: 'c1-key' }),
  });
  t.equal(r.status, 201);
  t.equal(await connectResult(a, 'c1-key'), 'ok', 'the node that wrote it');
  await eventually(async () => (await connectResult(b, 'c1-key')) === 'ok', 5000, 'the other node, long before its TTL');
  const d = await fetch(`http://127.0.0.1:${a.server.consolePort}/api/app-store/apps/c1`, { method: 'DELETE', headers: { authorization: `Bearer ${TOKEN}` } });
  t.equal(d.status, 204);
  await eventually(async () => (await connectResult(b, 'c1-key')) === 4001, 5000, 'deleted on the other node too');
  t.pass('announced both ways');
});
