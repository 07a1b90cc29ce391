// What the data plane by interest (src/adapter/buckets.ts) saves and spreads.
//
//   node dist/bench/cluster/interest.js waste  [options]
//   node dist/bench/cluster/interest.js spread [options]
//   node dist/bench/cluster/interest.js --help
//
// waste   2 nodes over one redis-server (--backend redis) or nats-server (--backend nats);
//         --subs subscribers, each on its own channel, all on node A; publishes at --rate
//         for --seconds through node A. Reports the CPU of node B (% of one core, /proc)
//         and the bytes node B read (/proc/<pid>/io rchar: its backend connection and
//         nothing else, it has no clients), node A's CPU and the backend's for reference.
// spread  3 nodes over a 3-master Redis Cluster; --subs channels, each with one
//         subscriber on every node; publishes at --rate through node A. Reports each
//         master's share of the pub/sub commands it executed (INFO commandstats:
//         spublish + publish) and checks that every publish answered 200 reached its
//         three subscribers (lost = 0).
// subscribe  2 nodes over one redis-server (or --backend nats); one socket on node B
//         subscribes --subs fresh channels one after the other (each the first of its
//         bucket on the node: one backend round trip), then a second socket subscribes the
//         same channels (buckets held: answered at once); then a storm: --storm sockets
//         connect to node B at once, each subscribing its own fresh channel (a node's
//         clients coming back after a restart). Reports p50 / p99 subscribe times and the
//         storm's time until every socket was answered.
//
// model   --nodes nodes (6) of 1 shard over one redis-server, adapter.buckets --buckets
//         (256); each node has subscribers on its own --subs channels; publishes at --rate
//         spread over all the channels through node A. For every node but A (A also reads
//         the HTTP requests): the share of publishes its buckets should bring it (from the
//         channels' buckets, and the model's 1 - e^(-channels/buckets)), and the bytes it
//         read per publish so predicted: the same figure on every node when the model holds.
//
// --base DIR runs the same with another checkout's build (bench/README.md, "Before and
// after"), e.g. the build before buckets, for the figures of docs/scaling.md.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { NatsServer } from '../../test/helpers/nats';
import { RedisCluster, RedisServer, redisCommand } from '../../test/helpers/redis';
import { readOptions } from '../harness/args';
import { Publisher, sleep } from '../harness/load';
import { killAllNow } from '../harness/procs';
import { APP, freePort, processCpuUs, type RunningTarget } from '../harness/target';
import { bucketOf } from '../../src/channels/interest';
import { ringcastTarget } from '../targets/ringcast';

const USAGE = `Usage: node dist/bench/cluster/interest.js waste|spread [options]
  --backend redis|nats  the backend of waste                          [redis]
  --subs N              subscribed channels                           [200]
  --rate N              publishes per second through node A           [2000]
  --seconds S           measured window                               [5]
  --workers N           shards per node                               [1]
  --storm N             sockets of the subscribe storm                [2000]
  --nodes N             nodes of model                                [6]
  --buckets N           adapter.buckets of model                      [256]
  --base DIR            another checkout's build (before / after)
  --help`;

const o = readOptions(process.argv.slice(3), USAGE, ['backend', 'subs', 'rate', 'seconds', 'workers', 'base', 'storm', 'nodes', 'buckets']);
const mode = process.argv[2];
if (mode !== 'waste' && mode !== 'spread' && mode !== 'subscribe' && mode !== 'model') {
  process.stderr.write(`${USAGE}\n`);
  process.exit(2);
}
const backend = o.get('backend') ?? 'redis';
if (backend !== 'redis' && backend !== 'nats') throw new Error(`--backend: "${backend}" is not redis or nats`);
const subs = Math.floor(o.num('subs', 200, 1));
const rate = o.num('rate', 2000, 1);
const seconds = o.num('seconds', 5, 1);
const workers = Math.floor(o.num('workers', 1, 1));
const base = o.get('base') ?? undefined;
const storm = Math.floor(o.num('storm', 2000, 1));
const nodeCount = Math.floor(o.num('nodes', 6, 2));
const bucketCount = Math.floor(o.num('buckets', 256, 1));

const servers: RunningTarget[] = [];
const stops: (() => Promise<void>)[] = [];
const log = (msg: string) => process.stderr.write(`${msg}\n`);

