// What the whole-table design of a database app store (apps/sync.ts) costs as the table
// grows, on a real PostgreSQL with ringcast's own table of 1k, 10k and 100k apps:
//   read     the query and its rows (store.list()), median of the rounds
//   reread   the primary's periodic read with nothing changed: the read, each row compared
//            with the one of the last read (AppSync.refresh), wall time and CPU time
//   primary  heap held by the store in the primary: the checked apps, and the rows they
//            were checked from (an unchanged row is not checked again)
//   shard    heap held by each shard: its copy of the list (a structured clone, as
//            postMessage makes it) and the registry's indexes
//   start    a whole server (workers 1) started on the table: the first read (the cold
//            lookup), until it accepts connections
//
//   node --expose-gc dist/bench/app-store/table-size.js [--sizes 1000,10000,100000] [--rounds 3]
//
// Starts its own PostgreSQL (test/helpers/postgres.ts) and stops it at the end.

import pino from 'pino';
import { AppRegistry } from '../../src/apps/registry';
import { createAppStore } from '../../src/apps/store';
import { AppSync, type MetricsSink } from '../../src/apps/sync';
import { loadConfig, type ConfigInput } from '../../src/config';
import { start } from '../../src/main';
import { PostgresServer } from '../../test/helpers/postgres';

const argOf = (name: string, d: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : d;
};
const SIZES = argOf('sizes', '1000,10000,100000').split(',').map(Number);
const ROUNDS = Number(argOf('rounds', '3'));
const log = pino({ level: 'silent' });
const metrics: MetricsSink = { inc() {}, set() {}, observe() {} };

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function heap(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with node --expose-gc');
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

async function main(): Promise<void> {
  const pg = await PostgresServer.start();
  try {
    await pg.query('CREATE DATABASE ringcast');
    const db: ConfigInput = { app_manager: { driver: 'postgres', cache: { ttl: 3600 } }, database: { postgres: { host: '127.0.0.1', port: pg.port, database: 'ringcast', table_name: 'apps' } } };
    const config = loadConfig({ env: {}, overrides: { apps: [], log: { level: 'error' }, ...db } });
    const init = createAppStore(config)!;
    await init.init();
    await init.close();
    console.log('rows | read (ms) | reread wall / CPU (ms) | primary heap (MB) | shard heap (MB) | server start (ms)');
    let have = 0;
    for (const n of SIZES) {
      // each app with a few options, as a real one would have
      await pg.query(`INSERT INTO apps (id, key, secret, enabled, options)
        SELECT 'app-' || i, 'key-' || i, md5(i::text), true, '{"max_connections": 1000, "enable_client_messages": true, "webhooks": [{"url": "https://example.com/hook", "event_types": ["channel_occupied"]}]}'
        FROM generate_series($1::int + 1, $2::int) AS i`, [have, n], 'ringcast');
      have = n;
      await pg.query('VACUUM ANALYZE apps', [], 'ringcast');

      const store = createAppStore(config)!;
      await store.open();
      const reads: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        const t0 = performance.now();
        await store.list();
        reads.push(performance.now() - t0);
      }
      await store.close();

      const before = heap();
      const sync = (await AppSync.open(config, log, metrics))!;
      const walls: number[] = [];
      const cpus: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        const c0 = process.cpuUsage();
        const t0 = performance.now();
        await sync.refresh();
        walls.push(performance.now() - t0);
        const c = process.cpuUsage(c0);
        cpus.push((c.user + c.system) / 1000);
      }
      const primary = heap() - before; // the apps and the rows they were checked from
      const apps = sync.apps();
      const beforeShard = heap();
      let copy: AppRegistry | null = new AppRegistry(structuredClone(apps));
      const shard = heap() - beforeShard;
      if (copy.size !== n) throw new Error(`the shard's registry holds ${copy.size} apps, not ${n}`);
      copy = null;
      await sync.stop();

      const t0 = performance.now();
      const srv = await start(loadConfig({ env: {}, overrides: { host: '127.0.0.1', port: 0, workers: 1, apps: [], log: { level: 'error' }, ...db } }));
      const startMs = performance.now() - t0;
      await srv.stop();

      const mb = (b: number) => (b / 1048576).toFixed(1);
      console.log(`${n} | ${median(reads).toFixed(0)} | ${median(walls).toFixed(0)} / ${median(cpus).toFixed(0)} | ${mb(primary)} | ${mb(shard)} | ${startMs.toFixed(0)}`);
    }
  } finally {
    await pg.stop();
  }
}

main().then(() => process.exit(0), (err: unknown) => {
  console.error(err);
  process.exit(1);
});
