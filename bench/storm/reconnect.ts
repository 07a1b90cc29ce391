// Reconnect storm: a node restarted under 19,000 clients that reconnect and resubscribe by
// themselves, some with a rewind or a recovery, measured end to end.
//
//   node dist/bench/storm/reconnect.js [options]        (make bench-storm)
//   node dist/bench/storm/reconnect.js --help
//
// Per target (ringcast with --workers 1, then 2; the bare uWS ceiling for comparison):
//  1. a fresh server on a free port; --clients clients (gen.ts processes, ≤ --sockets-per-proc
//     each) connect and subscribe to --subs channels each: plain channels spread over
//     --plain, and for every --special-every-th client a rewind channel (`storm-rw-*`,
//     channel_history with rewind 5) or a recover subscription (`storm-rc-*`, history
//     without rewind, `recover: {epoch, serial}` of the last message the client saw);
//  2. --messages publishes to every rewind and recover channel, until every client got them;
//  3. the stop: SIGTERM (ringcast's drain closes every connection with 4200, over
//     --drain-ms), the process exits, and a new one starts on the SAME port; meanwhile every
//     client reconnects after U(0, --jitter-ms) ms, and retries a refused or failed attempt
//     after U(0, --retry-ms) ms (pusher-js style, but each client keeps its own timer);
//  4. until every client is back: connection_established, every subscription_succeeded
//     and, for recover subscriptions, pusher_internal:recovery.
// Times are taken from the moment SIGTERM is sent, on the monotonic clock every process of
// the machine shares. The ceiling knows only plain subscribes: its rewind / recover
// clients subscribe plainly there. With --redis the ringcast runs use history.driver redis
// on a redis-server this bench starts, so the history outlives the restart.
//
// Output: progress on stderr; one JSON line per run and a Markdown table on stdout.

import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import Pusher from 'pusher';
import { redisCommand, RedisServer } from '../../test/helpers/redis';
import { readOptions } from '../harness/args';
import { DEFAULT_SOCKETS_PER_PROC, sleep } from '../harness/load';
import { killAllNow } from '../harness/procs';
import { nowUs } from '../harness/protocol';
import { APP, freePort, type RunningTarget, type TargetDef } from '../harness/target';
import { ceilingTarget } from '../targets/ceiling';
import { ringcastTarget } from '../targets/ringcast';
import { StormPool } from './pool';
import { channelsOf, RECOVER_PATTERN, REWIND_PATTERN, type Layout } from './protocol';
import { statsFields, stormFigures, summary, table, type StormResult } from './report';

const USAGE = `Usage: node dist/bench/storm/reconnect.js [options]

  --workers LIST     ringcast runs, one per shard count                 [1,2]
  --ceiling yes|no   also the bare uWS ceiling (plain subscribes only)   [yes]
  --clients N        clients                                            [19000]
  --subs N           subscriptions per client                           [2]
  --plain N          plain channels each subscription spreads over      [100]
  --special-every N  every N-th client's second subscription is a rewind
                     or a recover one (0: none)                         [10]
  --special N        rewind channels, and as many recover channels      [20]
  --messages N       publishes to each of them before the restart       [10]
  --drain-ms N       ringcast's shutdown_drain_window (0: all at once)  [0]
  --jitter-ms N      a closed client reconnects after U(0, N) ms        [1000]
  --retry-ms N       a failed attempt is retried after U(0, N) ms       [1000]
  --redis yes|no     ringcast with history.driver redis                 [no]
  --rounds N         rounds of every target                             [1]
  --max-minutes M    no run starts after M minutes                      [3]
  --sockets-per-proc N  clients per client process                     [${DEFAULT_SOCKETS_PER_PROC}]
  --src-addrs N      spread clients over 127.0.0.2 … (0: 127.0.0.1)     [32]
  --timeout-s S      a phase (first connect, storm) gives up after S s  [60]
  --json FILE        also append the JSON lines to FILE
  --help`;

const started = Date.now();
function log(msg: string): void {
  process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${msg}\n`);
}

function parseArgs(argv: string[]) {
  const o = readOptions(argv, USAGE, ['workers', 'ceiling', 'clients', 'subs', 'plain', 'special-every', 'special', 'messages', 'drain-ms', 'jitter-ms',
    'retry-ms', 'redis', 'rounds', 'max-minutes', 'sockets-per-proc', 'src-addrs', 'timeout-s', 'json']);
  const yes = (k: string, def: boolean): boolean => {
    const v = o.get(k);
    if (v === undefined) return def;
    if (v !== 'yes' && v !== 'no') throw new Error(`--${k} must be yes or no, got "${v}"`);
    return v === 'yes';
  };
  const int = (k: string, def: number, min: number): number => Math.floor(o.num(k, def, min));
  const workers = (o.get('workers') ?? '1,2').split(',').map((w) => {
    const n = Number(w);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--workers: "${w}" is not a whole number ≥ 1`);
    return n;
  });
  const nAddr = int('src-addrs', 32, 0);
  if (nAddr > 252) throw new Error('--src-addrs must be at most 252');
  return {
    workers, ceiling: yes('ceiling', true), redis: yes('redis', false), clients: int('clients', 19_000, 1),
    layout: { plain: int('plain', 100, 1), perClient: int('subs', 2, 1), specialEvery: int('special-every', 10, 0), special: int('special', 20, 1) } satisfies Layout,
    messages: int('messages', 10, 0), drainMs: int('drain-ms', 0, 0), jitterMs: int('jitter-ms', 1000, 0), retryMs: int('retry-ms', 1000, 1),
    rounds: int('rounds', 1, 1), maxMinutes: o.num('max-minutes', 3, 0.1), socketsPerProc: int('sockets-per-proc', DEFAULT_SOCKETS_PER_PROC, 1),
    srcAddrs: Array.from({ length: nAddr }, (_, i) => `127.0.0.${2 + i}`), timeoutMs: o.num('timeout-s', 60, 1) * 1000, json: o.get('json') ?? null,
  };
}
type Opts = ReturnType<typeof parseArgs>;

