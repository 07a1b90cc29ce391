// The app store tests every database driver runs (test/apps/store-*.test.ts): a
// soketi-shaped and a sockudo-shaped table read as they are, ringcast's own table made by
// `ringcast app-store init`, live changes (new, disabled, changed, deleted apps), the
// database down and back, and a start-up refused naming an unreachable store. The
// tables' fixtures follow the peers' published schemas (soketi 1.6.1 tests/fixtures,
// sockudo 5.0.1 crates/sockudo-app).

import type { Test } from 'tap';
import type { ConfigInput } from '../../src/config';
import { initAppStore } from '../../src/apps/init';
import { createAppStore } from '../../src/apps/store';
import { loadConfig } from '../../src/config';
import { snake } from '../../src/apps/store/tables';
import { RawClient, eventually, startServer, type TestServer } from './server';
import { counterValue } from './fallback';

export interface StoreBackend {
  driver: 'postgres' | 'mysql' | 'dynamodb';
  /** Config overrides reaching `table` (database.<driver> and app_manager). */
  config(table: string): ConfigInput;
  /** The same as environment variables (for `ringcast app-store init`). */
  env(table: string): Record<string, string>;
  /** Creates a soketi-shaped table `table` holding `rows` (soketi's column / attribute names). */
  soketiTable(table: string, rows: Record<string, unknown>[]): Promise<void>;
  /** Creates a sockudo-shaped table `table` holding `rows`. */
  sockudoTable(table: string, rows: Record<string, unknown>[]): Promise<void>;
  /** The database stops answering (connections refused) / answers again. */
  pause(): Promise<void>;
  resume(): Promise<void>;
  /** An address where nothing answers (start-up must fail naming it). */
  unreachable(): ConfigInput;
  /** The row or item of `table` whose id (soketi's DynamoDB: AppId) is `id`, as the database has it; null when none. */
  readRow(table: string, id: string): Promise<Record<string, unknown> | null>;
}

/** 'ok' when the connection is established, else the close code it is refused with (after its pusher:error). */
export async function connectResult(srv: TestServer, key: string, origin?: string): Promise<'ok' | number> {
  const c = await RawClient.connect(srv.wsUrl(key), origin ? { origin } : {});
  if (c.socketId !== '') {
    await c.close();
    return 'ok';
  }
  return c.closed();
}

async function up(srv: TestServer): Promise<Record<string, unknown>> {
  const r = await fetch(`http://127.0.0.1:${srv.port}/up`);
  return await r.json() as Record<string, unknown>;
}

const SOKETI_WEBHOOKS = JSON.stringify([{ url: 'https://example.com/hook', event_types: ['channel_occupied'], filter: { channel_name_starts_with: 'x' } }]);

/** soketi rows by soketi's SQL column names; `pascal` for its DynamoDB attribute names. */
export function soketiRows(pascal: boolean): Record<string, unknown>[] {
  const rows = [
    {
      id: 's1', key: 's1-key', secret: 's1-secret', max_connections: 5, enable_client_messages: 1, enabled: 1,
      max_backend_events_per_sec: -1, max_client_events_per_sec: 20, max_read_req_per_sec: 7, webhooks: SOKETI_WEBHOOKS,
      max_presence_members_per_channel: null, max_presence_member_size_in_kb: null, max_channel_name_length: null,
      max_event_channels_at_once: null, max_event_name_length: null, max_event_payload_in_kb: 50, max_event_batch_size: null,
      enable_user_authentication: 0,
    },
    {
      id: 's2', key: 's2-key', secret: 's2-secret', max_connections: -1, enable_client_messages: 0, enabled: 0,
      max_backend_events_per_sec: -1, max_client_events_per_sec: -1, max_read_req_per_sec: -1, webhooks: null,
      max_presence_members_per_channel: null, max_presence_member_size_in_kb: null, max_channel_name_length: null,
      max_event_channels_at_once: null, max_event_name_length: null, max_event_payload_in_kb: null, max_event_batch_size: null,
      enable_user_authentication: 0,
    },
  ];
  if (!pascal) return rows;
  const name = (k: string) => ({ id: 'AppId', key: 'AppKey', secret: 'AppSecret' } as Record<string, string>)[k]
    ?? k.split('_').map((w) => w[0].toUpperCase() + w.slice(1)).join('');
  return rows.map((r) => Object.fromEntries(Object.entries(r).filter(([, v]) => v !== null)
    .map(([k, v]) => [name(k), typeof v === 'number' && k.startsWith('enable') ? v === 1 : v])));
}

