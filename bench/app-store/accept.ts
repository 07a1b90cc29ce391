// Apps from the configuration file (array) against apps from each database app store
// driver (postgres, mysql on MariaDB, dynamodb on dynalite; ringcast's own table, cached):
// connection accept rate and API publish rate once started (the shards answer both from
// memory either way), and the CPU time each costs this process (server and clients: less
// sensitive than a rate to other work on a shared machine), the cold lookup (the start-up, which reads the table, and the first
// connection after it), and what a flood of connections with unknown keys costs the
// database: the reads of the table during the flood (app_store_reads_total; PostgreSQL's
// sequential scans and MariaDB's Com_select counted by the databases themselves too).
// Rounds run the four modes back to back, each round starting with the next mode (so no mode
// always runs first); the summary is the median of the rounds.
//
//   node dist/bench/app-store/accept.js [--workers 1] [--conns 2000] [--conc 50] [--publishes 2000] [--flood 2000] [--rounds 3]
//
// Starts its own PostgreSQL, MariaDB and dynalite (test/helpers/) and stops them at the end.

import http from 'node:http';
import Pusher from 'pusher';
import WebSocket from 'ws';
import { loadConfig, type ConfigInput } from '../../src/config';
import { createAppStore } from '../../src/apps/store';
import { AppRegistry } from '../../src/apps/registry';
import { start } from '../../src/main';
import { PostgresServer } from '../../test/helpers/postgres';
import { MariaDbServer } from '../../test/helpers/mariadb';
import { DYNAMO_ENV, DynaliteServer } from '../../test/helpers/dynalite';

const arg = (name: string, d: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : d;
};
const WORKERS = arg('workers', 1);
const CONNS = arg('conns', 2000);
const CONC = arg('conc', 50);
const PUBLISHES = arg('publishes', 2000);
const FLOOD = arg('flood', 2000);
const ROUNDS = arg('rounds', 3);
// the per-app API token bucket (max_client_events_per_second) above what this machine can send
const APP = { id: 'bench', key: 'bench-key', secret: 'bench-secret', max_client_events_per_second: 1_000_000 };
const MODES = ['array', 'postgres', 'mysql', 'dynamodb'] as const;
type Mode = typeof MODES[number];

interface Result { start: number; first: number; accept: number; acceptCpu: number; publish: number; publishCpu: number; floodReads: number | null; dbQueries: number | null }

/** `f`'s result and the CPU time this process (server threads and clients alike) spent in it, µs. */
async function cpuOf<T>(f: () => Promise<T>): Promise<[T, number]> {
  const c0 = process.cpuUsage();
  const r = await f();
  const c = process.cpuUsage(c0);
  return [r, c.user + c.system];
}

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

/** A counter's value (summed over its series matching `match`) from /metrics. */
function counter(port: number, name: string, match: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: '/metrics', agent: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => { body += c.toString(); });
      res.on('end', () => {
        let sum = 0;
        for (const m of body.matchAll(new RegExp(`^ringcast_${name}\\{([^}]*)\\} (\\S+)$`, 'gm'))) if (m[1].includes(match)) sum += Number(m[2]);
        resolve(sum);
      });
    }).on('error', reject);
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * The only code a connection or an API request runs differently with a database store: the
 * app lookup also bumps a counter (app_store_lookups_total). ns per lookup, without and with.
 */
function lookupNs(): { array: number; store: number } {
  const config = loadConfig({ env: {}, overrides: { apps: [APP] } });
  const n = 5_000_000;
  const run = (reg: AppRegistry) => {
    let found = 0;
    const t0 = performance.now();
    for (let i = 0; i < n; i++) if (reg.lookupKey(i & 1 ? APP.key : 'unknown') !== undefined) found++;
    if (found !== n / 2) throw new Error('lookups');
    return ((performance.now() - t0) * 1e6) / n;
  };
  const plain = new AppRegistry(config.apps);
  const counted = new AppRegistry(config.apps);
  let total = 0;
  const c = { inc: () => { total++; } };
  counted.countLookups({ hit: c, miss: c, stale: c, storeDown: () => false });
  const a: number[] = [];
  const b: number[] = [];
  for (let r = 0; r < 5; r++) {
    a.push(run(plain));
    b.push(run(counted));
  }
  if (total !== 5 * n) throw new Error('counted lookups');
  return { array: median(a), store: median(b) };
}