/** Bytes the process read (every read(2), sockets included). */
function rchar(pid: number): number {
  const m = /rchar: (\d+)/.exec(fs.readFileSync(`/proc/${pid}/io`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

/** Sockets on `port` subscribed to `channels` (at most 500 a socket); counts the events they get. */
async function subscribe(port: number, channels: string[]): Promise<{ got: () => number; close: () => void }> {
  let got = 0;
  const sockets: WebSocket[] = [];
  for (let i = 0; i < channels.length; i += 500) {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/app/${APP.key}?protocol=7`);
    sockets.push(ws);
    const part = channels.slice(i, i + 500);
    let pending = part.length;
    await new Promise<void>((resolve, reject) => {
      ws.on('error', reject);
      ws.on('message', (raw) => {
        const f = JSON.parse((raw as Buffer).toString()) as { event: string };
        if (f.event === 'pusher:connection_established') for (const channel of part) ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel } }));
        else if (f.event === 'pusher_internal:subscription_succeeded' && --pending === 0) resolve();
        else if (f.event === 'bench') got++;
      });
    });
  }
  return { got: () => got, close: () => { for (const ws of sockets) ws.close(); } };
}

async function nodes(n: number, env: Record<string, string>): Promise<RunningTarget[]> {
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ringcast-interest-'));
  const out: RunningTarget[] = [];
  for (let i = 0; i < n; i++) {
    const t = await ringcastTarget(workers, { env, ...(base ? { base } : {}) }).start({ port: await freePort(), tmpDir });
    servers.push(t);
    out.push(t);
  }
  await sleep(1000); // the nodes' first heartbeats
  return out;
}

async function publish(port: number, channelCount: number): Promise<{ ok: number; failed: number }> {
  const pub = await Publisher.start({ host: '127.0.0.1', port, appId: APP.id, key: APP.key, secret: APP.secret, conns: 8, pipeline: 1, srcAddr: '127.0.0.1' });
  stops.push(() => pub.close());
  await pub.run({ rate, maxDurationMs: seconds * 1000 + 5000, channelPrefix: 'ch-', channelCount, timestamp: false, payloadBytes: 100, event: 'bench' });
  await sleep(seconds * 1000);
  const s = await pub.stop();
  return { ok: s.ok, failed: s.sent - s.ok };
}

/** The backend of waste and subscribe: its nodes' env and its pid. */
async function startBackendServer(): Promise<{ env: Record<string, string>; pid: number | null }> {
  if (backend === 'redis') {
    const r = await RedisServer.start();
    stops.push(() => r.stop());
    return { env: { ADAPTER_DRIVER: 'redis', DATABASE_REDIS_HOST: '127.0.0.1', DATABASE_REDIS_PORT: String(r.port) }, pid: r.pid };
  }
  const n = await NatsServer.start(undefined, { jetstream: false });
  stops.push(() => n.stop());
  return { env: { ADAPTER_DRIVER: 'nats', NATS_SERVERS: n.url }, pid: n.pid };
}

async function waste(): Promise<void> {
  const { env, pid: backendPid } = await startBackendServer();
  const [a, b] = await nodes(2, env);
  const channels = Array.from({ length: subs }, (_, i) => `ch-${i}`);
  const s = await subscribe(a.port, channels);
  const before = { a: processCpuUs(a.pid), b: processCpuUs(b.pid), be: backendPid ? processCpuUs(backendPid) : 0, read: rchar(b.pid), t: process.hrtime.bigint() };
  const r = await publish(a.port, subs);
  const us = Number(process.hrtime.bigint() - before.t) / 1000;
  await sleep(500);
  const pct = (x: number) => Number((100 * x / us).toFixed(1));
  const line = {
    bench: 'cluster-interest-waste', backend, base: base ?? null, subs, rate, seconds, workers,
    published_ok: r.ok, failed: r.failed, delivered: s.got(),
    node_b_cpu_pct: pct(processCpuUs(b.pid) - before.b), node_b_read_bytes: rchar(b.pid) - before.read,
    node_a_cpu_pct: pct(processCpuUs(a.pid) - before.a), backend_cpu_pct: backendPid ? pct(processCpuUs(backendPid) - before.be) : null,
  };
  s.close();
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

/** A socket on `port`, open. */
function open(port: number): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/app/${APP.key}?protocol=7`);
    ws.once('error', reject);
    ws.once('message', () => resolve(ws)); // connection_established
  });
}

/** ms from the subscribe to its subscription_succeeded. */
function timedSubscribe(ws: WebSocket, channel: string): Promise<number> {
  const t0 = process.hrtime.bigint();
  return new Promise((resolve) => {
    const on = (raw: Buffer) => {
      const f = JSON.parse(raw.toString()) as { event: string; channel?: string };
      if (f.event !== 'pusher_internal:subscription_succeeded' || f.channel !== channel) return;
      ws.off('message', on);
      resolve(Number(process.hrtime.bigint() - t0) / 1e6);
    };
    ws.on('message', on);
    ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel } }));
  });
}

const pctl = (xs: number[], q: number) => Number([...xs].sort((x, y) => x - y)[Math.min(xs.length - 1, Math.floor(q * xs.length))].toFixed(2));