/** sockudo rows by sockudo's column names. */
export function sockudoRows(): Record<string, unknown>[] {
  return [
    {
      id: 'k1', key: 'k1-key', secret: 'k1-secret', max_connections: 7, enable_client_messages: false, enabled: true,
      max_backend_events_per_second: 100, max_client_events_per_second: 30, max_read_requests_per_second: 10,
      max_presence_members_per_channel: 50, max_presence_member_size_in_kb: 4, max_channel_name_length: 150,
      max_event_channels_at_once: 20, max_event_name_length: 120, max_event_payload_in_kb: 64, max_event_batch_size: 5,
      enable_user_authentication: true, enable_watchlist_events: true,
      webhooks: JSON.stringify([{ url: 'https://example.com/k1', event_types: ['member_added'], headers: { 'X-Token': 't' } }]),
      allowed_origins: JSON.stringify(['https://example.com']), channel_delta_compression: null,
      policy: JSON.stringify({ limits: { max_connections: 7 } }), idempotency: null, connection_recovery: null,
    },
    {
      id: 'k2', key: 'k2-key', secret: 'k2-secret', max_connections: 0, enable_client_messages: true, enabled: false,
      max_backend_events_per_second: 0, max_client_events_per_second: 0, max_read_requests_per_second: 0,
      max_presence_members_per_channel: null, max_presence_member_size_in_kb: null, max_channel_name_length: null,
      max_event_channels_at_once: null, max_event_name_length: null, max_event_payload_in_kb: null, max_event_batch_size: null,
      enable_user_authentication: false, enable_watchlist_events: false,
      webhooks: null, allowed_origins: null, channel_delta_compression: null, policy: null, idempotency: null, connection_recovery: null,
    },
  ];
}

function start(b: StoreBackend, table: string, extra: ConfigInput = {}): Promise<TestServer> {
  const c = b.config(table);
  return startServer({ apps: [], ...c, ...extra, app_manager: { ...c.app_manager, ...extra.app_manager } });
}

const API_TOKEN = 'console-token-for-the-app-api';

