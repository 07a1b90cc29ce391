// The benchmark scenarios. Each run gets a started target and returns flat numbers;
// bench/run.ts repeats runs, takes medians and prints them. How a publishing window is
// measured (and by which publisher) is in measure.ts.

import { GenPool, sleep } from './load';
import { measurePublish, measureWrk, round } from './measure';
import type { ChannelSpec } from './protocol';
import { nowUs } from './protocol';
import { rssKb, type RunningTarget } from './target';

export interface BenchOptions {
  host: string;
  runs: number;
  warmupS: number;
  fanout: { subs: number; durationS: number };
  latency: { subs: number; rate: number; durationS: number };
  channels: { conns: number; perConn: number; durationS: number };
  idle: { conns: number; spread: number };
  api: { durationS: number };
  apiConns: number;
  pipeline: number;
  /** Publisher processes sharing apiConns. */
  pubProcs: number;
  payloadBytes: number;
  /** Load-generator processes (0 = automatic). */
  genProcs: number;
  /** Source addresses for the subscribers' sockets. */
  srcAddrs: string[];
  /** WebSocket upgrades in flight per generator process. */
  concurrency: number;
  /** Sockets per generator process when genProcs is automatic. */
  socketsPerProc: number;
  /** Publisher of the API-only and many-channels scenarios (the others always use node). */
  publisher: 'wrk' | 'node';
  /** The wrk binary (null: not installed), its threads, and the API-only pool's size. */
  wrkBin: string | null;
  wrkThreads: number;
  wrkPool: number;
}

export type Result = Record<string, number>;

export interface MetricDef {
  key: string;
  label: string;
  better: 'higher' | 'lower';
  /** Formats the value for the table. */
  unit: 'rate' | 'ms' | 's' | 'kb' | 'us' | 'ratio';
}

export interface Scenario {
  id: string;
  title: string;
  metrics: MetricDef[];
  /** Upper bound of one run, for the watchdog. */
  budgetMs(o: BenchOptions): number;
  run(t: RunningTarget, o: BenchOptions, log: (m: string) => void): Promise<Result>;
}

type Log = (m: string) => void;

// ---- helpers ---------------------------------------------------------------------------

function startPool(t: RunningTarget, o: BenchOptions, conns: number, channels: ChannelSpec, latency: boolean, subscribeOnConnect: boolean, minProcs: number): Promise<GenPool> {
  return GenPool.start({
    host: o.host, port: t.port, connections: conns, procs: o.genProcs, minProcs,
    channels, latency, subscribeOnConnect, srcAddrs: o.srcAddrs, concurrency: o.concurrency, socketsPerProc: o.socketsPerProc,
  });
}

/** Fails the run when not every connection came up (the numbers would mean something else). */
function requireAll(what: string, got: number, want: number, errors: Record<string, number>): void {
  if (got < want) throw new Error(`${what}: ${got} of ${want}; errors ${JSON.stringify(errors)}`);
}

// ---- scenarios ---------------------------------------------------------------------------

/** fan-out and latency: 1 channel, N subscribers; fan-out publishes at full speed, latency at a fixed rate. */
async function oneChannel(t: RunningTarget, o: BenchOptions, latency: boolean): Promise<Result> {
  const spec = latency ? o.latency : o.fanout;
  const prefix = latency ? 'lat' : 'fan';
  const rate = latency ? o.latency.rate : 0;
  const n = spec.subs;
  const pool = await startPool(t, o, n, { prefix, perConn: 1, mod: 1 }, latency, true, 2);
  try {
    const c = await pool.connect(60_000);
    requireAll('subscribed', c.subsConfirmed, n, c.errors);
    const r = await measurePublish(t, o, pool, {
      rate, maxDurationMs: (o.warmupS + spec.durationS + 30) * 1000,
      channelPrefix: `${prefix}0-`, channelCount: 1, timestamp: latency, payloadBytes: o.payloadBytes, event: 'bench',
    }, spec.durationS, n, latency);
    return latency ? { subscribers: n, rate, ...r } : { subscribers: n, ...r };
  } finally {
    await pool.close();
  }
}

const fanout: Scenario = {
  id: 'fanout',
  title: 'fan-out: 1 channel, N subscribers, publish at full speed',
  metrics: [
    { key: 'delivered_per_s', label: 'delivered msgs/s', better: 'higher', unit: 'rate' },
    { key: 'api_req_per_s', label: 'API req/s', better: 'higher', unit: 'rate' },
  ],
  budgetMs: (o) => (o.warmupS + o.fanout.durationS) * 1000 + 90_000,
  run: (t, o) => oneChannel(t, o, false),
};

const latency: Scenario = {
  id: 'latency',
  title: 'latency: 1 channel, N subscribers, fixed publish rate, end-to-end latency',
  metrics: [
    { key: 'p50_ms', label: 'p50 latency', better: 'lower', unit: 'ms' },
    { key: 'p99_ms', label: 'p99 latency', better: 'lower', unit: 'ms' },
    { key: 'max_ms', label: 'max latency', better: 'lower', unit: 'ms' },
  ],
  budgetMs: (o) => (o.warmupS + o.latency.durationS) * 1000 + 90_000,
  run: (t, o) => oneChannel(t, o, true),
};