interface Plan {
  def: TargetDef;
  ringcast: boolean;
}

/** The app's history patterns: rewind channels keep 50 and replay 5; recover channels keep 50, no rewind. */
const HISTORY_YAML = [
  'channel_history:',
  `  "${REWIND_PATTERN}": {size: 50, ttl: 600, rewind: 5}`,
  `  "${RECOVER_PATTERN}": {size: 50, ttl: 600}`,
];

/** Publishes `messages` events to every rewind and recover channel, 100 channels per request. */
async function publish(port: number, o: Opts): Promise<number> {
  // No keep-alive: an idle kept-alive API connection holds a stopping ringcast until half of
  // shutdown_grace_period (docs/architecture.md, "Shutdown"), which would count in the stop time.
  const agent = new http.Agent({ keepAlive: false });
  const sdk = new Pusher({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1', port: String(port), useTLS: false, agent });
  const channels: string[] = [];
  for (let n = 0; n < o.layout.special; n++) channels.push(`storm-rw-${n}`, `storm-rc-${n}`);
  for (let m = 0; m < o.messages; m++) {
    for (let i = 0; i < channels.length; i += 100) {
      const res = await sdk.trigger(channels.slice(i, i + 100), 'storm', { m });
      if (res.status !== 200) throw new Error(`publish answered ${res.status}`);
    }
  }
  agent.destroy();
  return o.messages * channels.length;
}

/** Starts the target on `port`, retrying while the old process's port is not free yet. */
async function startOn(def: TargetDef, port: number, tmpDir: string): Promise<RunningTarget> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await def.start({ port, tmpDir });
    } catch (err) {
      if (attempt >= 5) throw err;
      log(`${def.name}: restart attempt ${attempt} failed, again in 200 ms: ${(err as Error).message.split('\n')[0]}`);
      await sleep(200);
    }
  }
}

async function oneRun(plan: Plan, o: Opts, round: number, runIndex: number, tmpDir: string, redisPort: number | null): Promise<StormResult> {
  // every run starts with empty history (the redis-server outlives the runs)
  if (redisPort !== null) await redisCommand(redisPort, 'FLUSHALL', 5000);
  const port = await freePort();
  let server: RunningTarget | null = await plan.def.start({ port, tmpDir });
  const rotate = (runIndex * 5) % Math.max(1, o.srcAddrs.length);
  const pool = await StormPool.start({
    host: '127.0.0.1', port, clients: o.clients, socketsPerProc: o.socketsPerProc, layout: o.layout, recoveryAnswers: plan.ringcast,
    srcAddrs: [...o.srcAddrs.slice(rotate), ...o.srcAddrs.slice(0, rotate)], concurrency: 256, jitterMs: o.jitterMs, retryMs: o.retryMs,
  });
  try {
    const t00 = nowUs();
    const first = await pool.connect(o.timeoutMs);
    const initial = first.stats.back === o.clients ? (Math.max(...first.tBack) - t00) / 1e6 : NaN;
    if (first.stats.back < o.clients) throw new Error(`${plan.def.name}: only ${first.stats.back} of ${o.clients} clients subscribed on the first connect: ${JSON.stringify(first.stats.failures)} ${JSON.stringify(first.stats.errors)}`);
    log(`${plan.def.name}: ${o.clients} clients subscribed in ${initial.toFixed(2)} s (first connect)`);

    // history to rewind and recover from; wait until every special client has it
    const specials = countSpecials(o);
    const published = await publish(port, o);
    const want = (specials.rewind + specials.recover) * o.messages;
    let before = await pool.snapshot();
    for (const until = Date.now() + 10_000; before.msgs < want && Date.now() < until;) {
      await sleep(100);
      before = await pool.snapshot();
    }
    if (before.msgs < want) log(`${plan.def.name}: only ${before.msgs} of ${want} history messages arrived before the restart`);

    // the storm
    await pool.arm();
    const waiting = pool.waitBack(o.timeoutMs);
    const t0 = nowUs();
    const old = server;
    await old.stop();
    const tStopped = nowUs();
    // how the old process ended: exit code 0, or killed when it outlived its stop grace
    const stopExit = /\(code (\S+), signal (\S+)\)/.exec(old.exitReport() ?? '')?.slice(1).join('/') ?? '?';
    if (stopExit !== '0/null') log(`${plan.def.name}: the stop did not end with exit 0: ${old.exitReport() ?? '?'}`);
    server = null;
    server = await startOn(plan.def, port, tmpDir);
    const tReady = nowUs();
    log(`${plan.def.name}: stopped after ${((tStopped - t0) / 1e6).toFixed(2)} s, answering again after ${((tReady - t0) / 1e6).toFixed(2)} s`);
    const storm = await waiting;
    // rewound and recovered messages follow the answers a client waits for: count them once
    // they stopped arriving
    let after = await pool.snapshot();
    for (let quietSince = Date.now(), until = Date.now() + 3000; Date.now() - quietSince < 300 && Date.now() < until;) {
      await sleep(100);
      const s = await pool.snapshot();
      if (s.msgs !== after.msgs) quietSince = Date.now();
      after = s;
    }
    const fig = stormFigures(storm, t0);
    const ready_s = Math.round((tReady - t0) / 1e3) / 1000;
    return {
      target: plan.def.name, round, driver: plan.ringcast ? (redisPort !== null ? 'redis' : 'memory') : 'none', clients: o.clients,
      subscriptions: o.clients * o.layout.perClient, rewind_clients: specials.rewind, recover_clients: specials.recover,
      initial_s: Math.round(initial * 1000) / 1000, stopped_s: Math.round((tStopped - t0) / 1e3) / 1000, stop_exit: stopExit, ready_s, restart_s: Math.round((tReady - tStopped) / 1e3) / 1000, ...fig,
      back_after_ready_s: Math.round((fig.all_back_s - ready_s) * 1000) / 1000, timed_out: storm.timedOut,
      ...statsFields({ ...storm.stats, rewindMsgs: after.rewindMsgs, serialGaps: after.serialGaps, msgs: after.msgs }), published_msgs: published, received_before: before.msgs, clients_cpu_s: Math.round(storm.stats.cpuUs / 1e5) / 10,
    };
  } finally {
    await pool.close();
    await server?.stop();
  }
}

