// Hostile clients against history, hooks and HTTP sessions, at full size, against ringcast
// from this checkout's build in its own process (bench/targets/ringcast.ts), each attack
// with only the public app key unless said:
//
//   1. 8 sockets subscribing to random history-* names (config.yaml's `{size: 100, ttl: 3600, rewind: 5}`) for N s: RSS kept
//      after every socket closed ≤ 64 MiB; again with history.driver redis: DBSIZE 0;
//   2. a channel holding 1,000 × 50 KiB, 4 sockets subscribing / unsubscribing with
//      `recover` from serial 0 for 30 s, while an idle socket on every shard pings and
//      the API publishes elsewhere: both p99 ≤ 200 ms, every publish 200, log ≤ 3,000 lines;
//   3. a client event nesting 16,500 levels with a client_event hook: a clear pusher:error,
//      no shard crash (the socket still answers, the others stay);
//   4. another address (127.0.0.2) naming an HTTP session's id: the unknown-session
//      answer; unknown-session answers from one address are throttled (429);
//   5. a subscribe hook for an HTTP session sees its ip, origin and user agent;
//   6. one address (127.0.0.3) opening sessions and WebSockets: refused at
//      limits.max_connections_per_ip (config.yaml's default) while 127.0.0.4 connects;
//   7. an idempotency key on /events then /batch_events and the reverse: a clear 4xx,
//      never 500, no key left pending.
//
// Prints one JSON line per attack and a Markdown table; exit status 0 only if all held.
//
//   make build && node dist/bench/hostile/features.js [--workers N] [--seconds S] [--replay-seconds S]

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startHookBackend } from '../../test/helpers/hook-backend';
import { RedisServer } from '../../test/helpers/redis';
import { killAllNow } from '../harness/procs';
import { freePort, type RunningTarget } from '../harness/target';
import { ringcastRoot, ringcastTarget } from '../targets/ringcast';
import { historyMetadata, replayAmplification, type Result } from './features-history';
import { deepClientEvent, hookAddress, idempotencyRoutes, perAddressCap, takeover } from './features-sessions';

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(name);
  if (i === -1) return dflt;
  const n = Number(process.argv[i + 1]);
  if (!(n > 0)) throw new Error(`${name} must be a positive number`);
  return n;
}

/** The shipped default of limits.max_connections_per_ip (config.yaml). */
function defaultPerIpCap(): number {
  const m = /^\s*max_connections_per_ip:\s*(\d+)/m.exec(fs.readFileSync(path.join(ringcastRoot(), 'config.yaml'), 'utf8'));
  if (!m) throw new Error('config.yaml has no limits.max_connections_per_ip');
  return Number(m[1]);
}

const HISTORY = 'channel_history: {"history-*": {size: 100, ttl: 3600, rewind: 5}, "replay-*": {size: 1000, ttl: 3600}}';

async function main(): Promise<number> {
  const workers = arg('--workers', 4);
  const seconds = arg('--seconds', 20);
  const replaySeconds = arg('--replay-seconds', 30);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ringcast-hostile-features-'));
  const results: Result[] = [];
  const servers: RunningTarget[] = [];
  const report = (r: Result) => {
    results.push(r);
    console.log(JSON.stringify({ workers, ...r }));
  };
  const start = async (extra: Parameters<typeof ringcastTarget>[1]) => {
    const port = await freePort();
    const s = await ringcastTarget(workers, extra).start({ port, tmpDir: tmp });
    servers.push(s);
    return s;
  };
  const load = os.loadavg()[0];
  let redis: RedisServer | null = null;
  let backend: Awaited<ReturnType<typeof startHookBackend>> | null = null;
  try {
    console.log(`ringcast workers:${workers}, host ${os.cpus().length} cores (load ${load.toFixed(2)}), node ${process.version}`);
    // 1 and 2: history, memory driver
    // a shard's share of memory_budget_mb must hold the 50 MB channel whole (the default
    // 256 MB over 4 shards evicts part of it, and recovery from 0 then answers too_old)
    const mem = await start({ appYaml: [HISTORY], yaml: ['history: {memory_budget_mb: 1024}'] });
    report(await historyMetadata(mem, seconds, 'memory'));
    report(await replayAmplification(mem, workers, replaySeconds));
    await mem.stop();
    // 1 again: history, redis driver
    redis = await RedisServer.start();
    const r = redis;
    const red = await start({ appYaml: [HISTORY], yaml: ['history: {driver: redis}', `database: {redis: {host: 127.0.0.1, port: ${r.port}}}`] });
    report(await historyMetadata(red, seconds, 'redis', async () => Number(/:(\d+)/.exec(await r.command('DBSIZE'))?.[1] ?? NaN)));
    await red.stop();
    // 3 to 7: hooks, HTTP sessions, the per-address cap, idempotency
    backend = await startHookBackend();
    const cap = defaultPerIpCap();
    const hooked = await start({
      appYaml: ['hooks:', `  url: ${backend.url}`, '  client_event: {enabled: true, channels: ["private-*"]}', '  subscribe: {enabled: true, channels: ["hooked-*"]}'],
      env: { LIMITS_MAX_CONNECTIONS_PER_IP: String(cap) },
    });
    report(await deepClientEvent(hooked, backend));
    report(await takeover(hooked, 5));
    report(await hookAddress(hooked, backend));
    report(await perAddressCap(hooked, cap));
    report(await idempotencyRoutes(hooked));
    if (!hooked.alive()) report({ attack: 'server alive', ok: false, bound: 'no exit', measured: hooked.exitReport() ?? '', figures: {} });
  } finally {
    for (const s of servers) await s.stop();
    await redis?.stop();
    await backend?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  console.log('');
  console.log(`| attack | bound | measured (workers ${workers}) | held |`);
  console.log('|---|---|---|---|');
  for (const r of results) console.log(`| ${r.attack} | ${r.bound} | ${r.measured.replace(/\|/g, '\\|')} | ${r.ok ? 'yes' : '**NO**'} |`);
  const failed = results.filter((r) => !r.ok).length;
  console.log(failed === 0 ? 'all checks held' : `${failed} check(s) failed`);
  return failed === 0 ? 0 : 1;
}

main().then((code) => process.exit(code), (err) => {
  console.error(err);
  killAllNow();
  process.exit(2);
});