async function main(): Promise<void> {
  Object.assign(process.env, DYNAMO_ENV);
  const [pg, maria, dyn] = await Promise.all([PostgresServer.start(), MariaDbServer.start(), DynaliteServer.start()]);
  try {
    await pg.query('CREATE DATABASE ringcast');
    await maria.query('CREATE DATABASE ringcast');
    const cache = { cache: { ttl: 60 } };
    const stores: Record<Exclude<Mode, 'array'>, ConfigInput> = {
      postgres: { app_manager: { driver: 'postgres', ...cache }, database: { postgres: { host: '127.0.0.1', port: pg.port, database: 'ringcast', table_name: 'apps' } } },
      mysql: { app_manager: { driver: 'mysql', ...cache }, database: { mysql: { host: '127.0.0.1', port: maria.port, username: 'root', database: 'ringcast', table_name: 'apps' } } },
      dynamodb: { app_manager: { driver: 'dynamodb', ...cache }, database: { dynamodb: { region: 'us-east-1', table_name: 'apps', endpoint_url: dyn.url } } },
    };
    for (const db of Object.values(stores)) {
      const store = createAppStore(loadConfig({ env: {}, overrides: { apps: [], ...db } }))!;
      await store.init();
      await store.put({ ...APP });
      await store.close();
    }
    /** What the database itself counts of the reads of its apps table, where it can. */
    const dbCount: Partial<Record<Mode, () => Promise<number>>> = {
      postgres: async () => Number((await pg.query("SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'apps'", [], 'ringcast'))[0].seq_scan),
      // our own SHOW is not a SELECT
      mysql: async () => Number(((await maria.query("SHOW GLOBAL STATUS LIKE 'Com_select'")) as { Value: string }[])[0].Value),
    };
    const results = new Map<Mode, Result[]>(MODES.map((m) => [m, []]));
    for (let round = 0; round <= ROUNDS; round++) { // round 0 warms the JIT and is not counted
      for (const mode of MODES.map((_, i) => MODES[(i + round) % MODES.length])) {
        const overrides: ConfigInput = mode === 'array' ? { apps: [APP] } : { apps: [], ...stores[mode] };
        const config = loadConfig({
          env: {}, overrides: {
            host: '127.0.0.1', port: 0, workers: WORKERS, log: { level: 'error' }, delta_compression: { enabled: false },
            metrics: { enabled: true, host: '127.0.0.1', port: 0 }, ...overrides,
          },
        });
        const t0 = performance.now();
        const srv = await start(config);
        const startMs = performance.now() - t0;
        const f0 = performance.now();
        const firstOk = (await accept(srv.port, APP.key, 1, 1)).ok;
        const first = performance.now() - f0;
        if (firstOk !== 1) throw new Error(`${mode}: the first connection was not established`);
        await accept(srv.port, APP.key, 200, CONC); // warm
        const [acc, accCpu] = await cpuOf(() => accept(srv.port, APP.key, CONNS, CONC));
        if (acc.ok !== CONNS) throw new Error(`${mode}: ${acc.ok}/${CONNS} connections established`);
        const [pub, pubCpu] = await cpuOf(() => publishRate(srv.port, PUBLISHES, CONC));
        let floodReads: number | null = null;
        let dbQueries: number | null = null;
        if (mode !== 'array') {
          const reads0 = await counter(srv.metricsPort!, 'app_store_reads_total', '');
          const db0 = await dbCount[mode]?.();
          const r = await accept(srv.port, `unknown-${Math.random().toString(36).slice(2)}`, FLOOD, CONC);
          if (r.ok !== 0) throw new Error(`${mode}: ${r.ok} unknown-key connections established`);
          floodReads = (await counter(srv.metricsPort!, 'app_store_reads_total', '')) - reads0;
          const db1 = await dbCount[mode]?.();
          if (db0 !== undefined && db1 !== undefined) dbQueries = db1 - db0;
        }
        await srv.stop();
        if (round === 0) continue;
        results.get(mode)!.push({ start: startMs, first, accept: acc.rate, acceptCpu: accCpu / CONNS, publish: pub, publishCpu: pubCpu / PUBLISHES, floodReads, dbQueries });
        console.log(`round ${round} ${mode}: start ${startMs.toFixed(0)} ms, first connection ${first.toFixed(1)} ms; accept ${acc.rate.toFixed(0)} conn/s (${(accCpu / CONNS).toFixed(0)} µs CPU each); API publish ${pub.toFixed(0)}/s (${(pubCpu / PUBLISHES).toFixed(0)} µs CPU each)`
          + (floodReads === null ? '' : `; ${FLOOD} unknown keys: ${floodReads} reads of the table${dbQueries === null ? '' : `, ${dbQueries} counted by the database`}`));
      }
    }
    const base = results.get('array')!;
    const baseAcc = median(base.map((r) => r.accept));
    const basePub = median(base.map((r) => r.publish));
    console.log(`\nmedians of ${ROUNDS} rounds, workers ${WORKERS}:`);
    const baseAccCpu = median(base.map((r) => r.acceptCpu));
    const basePubCpu = median(base.map((r) => r.publishCpu));
    console.log('| driver | start (ms) | first connection (ms) | accept (conn/s) | vs array | CPU per connection (µs) | vs array | API publish (/s) | vs array | CPU per publish (µs) | vs array | reads during the flood |');
    console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
    const pct = (x: number, b: number) => `${x >= b ? '+' : ''}${((x / b - 1) * 100).toFixed(1)} %`;
    for (const mode of MODES) {
      const rs = results.get(mode)!;
      const acc = median(rs.map((r) => r.accept));
      const pub = median(rs.map((r) => r.publish));
      const accCpu = median(rs.map((r) => r.acceptCpu));
      const pubCpu = median(rs.map((r) => r.publishCpu));
      const vs = (x: number, b: number) => (mode === 'array' ? '—' : pct(x, b));
      const reads = mode === 'array' ? '—' : `${Math.max(...rs.map((r) => r.floodReads ?? 0))}${rs[0].dbQueries === null ? '' : ` (database: ${Math.max(...rs.map((r) => r.dbQueries ?? 0))})`}`;
      console.log(`| ${mode} | ${median(rs.map((r) => r.start)).toFixed(0)} | ${median(rs.map((r) => r.first)).toFixed(1)} | ${acc.toFixed(0)} | ${vs(acc, baseAcc)} | ${accCpu.toFixed(0)} | ${vs(accCpu, baseAccCpu)} | ${pub.toFixed(0)} | ${vs(pub, basePub)} | ${pubCpu.toFixed(0)} | ${vs(pubCpu, basePubCpu)} | ${reads} |`);
    }
    const ns = lookupNs();
    console.log(`\nthe app lookup of a connection or API request: ${ns.array.toFixed(1)} ns (array), ${ns.store.toFixed(1)} ns counted (database store)`);
  } finally {
    await Promise.all([pg.stop(), maria.stop(), dyn.stop()]);
  }
}

main().then(() => process.exit(0), (err: unknown) => {
  console.error(err);
  process.exit(1);
});
