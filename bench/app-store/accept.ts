// Apps from the configuration file against apps from a database app store (PostgreSQL,
// ringcast's own table): connection accept rate and API publish rate once started (the
// shards answer both from memory either way), the start-up time (the store's first
// read: the cold lookup), and what a flood of unknown keys costs the database: its
// sequential scans of the apps table (each read of the store is one) before and after.
//
//   node dist/bench/app-store/accept.js [--workers 1] [--conns 2000] [--conc 50] [--publishes 2000] [--flood 2000] [--rounds 2]
//
// Starts its own PostgreSQL (test/helpers/postgres.ts) and stops it at the end.

import Pusher from 'pusher';
import WebSocket from 'ws';
import { loadConfig, type ConfigInput } from '../../src/config';
import { createAppStore } from '../../src/apps/store';
import { start } from '../../src/main';
import { PostgresServer } from '../../test/helpers/postgres';

const arg = (name: string, d: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : d;
};
const WORKERS = arg('workers', 1);
const CONNS = arg('conns', 2000);
const CONC = arg('conc', 50);
const PUBLISHES = arg('publishes', 2000);
const FLOOD = arg('flood', 2000);
const ROUNDS = arg('rounds', 2);
// the per-app API token bucket (max_client_events_per_second) above what this machine can send
const APP = { id: 'bench', key: 'bench-key', secret: 'bench-secret', max_client_events_per_second: 1_000_000 };

/** Opens and closes `n` connections to `key`, `conc` at a time; returns connections per second and how many were established. */
async function accept(port: number, key: string, n: number, conc: number): Promise<{ rate: number; ok: number }> {
  let next = 0;
  let ok = 0;
  const t0 = performance.now();
  const one = () => new Promise<void>((resolve) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/app/${key}?protocol=7`);
    ws.once('message', (m) => {
      if ((m as Buffer).toString('utf8').includes('connection_established')) ok++;
      ws.close();
    });
    ws.once('close', () => resolve());
    ws.once('error', () => resolve());
  });
  await Promise.all(Array.from({ length: conc }, async () => {
    while (next++ < n) await one();
  }));
  return { rate: n / ((performance.now() - t0) / 1000), ok };
}

async function publishRate(port: number, n: number, conc: number): Promise<number> {
  const sdk = new Pusher({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1', port: String(port), useTLS: false });
  let next = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: conc }, async () => {
    while (next++ < n) await sdk.trigger('bench', 'e', { n: next });
  }));
  return n / ((performance.now() - t0) / 1000);
}

async function main(): Promise<void> {
  const pg = await PostgresServer.start();
  try {
    await pg.query('CREATE DATABASE ringcast');
    const db: ConfigInput = { app_manager: { driver: 'postgres', cache: { ttl: 60 } }, database: { postgres: { host: '127.0.0.1', port: pg.port, database: 'ringcast', table_name: 'apps' } } };
    const store = createAppStore(loadConfig({ env: {}, overrides: { apps: [], ...db } }))!;
    await store.init();
    await store.put({ ...APP });
    await store.close();
    const scans = async () => Number((await pg.query("SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'apps'", [], 'ringcast'))[0].seq_scan);
    // interleaved rounds: the first round also warms the JIT
    for (const mode of Array.from({ length: ROUNDS }, () => ['yaml', 'postgres'] as const).flat()) {
      const overrides: ConfigInput = mode === 'yaml' ? { apps: [APP] } : { apps: [], ...db };
      const config = loadConfig({ env: {}, overrides: { host: '127.0.0.1', port: 0, workers: WORKERS, log: { level: 'error' }, delta_compression: { enabled: false }, ...overrides } });
      const t0 = performance.now();
      const srv = await start(config);
      const startMs = performance.now() - t0;
      await accept(srv.port, APP.key, 200, CONC); // warm
      const acc = await accept(srv.port, APP.key, CONNS, CONC);
      const pub = await publishRate(srv.port, PUBLISHES, CONC);
      let flood = '';
      if (mode === 'postgres') {
        const before = await scans();
        const f0 = performance.now();
        const r = await accept(srv.port, `unknown-${Math.random().toString(36).slice(2)}`, FLOOD, CONC);
        const seconds = (performance.now() - f0) / 1000;
        const after = await scans();
        flood = `; ${FLOOD} unknown-key connections in ${seconds.toFixed(1)} s (${r.ok} accepted): ${after - before} reads of the apps table`;
      }
      console.log(`${mode}: start ${startMs.toFixed(0)} ms; accept ${acc.rate.toFixed(0)} conn/s (${acc.ok}/${CONNS} established); API publish ${pub.toFixed(0)}/s${flood}`);
      await srv.stop();
    }
  } finally {
    await pg.stop();
  }
}

main().then(() => process.exit(0), (err: unknown) => {
  console.error(err);
  process.exit(1);
});