/** A row by snake_case column names (soketi's AppId as id, …), JSON text parsed, switches as booleans. */
function plain(row: Record<string, unknown>): Record<string, unknown> {
  const alias: Record<string, string> = { app_id: 'id', app_key: 'key', app_secret: 'secret' };
  return Object.fromEntries(Object.entries(row).map(([k, v]) => {
    const c = alias[snake(k)] ?? snake(k);
    if (c.startsWith('enable')) return [c, v === true || v === 1 || v === '1'];
    if (typeof v === 'string' && /^[[{]/.test(v)) return [c, JSON.parse(v) as unknown];
    return [c, typeof v === 'string' && /^-?\d+$/.test(v) && c.startsWith('max_') ? Number(v) : v];
  }));
}

/** The app API writes a soketi- or sockudo-shaped table: create, update (unknown columns kept), rotate, delete, 422. */
function apiWritesPeerTable(t: Test, b: StoreBackend, shape: 'soketi' | 'sockudo'): void {
  t.test(`${b.driver}: the app API writes a ${shape} table`, async (t) => {
    const table = `api_${shape}`;
    const seed = shape === 'soketi' ? soketiRows(b.driver === 'dynamodb')[0] : sockudoRows()[0];
    const seedId = shape === 'soketi' ? 's1' : 'k1';
    await (shape === 'soketi' ? b.soketiTable(table, [seed]) : b.sockudoTable(table, [seed]));
    const srv = await start(b, table, { console: { enabled: true, host: '127.0.0.1', port: 0, token: API_TOKEN } });
    t.teardown(() => srv.stop());
    const call = async (method: string, path: string, body?: unknown) => {
      const r = await fetch(`http://127.0.0.1:${srv.server.consolePort}/api/app-store${path}`, {
        method, headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: r.status, body: (r.status === 204 ? {} : await r.json()) as Record<string, any> };
    };
    const row = async (id: string) => {
      const r = await b.readRow(table, id);
      return r && plain(r);
    };
    const per = shape === 'soketi' ? '_per_sec' : '_per_second';
    const unset = shape === 'soketi' ? -1 : 0;

    const hook = { url: 'https://example.com/a1', event_types: ['channel_vacated'] };
    const created = await call('POST', '/apps', { id: 'a1', key: 'a1-key', max_connections: 3, enable_client_messages: false, webhooks: [hook] });
    t.equal(created.status, 201, `created: ${JSON.stringify(created.body)}`);
    t.equal(await connectResult(srv, 'a1-key'), 'ok', 'a client connects at once');
    t.match(await row('a1'), {
      id: 'a1', key: 'a1-key', secret: created.body.secret, max_connections: 3, enabled: true, enable_client_messages: false,
      enable_user_authentication: true, [`max_backend_events${per}`]: unset, [`max_client_events${per}`]: unset,
      max_event_payload_in_kb: unset, webhooks: [hook],
    }, `written in ${shape}'s columns (an unset limit as ${unset})`);
    t.match(srv.server.config.apps.find((a) => a.id === 'a1'), { max_connections: 3, max_backend_events_per_second: null, enable_client_messages: false },
      'read back as it was given');

    const refused = shape === 'soketi' ? { allowed_origins: ['https://example.com'] } : { channel_history: { 'h-*': { size: 5, ttl: 60 } } };
    const field = Object.keys(refused)[0];
    t.match(await call('POST', '/apps', { id: 'a2', key: 'a2-key', ...refused }), { status: 422, body: { error: new RegExp(`${field}: a ${shape} table`) } },
      `a field the ${shape} shape cannot hold: 422 naming it`);
    t.equal(await row('a2'), null, 'nothing written');
    t.match(await call('PUT', '/apps/a1', { key: 'a1-key', hooks: { url: 'https://example.com/h', connect: { enabled: true } } }), { status: 422, body: { error: /hooks/ } });
    t.match(await row('a1'), { max_connections: 3 }, 'nothing written');

    const put = await call('PUT', `/apps/${seedId}`, { key: `${seedId}-key`, max_connections: 9, enabled: false });
    t.match(put, { status: 200, body: { max_connections: 9, enabled: false } });
    t.equal(await connectResult(srv, `${seedId}-key`), 4003, 'disabled at once');
    const seeded = await row(seedId);
    t.match(seeded, { max_connections: 9, enabled: false, secret: `${seedId}-secret` }, 'updated, the secret kept');
    if (shape === 'soketi') t.equal(seeded?.max_read_req_per_sec, 7, 'a column ringcast does not read is kept');
    else t.same(seeded?.policy, { limits: { max_connections: 7 } }, 'a column ringcast does not read is kept');

    const rotated = await call('POST', '/apps/a1/rotate-secret');
    t.equal(rotated.status, 200);
    t.match(await row('a1'), { secret: rotated.body.secret, max_connections: 3, enable_client_messages: false }, 'rotated, the rest kept');
    t.equal(srv.server.config.apps.find((a) => a.id === 'a1')?.secret, rotated.body.secret, 'in force');

    t.equal((await call('DELETE', '/apps/a1')).status, 204);
    t.equal(await row('a1'), null, 'deleted from the table');
    t.equal(await connectResult(srv, 'a1-key'), 4001, 'gone at once');
  });
}

export function appStoreSuite(t: Test, b: StoreBackend): void {
  apiWritesPeerTable(t, b, 'soketi');
  apiWritesPeerTable(t, b, 'sockudo');

  t.test(`${b.driver}: a soketi table, read as it is`, async (t) => {
    await b.soketiTable('apps', soketiRows(b.driver === 'dynamodb'));
    const srv = await start(b, 'apps');
    t.teardown(() => srv.stop());
    const s1 = srv.server.config.apps.find((a) => a.id === 's1')!;
    t.match(s1, {
      key: 's1-key', secret: 's1-secret', enabled: true, max_connections: 5, max_client_events_per_second: 20,
      max_backend_events_per_second: null, max_event_payload_in_kb: 50, enable_client_messages: true, enable_user_authentication: false,
      webhooks: [{ url: 'https://example.com/hook', event_types: ['channel_occupied'], headers: {} }],
    }, 'columns mapped: *_per_sec, -1 = unlimited, webhooks JSON, 0/1 booleans');
    t.equal(s1.max_event_batch_size, srv.config.event_limits.max_batch_size, 'a null limit takes the global default');
    t.equal(srv.server.appStore?.status().table_schema, 'soketi', 'detected');
    t.equal(await connectResult(srv, 's1-key'), 'ok');
    t.equal(await connectResult(srv, 's2-key'), 4003, 'disabled app: 4003');
    t.equal(await connectResult(srv, 'nobody'), 4001, 'unknown key: 4001');
  });

  t.test(`${b.driver}: a sockudo table, read as it is`, async (t) => {
    await b.sockudoTable('applications', sockudoRows());
    const srv = await start(b, 'applications');
    t.teardown(() => srv.stop());
    t.equal(srv.server.appStore?.status().table_schema, 'sockudo', 'detected');
    t.match(srv.server.config.apps.find((a) => a.id === 'k1'), {
      key: 'k1-key', max_connections: 7, enable_client_messages: false, max_backend_events_per_second: 100,
      max_client_events_per_second: 30, max_presence_members_per_channel: 50, max_presence_member_size_in_kb: 4,
      max_channel_name_length: 150, max_event_channels_at_once: 20, max_event_name_length: 120, max_event_payload_in_kb: 64,
      max_event_batch_size: 5, enable_watchlist_events: true, allowed_origins: ['https://example.com'],
      webhooks: [{ url: 'https://example.com/k1', event_types: ['member_added'], headers: { 'X-Token': 't' } }],
    }, '*_per_second, JSON webhooks and allowed_origins');
    t.match(srv.server.config.apps.find((a) => a.id === 'k2'), { enabled: false, max_connections: null, max_backend_events_per_second: null });
    t.equal(await connectResult(srv, 'k1-key', 'https://example.com'), 'ok', 'from an allowed origin');
    t.equal(await connectResult(srv, 'k1-key', 'https://other.example'), 4009, 'allowed_origins in force');
    t.equal(await connectResult(srv, 'k2-key'), 4003);
  });

  t.test(`${b.driver}: ringcast's table: init, live changes, the database down and back`, async (t) => {
    const out: string[] = [];
    const env = b.env('ringcast_apps');
    t.equal(await initAppStore(null, env, (s) => out.push(s), (s) => out.push(s)), 0, `init: ${out.join('')}`);
    t.equal(await initAppStore(null, env, () => undefined, () => undefined), 1, 'init again: refused (the table exists)');
    const store = createAppStore(loadConfig({ env, overrides: { apps: [] } }))!;
    t.teardown(() => store.close());
    await store.put({ id: 'r1', key: 'r1-key', secret: 'r1-secret', max_connections: 3, channel_history: { 'h-*': { size: 5, ttl: 60 } } });
    const srv = await start(b, 'ringcast_apps', {
      app_manager: { cache: { ttl: 1 } }, apps: [{ id: 'yaml', key: 'yaml-key', secret: 'yaml-secret' }],
      metrics: { enabled: true, host: '127.0.0.1', port: 0 },
    });
    const lookups = (result: string) => counterValue(srv.server.metricsPort!, 'app_store_lookups_total', `result="${result}"`);
    t.teardown(() => srv.stop());
    t.equal(srv.server.appStore?.status().table_schema, 'ringcast');
    t.match(srv.server.config.apps.find((a) => a.id === 'r1'), { max_connections: 3, channel_history: { 'h-*': { size: 5, ttl: 60, rewind: 0 } } }, 'every app option from options');
    t.equal(await connectResult(srv, 'r1-key'), 'ok');
    t.equal(await connectResult(srv, 'yaml-key'), 'ok', 'the configured apps are kept beside the store\'s');

    await store.put({ id: 'r2', key: 'r2-key', secret: 'r2-secret' });
    await eventually(async () => (await connectResult(srv, 'r2-key')) === 'ok', 5000, 'a new app connects within the TTL');
    const c1 = await RawClient.connect(srv.wsUrl('r1-key'));
    const c2 = await RawClient.connect(srv.wsUrl('r2-key'));
    await store.put({ id: 'r1', key: 'r1-key', secret: 'r1-secret', enabled: false });
    t.equal(await c1.closed(5000), 4003, 'a disabled app\'s connection is closed with 4003');
    t.equal(await connectResult(srv, 'r1-key'), 4003, 'and new ones refused');
    await store.remove('r2');
    t.equal(await c2.closed(5000), 4001, 'a deleted app\'s connection is closed with 4001');
    t.equal(await connectResult(srv, 'r2-key'), 4001);
    await store.put({ id: 'r1', key: 'r1-key', secret: 'r1-secret', max_connections: 9 });
    await eventually(() => srv.server.config.apps.find((a) => a.id === 'r1')?.max_connections === 9, 5000, 'changed limits in force');
    t.equal(await connectResult(srv, 'r1-key'), 'ok', 'enabled again');

    t.ok(await lookups('hit') >= 3, 'app_store_lookups_total: hits counted');
    t.ok(await lookups('miss') >= 1, 'misses (unknown keys) counted');
    t.equal(await lookups('stale'), 0, 'no stale lookup while the store answers');

    await b.pause();
    await srv.server.appStore!.refresh();
    t.match(srv.server.appStore!.status(), { ok: false, apps: 1 }, 'the database down: the apps read before are kept');
    t.match(srv.server.appStore!.status().error, new RegExp(`app store ${b.driver}`), 'the error names the store');
    t.equal(await connectResult(srv, 'r1-key'), 'ok', 'a cached app still connects');
    t.equal(await connectResult(srv, 'nobody'), 4001, 'an unknown key is refused at once');
    t.equal(await lookups('stale'), 1, 'the cached app found while the store is down: a stale lookup');
    t.match(await up(srv), { status: 'ok', app_store: 'stale' }, '/up: still up, the store stale');
    await b.resume();
    await eventually(async () => {
      await srv.server.appStore!.refresh();
      return srv.server.appStore!.status().ok;
    }, 10_000, 'the store answers again').catch((err: unknown) => { throw new Error(`${(err as Error).message}: ${srv.server.appStore!.status().error}`); });
    t.match(await up(srv), { app_store: 'ok' }, '/up: the store ok again');
  });

  t.test(`${b.driver}: start-up with the store unreachable fails naming it`, async (t) => {
    await t.rejects(startServer({ apps: [], ...b.unreachable() }), new RegExp(`app store ${b.driver}`));
  });
}
