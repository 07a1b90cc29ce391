// The app API on the console listener (console/app-api.ts) over a DynamoDB app store
// (dynalite): create (secret answered once), read, update, delete, rotate a secret, a paged
// list; the console token only (401 without, 403 for an app secret); every field checked
// with the schema of the configuration's apps (400 naming it); the change in force at
// once (a new app connects, a deleted one is gone); the array driver answers 409.

import t from 'tap';
import { CreateTableCommand } from '@aws-sdk/client-dynamodb';
import { DYNAMO_ENV, DynaliteServer } from '../helpers/dynalite';
import { connectResult } from '../helpers/app-store-suite';
import { startServer } from '../helpers/server';

Object.assign(process.env, DYNAMO_ENV);
const TOKEN = 'console-token-for-the-app-api';

t.test('app API', async (t) => {
  const db = await DynaliteServer.start();
  t.teardown(() => db.stop());
  const client = db.client();
  t.teardown(() => client.destroy());
  await client.send(new CreateTableCommand({
    TableName: 'apps', BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }], KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
  }));
  const srv = await startServer({
    apps: [{ id: 'yaml', key: 'yaml-key', secret: 'yaml-secret' }],
    app_manager: { driver: 'dynamodb' }, database: { dynamodb: { region: 'us-east-1', table_name: 'apps', endpoint_url: db.url } },
    console: { enabled: true, host: '127.0.0.1', port: 0, token: TOKEN, allow_app_secret: true },
  });
  t.teardown(() => srv.stop());
  const call = async (method: string, path: string, body?: unknown, auth: Record<string, string> = { authorization: `Bearer ${TOKEN}` }) => {
    const r = await fetch(`http://127.0.0.1:${srv.server.consolePort}/api/app-store${path}`, {
      method, headers: { ...auth, 'content-type': 'application/json' }, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    return { status: r.status, body: (r.status === 204 ? {} : await r.json()) as Record<string, any> };
  };

  t.equal((await call('GET', '/apps', undefined, {})).status, 401, 'no token: 401');
  t.equal((await call('GET', '/apps', undefined, { authorization: 'Bearer yaml-secret', 'x-console-app': 'yaml' })).status, 403, 'an app secret: 403');

  const created = await call('POST', '/apps', { id: 'n1', key: 'n1-key', max_connections: 4 });
  t.equal(created.status, 201);
  t.match(created.body, { id: 'n1', key: 'n1-key', max_connections: 4, enabled: true }, 'created, every option resolved');
  t.type(created.body.secret, 'string', 'the secret, at creation');
  t.equal(await connectResult(srv, 'n1-key'), 'ok', 'in force at once');
  const got = await call('GET', '/apps/n1');
  t.equal(got.status, 200);
  t.notOk('secret' in got.body, 'no secret when read');

  t.match(await call('POST', '/apps', { id: 'n2', key: 'n2-key', max_connections: 0 }), { status: 400, body: { error: /max_connections/ } }, 'validated with the app schema');
  t.match(await call('POST', '/apps', { id: 'n2', key: 'n2 key' }), { status: 400, body: { error: /key/ } });
  t.match(await call('POST', '/apps', { id: 'n2', key: 'n2-key', colour: 'red' }), { status: 400, body: { error: /colour/ } }, 'an unknown setting named');
  t.match(await call('POST', '/apps', '{not json'), { status: 400, body: { error: /JSON/ } });
  t.match(await call('POST', '/apps', { id: 'n1', key: 'other' }), { status: 409 }, 'an id that exists');
  t.match(await call('POST', '/apps', { id: 'n3', key: 'yaml-key' }), { status: 409, body: { error: /taken/ } }, 'a key that exists');
  t.match(await call('POST', '/apps', { key: 'k' }), { status: 400, body: { error: /id is missing/ } });

  const put = await call('PUT', '/apps/n1', { key: 'n1-key', max_connections: 8, enabled: false });
  t.match(put, { status: 200, body: { max_connections: 8, enabled: false } });
  t.notOk('secret' in put.body);
  t.equal(await connectResult(srv, 'n1-key'), 4003, 'disabled at once');
  t.match(await call('PUT', '/apps/n1', { key: 'n1-key', secret: 'x' }), { status: 400, body: { error: /rotate-secret/ } });

  const rotated = await call('POST', '/apps/n1/rotate-secret');
  t.equal(rotated.status, 200);
  t.not(rotated.body.secret, created.body.secret, 'a new secret, answered once');
  t.equal(srv.server.config.apps.find((a) => a.id === 'n1')?.secret, rotated.body.secret, 'in force');
  t.equal(srv.server.config.apps.find((a) => a.id === 'n1')?.max_connections, 8, 'the other options kept');

  for (let i = 0; i < 3; i++) t.equal((await call('POST', '/apps', { id: `p${i}`, key: `p${i}-key` })).status, 201);
  const page = await call('GET', '/apps?page=2&per_page=2');
  t.match(page.body, { page: 2, per_page: 2, total: 4 });
  t.same(page.body.apps.map((a: { id: string }) => a.id), ['p1', 'p2'], 'paged, by id');
  t.notOk(page.body.apps.some((a: object) => 'secret' in a));
  t.match(await call('GET', '/apps?per_page=501'), { status: 400, body: { error: /per_page/ } });
  t.match(await call('GET', '/apps?page=0'), { status: 400 });

  const p0 = await connectResult(srv, 'p0-key');
  t.equal(p0, 'ok');
  t.equal((await call('DELETE', '/apps/p0')).status, 204);
  t.equal(await connectResult(srv, 'p0-key'), 4001, 'deleted: gone at once');
  t.equal((await call('GET', '/apps/p0')).status, 404);
  t.equal((await call('GET', '/apps/yaml')).status, 404, 'a configured app is not the store\'s');
  t.equal((await call('PATCH', '/apps/n1')).status, 405);
});

t.test('app API with the array driver: the file is the source of truth', async (t) => {
  const srv = await startServer({ console: { enabled: true, host: '127.0.0.1', port: 0, token: TOKEN } });
  t.teardown(() => srv.stop());
  const r = await fetch(`http://127.0.0.1:${srv.server.consolePort}/api/app-store/apps`, { headers: { authorization: `Bearer ${TOKEN}` } });
  t.equal(r.status, 409);
  t.match(await r.json(), { error: /configuration file .* source of truth/ });
});
