// test-modes: once (the apps page is the primary's console; the app API's changes in force on every shard: console/app-api)
// The console's apps page in headless Chromium over a DynamoDB app store (dynalite): create
// an app in the page (its secret shown once; the API's errors under the fields they name,
// as text), see it listed by pages, connect with its key, rotate its secret (the old one
// then gets 401, the new one 200), edit it, disable it (4003), delete it (4001). With the
// array driver the page is read-only and says the configuration file is the source of truth.

import t from 'tap';
import type { Page } from 'playwright-core';
import { CreateTableCommand } from '@aws-sdk/client-dynamodb';
import { DYNAMO_ENV, DynaliteServer } from '../helpers/dynalite';
import { connectResult } from '../helpers/app-store-suite';
import { consolePage } from '../helpers/console';
import { startServer, type TestServer } from '../helpers/server';

// Browser globals inside page callbacks (the project compiles without the DOM library).
declare const document: any;

Object.assign(process.env, DYNAMO_ENV);
const TOKEN = 'console-token-for-the-apps-page';
const CONSOLE = { enabled: true, host: '127.0.0.1', port: 0, token: TOKEN };

const text = (page: Page, sel: string) => page.textContent(sel).then((s) => s ?? '');
const fieldError = (page: Page, field: string) => text(page, `#app-form .field-error[data-field="${field}"]`);
const row = (id: string) => `#apps tr[data-app="${id}"]`;

/** The status of a request to the HTTP API signed with `secret` (the pusher SDK). */
async function signedStatus(srv: TestServer, id: string, secret: string): Promise<number> {
  try {
    await srv.sdk({ id, key: `${id}-key`, secret }).get({ path: '/channels' });
    return 200;
  } catch (err) {
    return (err as { status?: number }).status ?? -1;
  }
}

