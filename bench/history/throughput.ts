// Delivered messages per second on one channel, the same channel three ways: without
// history (today's path), with history and stock subscribers (rewind 0: numbered by the
// owner shard, one more ring hop), and with history and subscribers that asked for
// positions (`recover`: frames with __serial on the serial topic). Same server, same
// clients, same publishes (HTTP keep-alive, `--conc` in flight), interleaved rounds.
//
//   node dist/bench/history/throughput.js [--workers 4] [--subs 50] [--messages 4000] [--rounds 3] [--conc 16] [--redis PORT | --redis-cluster]
//
// --redis PORT: history.driver redis on the redis-server at 127.0.0.1:PORT (history/redis.ts:
// each history publish is one script in Redis and its answer waits for it; Redis's own CPU
// is not in the figures). --redis-cluster: history.driver redis-cluster on a 3-master Redis
// Cluster this bench starts (redis-server on ephemeral ports, stopped at the end).
//
// CPU: process.cpuUsage() of this process (server threads and the clients, which are the
// same in every mode), per delivered message.

import http from 'node:http';
import WebSocket from 'ws';
import { loadConfig } from '../../src/config';
import { start } from '../../src/main';
import { signApiQuery } from '../../src/protocol/api-auth';
import { RedisCluster } from '../../test/helpers/redis';

const arg = (name: string, d: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : d;
};
const WORKERS = arg('workers', 4);
const SUBS = arg('subs', 50);
const MESSAGES = arg('messages', 4000);
const ROUNDS = arg('rounds', 3);
const CONC = arg('conc', 16);
const REDIS = arg('redis', 0);
const CLUSTER = process.argv.includes('--redis-cluster');
const APP = { id: 'bench', key: 'bench-key', secret: 'bench-secret' };

type Mode = 'plain' | 'history' | 'recover';

async function main(): Promise<void> {
  const cluster = CLUSTER ? await RedisCluster.start() : null;
  const config = loadConfig({ env: {}, overrides: {
    host: '127.0.0.1', port: 0, workers: WORKERS, log: { level: 'error' },
    ...(REDIS > 0 ? { history: { driver: 'redis' }, database: { redis: { host: '127.0.0.1', port: REDIS } } } : {}),
    ...(cluster ? { history: { driver: 'redis-cluster' }, database: { redis_cluster: { nodes: cluster.ports.map((port) => ({ host: '127.0.0.1', port })) } } } : {}),
    apps: [{ ...APP, max_backend_events_per_second: null, max_client_events_per_second: 1_000_000, channel_history: { 'h-*': { size: 1000, ttl: 60 } } } as never],
  } });
  const server = await start(config);
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONC });
  const publish = (channel: string, i: number) => new Promise<void>((resolve, reject) => {
    const body = JSON.stringify({ name: 'm', channel, data: `{"i":${i},"pad":"${'x'.repeat(80)}"}` });
    const path = `/apps/${APP.id}/events`;
    const q = signApiQuery(APP.key, APP.secret, 'POST', path, {}, body, Math.floor(Date.now() / 1000));
    const req = http.request({ host: '127.0.0.1', port: server.port, method: 'POST', path: `${path}?${q}`, agent, headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`status ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(body);
  });

  async function round(mode: Mode, n: number): Promise<{ rate: number; cpuUs: number }> {
    const channel = `${mode === 'plain' ? 'p' : 'h'}-${mode}-${n}`;
    let received = 0;
    const want = SUBS * MESSAGES;
    let done!: () => void;
    const all = new Promise<void>((r) => { done = r; });
    const socks: WebSocket[] = [];
    await Promise.all(Array.from({ length: SUBS }, () => new Promise<void>((resolve, reject) => {
      const ws = new WebSocket(`ws://127.0.0.1:${server.port}/app/${APP.key}`);
      socks.push(ws);
      ws.on('error', reject);
      ws.on('message', (raw: Buffer) => {
        const s = raw.toString();
        if (s.includes('subscription_succeeded')) return resolve();
        if (s.includes('connection_established')) {
          ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel, ...(mode === 'recover' ? { recover: {} } : {}) } }));
          return;
        }
        if (s.startsWith('{"event":"m"') && ++received === want) done();
      });
    })));
    // the recover subscriptions join their topic after the owner's answer
    await new Promise((r) => setTimeout(r, 200));
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    let next = 0;
    await Promise.all(Array.from({ length: CONC }, async () => {
      while (next < MESSAGES) await publish(channel, next++);
    }));
    await all;
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    for (const ws of socks) ws.close();
    return { rate: (want / ms) * 1000, cpuUs: (cpu.user + cpu.system) / want };
  }

  const results: Record<Mode, { rate: number; cpuUs: number }[]> = { plain: [], history: [], recover: [] };
  await round('plain', -1); // warm-up
  await round('history', -1);
  for (let r = 0; r < ROUNDS; r++) {
    for (const mode of ['plain', 'history', 'recover'] as const) results[mode].push(await round(mode, r));
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const base = median(results.plain.map((x) => x.rate));
  console.log(`${cluster ? 'history.driver redis-cluster (3 masters), ' : REDIS > 0 ? 'history.driver redis, ' : ''}workers ${WORKERS}, ${SUBS} subscribers, ${MESSAGES} publishes (${CONC} in flight), ${ROUNDS} rounds, medians:`);
  for (const mode of ['plain', 'history', 'recover'] as const) {
    const rate = median(results[mode].map((x) => x.rate));
    const cpu = median(results[mode].map((x) => x.cpuUs));
    console.log(`  ${mode.padEnd(8)} ${Math.round(rate).toString().padStart(8)} delivered/s  ${(rate / base).toFixed(2)}x  ${cpu.toFixed(2)} us CPU per delivered message`);
  }
  agent.destroy();
  await server.stop();
  await cluster?.stop();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