async function subscribeTimes(): Promise<void> {
  const { env } = await startBackendServer();
  const [, b] = await nodes(2, env);
  const channels = Array.from({ length: subs }, (_, i) => `first-${i}`);
  const first = await open(b.port);
  const firstMs: number[] = [];
  for (const c of channels) firstMs.push(await timedSubscribe(first, c));
  const second = await open(b.port);
  const heldMs: number[] = [];
  for (const c of channels) heldMs.push(await timedSubscribe(second, c));
  const t0 = Date.now();
  const sockets = await Promise.all(Array.from({ length: storm }, () => open(b.port)));
  const stormMs = await Promise.all(sockets.map((ws, i) => timedSubscribe(ws, `storm-${i}`)));
  const line = {
    bench: 'cluster-interest-subscribe', backend, base: base ?? null, subs, storm, workers,
    first_of_bucket_ms: { p50: pctl(firstMs, 0.5), p99: pctl(firstMs, 0.99) },
    bucket_held_ms: { p50: pctl(heldMs, 0.5), p99: pctl(heldMs, 0.99) },
    storm_subscribe_ms: { p50: pctl(stormMs, 0.5), p99: pctl(stormMs, 0.99) }, storm_total_ms: Date.now() - t0,
  };
  for (const ws of [first, second, ...sockets]) ws.close();
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

async function model(): Promise<void> {
  const { env } = await startBackendServer();
  const ns = await nodes(nodeCount, { ...env, ADAPTER_BUCKETS: String(bucketCount) });
  const total = nodeCount * subs;
  // channel k (the publisher's ch-<k>) has its subscriber on node k mod nodes
  const groups = [];
  for (let i = 0; i < nodeCount; i++) {
    groups.push(await subscribe(ns[i].port, Array.from({ length: subs }, (_, j) => `ch-${j * nodeCount + i}`)));
  }
  const bucketsOf = (i: number) => new Set(Array.from({ length: subs }, (_, j) => bucketOf(APP.id, `ch-${j * nodeCount + i}`, bucketCount)));
  const before = ns.map((n) => rchar(n.pid));
  const r = await publish(ns[0].port, total);
  await sleep(500);
  const per = ns.map((n, i) => {
    const held = bucketsOf(i);
    let inHeld = 0;
    for (let k = 0; k < total; k++) if (held.has(bucketOf(APP.id, `ch-${k}`, bucketCount))) inHeld++;
    const share = inHeld / total;
    const bytes = rchar(n.pid) - before[i];
    return { node: i, buckets_held: held.size, share_pct: Number((100 * share).toFixed(1)), bytes_read: bytes, bytes_per_predicted_publish: i === 0 ? null : Math.round(bytes / Math.max(1, share * r.ok)) };
  });
  const line = {
    bench: 'cluster-interest-model', base: base ?? null, nodes: nodeCount, buckets: bucketCount, subs_per_node: subs, rate, seconds,
    published_ok: r.ok, delivered: groups.reduce((x, g) => x + g.got(), 0),
    model_share_pct: Number((100 * (1 - Math.exp(-subs / bucketCount))).toFixed(1)), needed_share_pct: Number((100 / nodeCount).toFixed(1)), per_node: per,
  };
  for (const g of groups) g.close();
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

/** pub/sub commands a master executed (INFO commandstats). */
async function pubsubCalls(port: number): Promise<number> {
  const info = await redisCommand(port, 'INFO commandstats');
  let n = 0;
  for (const m of info.matchAll(/cmdstat_(?:s?publish):calls=(\d+)/g)) n += Number(m[1]);
  return n;
}

async function spread(): Promise<void> {
  const c = await RedisCluster.start();
  stops.push(() => c.stop());
  const env = { ADAPTER_DRIVER: 'redis-cluster', REDIS_CLUSTER_NODES: c.ports.map((p) => `127.0.0.1:${p}`).join(',') };
  const ns = await nodes(3, env);
  const channels = Array.from({ length: subs }, (_, i) => `ch-${i}`);
  const groups = [];
  for (const n of ns) groups.push(await subscribe(n.port, channels));
  const before = await Promise.all(c.ports.map(pubsubCalls));
  const r = await publish(ns[0].port, subs);
  await sleep(1000);
  const calls = (await Promise.all(c.ports.map(pubsubCalls))).map((x, i) => x - before[i]);
  const total = calls.reduce((x, y) => x + y, 0);
  const delivered = groups.map((g) => g.got());
  const line = {
    bench: 'cluster-interest-spread', base: base ?? null, subs, rate, seconds, workers,
    published_ok: r.ok, failed: r.failed, delivered_per_node: delivered, lost: delivered.reduce((x, y) => x + Math.max(0, r.ok - y), 0),
    master_share_pct: calls.map((x) => Number((100 * x / Math.max(1, total)).toFixed(1))),
  };
  for (const g of groups) g.close();
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

(mode === 'waste' ? waste() : mode === 'spread' ? spread() : mode === 'model' ? model() : subscribeTimes())
  .catch((err: unknown) => {
    log(`failed: ${err instanceof Error ? err.stack : String(err)}`);
    process.exitCode = 1;
  })
  .finally(async () => {
    await Promise.allSettled(servers.map((s) => s.stop()));
    await Promise.allSettled(stops.map((f) => f()));
    killAllNow();
  });