const channels: Scenario = {
  id: 'channels',
  title: 'many channels: N connections each on its own channels, round-robin publishes',
  metrics: [
    { key: 'delivered_per_s', label: 'delivered msgs/s', better: 'higher', unit: 'rate' },
    { key: 'subscribe_s', label: 'all subscriptions confirmed', better: 'lower', unit: 's' },
    { key: 'server_cpu_us_per_publish', label: 'server CPU per publish', better: 'lower', unit: 'us' },
  ],
  budgetMs: (o) => (o.warmupS + o.channels.durationS) * 1000 + 180_000,
  async run(t, o) {
    const n = o.channels.conns;
    const k = o.channels.perConn;
    const pool = await startPool(t, o, n, { prefix: 'own', perConn: k, mod: 0 }, false, false, 2);
    try {
      const t0 = nowUs();
      const c = await pool.connect(90_000);
      requireAll('connected', c.established, n, c.errors);
      const connectS = (Math.max(...c.per.map((p) => p.tLastEstablished)) - t0) / 1e6;
      const s = await pool.subscribe(90_000);
      requireAll('subscriptions confirmed', s.subsConfirmed, n * k, s.errors);
      const subscribeS = (Math.max(...s.per.map((p) => p.tLastSubConfirmed)) - Math.min(...s.per.map((p) => p.tFirstSubSent))) / 1e6;
      // wrk: one pre-signed request per channel, replayed round-robin like the Node publisher's
      const r = o.publisher === 'wrk'
        ? await measureWrk(t, o, pool, { channelOf: (i) => `own0-${i % n}`, poolSize: n }, o.channels.durationS, 1)
        : await measurePublish(t, o, pool, {
          rate: 0, maxDurationMs: (o.warmupS + o.channels.durationS + 30) * 1000,
          channelPrefix: 'own0-', channelCount: n, timestamp: false, payloadBytes: o.payloadBytes, event: 'bench',
        }, o.channels.durationS, 1, false);
      return {
        connections: n, subscriptions: n * k, connect_s: round(connectS), subscribe_s: round(subscribeS),
        subscribe_per_s: round((n * k) / subscribeS, 1), ...r,
      };
    } finally {
      await pool.close();
    }
  },
};

function idle(spread: 'one' | 'spread'): Scenario {
  return {
    id: spread === 'one' ? 'idle-1ch' : 'idle-spread',
    title: spread === 'one' ? 'idle connections on 1 channel' : 'idle connections spread over many channels',
    metrics: [
      { key: 'rss_per_conn_kb', label: 'server RSS per connection', better: 'lower', unit: 'kb' },
      { key: 'conn_per_s', label: 'connections/s', better: 'higher', unit: 'rate' },
      { key: 'subscribed_s', label: 'all connected + subscribed', better: 'lower', unit: 's' },
    ],
    budgetMs: () => 240_000,
    async run(t, o, log: Log) {
      const n = o.idle.conns;
      const mod = spread === 'one' ? 1 : o.idle.spread;
      await sleep(700); // let the fresh server settle before the baseline
      const rss0 = rssKb(t.pid);
      const pool = await startPool(t, o, n, { prefix: 'idle', perConn: 1, mod }, false, true, 1);
      try {
        const t0 = nowUs();
        const c = await pool.connect(180_000);
        requireAll('subscribed', c.subsConfirmed, n, c.errors);
        const connectS = (Math.max(...c.per.map((p) => p.tLastEstablished)) - t0) / 1e6;
        const subscribedS = (Math.max(...c.per.map((p) => p.tLastSubConfirmed)) - t0) / 1e6;
        await sleep(1000);
        const rss1 = rssKb(t.pid);
        log(`  ${t.name}: RSS ${Math.round(rss0 / 1024)} → ${Math.round(rss1 / 1024)} MiB with ${c.established} connections`);
        return {
          connections: n, channels: mod, rss_before_mb: round(rss0 / 1024, 1), rss_after_mb: round(rss1 / 1024, 1),
          rss_per_conn_kb: round((rss1 - rss0) / c.established, 3),
          connect_s: round(connectS), conn_per_s: round(c.established / connectS, 1), subscribed_s: round(subscribedS),
        };
      } finally {
        await pool.close();
      }
    },
  };
}

const api: Scenario = {
  id: 'api',
  title: 'API only: publishes to a channel without subscribers at full speed',
  metrics: [
    { key: 'api_req_per_s', label: 'API req/s', better: 'higher', unit: 'rate' },
    { key: 'api_p99_ms', label: 'API p99', better: 'lower', unit: 'ms' },
    { key: 'server_cpu_us_per_publish', label: 'server CPU per publish', better: 'lower', unit: 'us' },
  ],
  budgetMs: (o) => (o.warmupS + o.api.durationS) * 1000 + 60_000,
  async run(t, o) {
    if (o.publisher === 'wrk') {
      return measureWrk(t, o, null, { channelOf: () => 'nobody-0', poolSize: o.wrkPool }, o.api.durationS, 0);
    }
    return measurePublish(t, o, null, {
      rate: 0, maxDurationMs: (o.warmupS + o.api.durationS + 30) * 1000,
      channelPrefix: 'nobody-', channelCount: 1, timestamp: false, payloadBytes: o.payloadBytes, event: 'bench',
    }, o.api.durationS, 0, false);
  },
};

export const SCENARIOS: Scenario[] = [fanout, latency, channels, idle('one'), idle('spread'), api];