function countSpecials(o: Opts): { rewind: number; recover: number } {
  let rewind = 0;
  let recover = 0;
  for (let g = 0; g < o.clients; g++) {
    for (const s of channelsOf(o.layout, g)) {
      if (s.kind === 'rewind') rewind++;
      else if (s.kind === 'recover') recover++;
    }
  }
  return { rewind, recover };
}

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ringcast-bench-storm-'));
  let redis: RedisServer | null = null;
  const results: StormResult[] = [];
  let failed = false;
  try {
    let env: Record<string, string> = {};
    if (o.redis) {
      redis = await RedisServer.start();
      env = { HISTORY_DRIVER: 'redis', DATABASE_REDIS_HOST: '127.0.0.1', DATABASE_REDIS_PORT: String(redis.port) };
      log(`redis-server on port ${redis.port}`);
    }
    const plans: Plan[] = o.workers.map((w) => ({
      def: ringcastTarget(w, { env, yaml: [`shutdown_drain_window: ${o.drainMs}`], appYaml: HISTORY_YAML }), ringcast: true,
    }));
    if (o.ceiling) plans.unshift({ def: ceilingTarget, ringcast: false });
    for (const p of plans) await p.def.prepare?.(log);
    let runIndex = 0;
    for (let round = 1; round <= o.rounds; round++) {
      for (const plan of round % 2 === 1 ? plans : [...plans].reverse()) {
        if (Date.now() - started > o.maxMinutes * 60_000) {
          log(`time guard (${o.maxMinutes} min): ${plan.def.name} round ${round} skipped`);
          continue;
        }
        log(`round ${round}/${o.rounds}: ${plan.def.name}, ${o.clients} clients × ${o.layout.perClient} subscriptions`);
        try {
          const r = await oneRun(plan, o, round, runIndex++, tmpDir, redis?.port ?? null);
          results.push(r);
          const line = JSON.stringify(r);
          process.stdout.write(line + '\n');
          if (o.json) fs.appendFileSync(o.json, line + '\n');
          log(`${plan.def.name}: all back ${r.all_back_s} s after the stop (ready after ${r.ready_s} s), p50 ${r.back_p50_s} s, p99 ${r.back_p99_s} s`);
        } catch (err) {
          failed = true;
          log(`${plan.def.name} round ${round} failed: ${(err as Error).stack ?? String(err)}`);
        }
      }
    }
  } finally {
    await redis?.stop();
    if (!failed) fs.rmSync(tmpDir, { recursive: true, force: true });
    else log(`server logs kept in ${tmpDir}`);
  }
  process.stdout.write('\n' + table(results) + '\nMedians over the rounds (ratios: medians of the per-round ratios to the ceiling):\n\n' + summary(results));
  if (failed) process.exitCode = 1;
}

main().catch((err: Error) => {
  process.stderr.write(`bench/storm: ${err.stack ?? err.message}\n`);
  killAllNow();
  process.exit(1);
});