t.test('apps page over a DynamoDB app store', async (t) => {
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
    console: CONSOLE,
  });
  t.teardown(() => srv.stop());
  const { page } = await consolePage(t, srv.server.consolePort!, TOKEN);
  page.on('dialog', (d) => void d.accept());
  await page.evaluate(() => { document.getElementById('apps').dataset.perPage = '2'; });
  await page.click('#show-apps');
  await page.waitForFunction(() => document.querySelector('#apps-status')?.textContent.includes('no apps yet'));
  t.ok(await page.isHidden('#live-view'), 'the live view is hidden');

  // bad input: the API's issues under the fields they name, markup shown as text
  await page.click('#apps-new');
  await page.fill('#edit-id', 'web');
  await page.fill('#edit-key', 'web key');
  await page.fill('#edit-max-connections', '0');
  await page.fill('#edit-extra', '{"webhooks": [{"url": "<img src=x>", "event_types": ["channel_occupied"]}], "colour": "red"}');
  await page.click('#app-save');
  await page.waitForFunction(() => document.querySelector('#app-form .field-error[data-field="key"]')?.textContent !== '');
  t.match(await fieldError(page, 'key'), /key must be a non-empty string without spaces/);
  t.match(await fieldError(page, 'max_connections'), /max_connections must be a positive integer or null, got 0/);
  t.match(await fieldError(page, 'extra'), /colour is not a known app setting/, 'an option without a field: under Other settings');
  t.match(await fieldError(page, 'extra'), /webhooks\[0\]\.url .*<img src=x>/, 'markup in an error is text');
  t.equal(await page.$$eval('#app-form .field-error img', (e) => e.length), 0, 'no element made from it');
  await page.fill('#edit-extra', '[1');
  await page.click('#app-save');
  await page.waitForFunction(() => /must be JSON/.test(document.querySelector('#app-form .field-error[data-field="extra"]')?.textContent));

  // created: the secret once, the app listed and in force
  await page.fill('#edit-key', 'web-key');
  await page.fill('#edit-max-connections', '');
  await page.fill('#edit-extra', '{}');
  await page.click('#app-save');
  await page.waitForSelector('#app-secret:not([hidden])');
  t.equal(await text(page, '#app-secret-id'), 'web');
  const secret = await text(page, '#app-secret-value');
  t.ok(secret.length >= 20, 'the new secret is shown');
  await page.waitForSelector(row('web'));
  t.ok(await page.isHidden('#app-editor'), 'the form closed');
  t.equal(await connectResult(srv, 'web-key'), 'ok', 'a client connects with its key');
  t.equal(await signedStatus(srv, 'web', secret), 200, 'an API request signed with its secret');
  await page.click('#app-secret-done');
  t.equal(await text(page, '#app-secret-value'), '', 'the secret is gone from the page once dismissed');
  await page.waitForSelector('#app-select option[value="web"]', { state: 'attached' });
  t.pass('the live view\'s app selector has it');

  // a key that is taken: under the key field; then pages of 2
  await page.click('#apps-new');
  await page.fill('#edit-id', 'a2');
  await page.fill('#edit-key', 'yaml-key');
  await page.click('#app-save');
  await page.waitForFunction(() => /taken by app "yaml"/.test(document.querySelector('#app-form .field-error[data-field="key"]')?.textContent));
  for (const id of ['a1', 'a2']) {
    await page.click('#apps-new');
    await page.fill('#edit-id', id);
    await page.fill('#edit-key', `${id}-key`);
    await page.click('#app-save');
    await page.waitForSelector(`#app-secret-id:text-is("${id}")`);
  }
  await page.waitForFunction(() => document.querySelector('#apps-page')?.textContent === 'Page 1 of 2 (3 apps)');
  t.same(await page.$$eval('#apps tbody tr', (rs) => rs.map((r: { dataset: { app: string } }) => r.dataset.app)), ['a1', 'a2'], 'page 1, by id');
  await page.click('#apps-next');
  await page.waitForSelector(row('web'));
  t.equal(await page.$$eval('#apps tbody tr', (rs) => rs.length), 1, 'page 2');
  t.ok(await page.isDisabled('#apps-next'));

  // rotate: the old secret gets 401, the new one 200
  await page.click(`${row('web')} [data-action="rotate"]`);
  await page.waitForSelector('#app-secret:not([hidden])');
  const rotated = await text(page, '#app-secret-value');
  t.not(rotated, secret, 'a new secret, shown once');
  t.equal(await signedStatus(srv, 'web', secret), 401, 'the old secret: 401');
  t.equal(await signedStatus(srv, 'web', rotated), 200, 'the new secret: 200');

  // edit: a bad value named under its field, then saved
  await page.click(`${row('web')} [data-action="edit"]`);
  t.equal(await page.inputValue('#edit-key'), 'web-key');
  t.ok(await page.getAttribute('#edit-id', 'readonly') !== null, 'the id is fixed');
  await page.fill('#edit-max-connections', 'lots');
  await page.click('#app-save');
  await page.waitForFunction(() => /max_connections must be/.test(document.querySelector('#app-form .field-error[data-field="max_connections"]')?.textContent));
  await page.fill('#edit-max-connections', '5');
  await page.click('#app-save');
  await page.waitForFunction(() => document.querySelector('#apps tr[data-app="web"] td:nth-child(4)')?.textContent === '5');
  t.equal(srv.server.config.apps.find((a) => a.id === 'web')?.max_connections, 5, 'in force');
  t.equal(await signedStatus(srv, 'web', rotated), 200, 'the secret kept by an edit');

  // disable, enable, delete
  await page.click(`${row('web')} [data-action="disable"]`);
  await page.waitForSelector(`${row('web')}[data-enabled="false"]`);
  t.equal(await connectResult(srv, 'web-key'), 4003, 'disabled: new connections refused with 4003');
  await page.click(`${row('web')} [data-action="enable"]`);
  await page.waitForSelector(`${row('web')}[data-enabled="true"]`);
  t.equal(await connectResult(srv, 'web-key'), 'ok', 'enabled again');
  await page.click(`${row('web')} [data-action="delete"]`);
  await page.waitForFunction(() => document.querySelector('#apps-page')?.textContent === 'Page 1 of 1 (2 apps)');
  t.equal(await connectResult(srv, 'web-key'), 4001, 'deleted: its key gets 4001');
});

t.test('apps page with the array driver: read-only, the file is the source of truth', async (t) => {
  const srv = await startServer({ console: CONSOLE });
  t.teardown(() => srv.stop());
  const { page } = await consolePage(t, srv.server.consolePort!, TOKEN);
  await page.click('#show-apps');
  await page.waitForSelector('#apps-view[data-readonly="true"]');
  t.match(await text(page, '#apps-status'), /^Read-only: apps come from the configuration file .* source of truth/);
  t.ok(await page.isHidden('#apps-new'), 'no New app button');
  t.equal(await page.$$eval('#apps tbody tr', (rs) => rs.length), 0);
  await page.click('#show-live');
  t.ok(await page.isVisible('#live-view'), 'back to the live view');
});
