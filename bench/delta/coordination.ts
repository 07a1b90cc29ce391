// The latency delta_compression.cluster_coordination adds (bench/README.md, "Delta
// compression"): two ringcast processes through Redis or NATS, delta subscribers on both,
// events published through node A's HTTP API at a fixed rate; publish → arrival of each
// message (its pusher:delta or full message) at the delta subscribers, with the option
// off and on. Off, each node numbers its streams itself; on, the position comes from the
// coordinator over the backend (delta/coord.ts) before the sequencer sees the event.
//
//   node dist/bench/delta/coordination.js [options]
//   node dist/bench/delta/coordination.js --help
//
// One stream (one channel, one event, no conflation key) and nothing published before:
// the seq of the n-th event is n on every node in both modes, so a message's latency is
// its arrival time minus the send time of the publish with that seq.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Pusher from 'pusher';
import WebSocket from 'ws';
import { NatsServer } from '../../test/helpers/nats';
import { RedisServer } from '../../test/helpers/redis';
import { Books, rng } from '../../test/delta/clients';
import { readOptions } from '../harness/args';
import { sleep } from '../harness/load';
import { killAllNow } from '../harness/procs';
import { APP, freePort, type RunningTarget } from '../harness/target';
import { ringcastTarget } from '../targets/ringcast';

const USAGE = `Usage: node dist/bench/delta/coordination.js [options]

  --backends LIST    redis, nats                                     [redis,nats]
  --workers N        shards per node                                 [2]
  --subs N           delta subscribers per node                      [10]
  --rate N           publishes per second                            [100]
  --seconds S        measured window (after 2 s of warm-up)          [10]
  --runs N           runs per setup (medians reported)               [3]
  --json FILE        also append the JSON lines to FILE
  --help`;

type Backend = 'redis' | 'nats';
const o = readOptions(process.argv.slice(2), USAGE, ['backends', 'workers', 'subs', 'rate', 'seconds', 'runs', 'json']);
const BACKENDS = (o.get('backends') ?? 'redis,nats').split(',').map((s) => s.trim()) as Backend[];
for (const b of BACKENDS as string[]) if (b !== 'redis' && b !== 'nats') throw new Error(`--backends: "${b}" is not redis or nats`);
const WORKERS = Math.floor(o.num('workers', 2, 1));
const SUBS = Math.floor(o.num('subs', 10, 1));
const RATE = o.num('rate', 100, 1);
const SECONDS = o.num('seconds', 10, 1);
const RUNS = Math.floor(o.num('runs', 3, 1));
const JSON_FILE = o.get('json') ?? null;
const WARMUP_S = 2;

const started = Date.now();
const log = (msg: string) => process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${msg}\n`);

/** A raw delta subscriber: records the arrival time of each seq (full or delta). */
class Sub {
  readonly arrivals = new Map<number, number>();
  private constructor(private readonly ws: WebSocket) {}

  static async open(port: number, channel: string): Promise<Sub> {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/app/${APP.key}?protocol=7`);
    const s = new Sub(ws);
    let subscribed: () => void;
    const ok = new Promise<void>((r) => { subscribed = r; });
    ws.on('message', (raw: Buffer) => {
      const at = performance.now();
      const text = raw.toString('utf8');
      if (text.includes('connection_established')) {
        ws.send(JSON.stringify({ event: 'pusher:enable_delta_compression', data: {} }));
        ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel } }));
        return;
      }
      if (text.includes('subscription_succeeded')) return subscribed();
      const m = /"seq":(\d+)|"__delta_seq":(\d+)/.exec(text);
      if (m) s.arrivals.set(Number(m[1] ?? m[2]), at);
    });
    await Promise.race([ok, sleep(10_000).then(() => { throw new Error('a subscriber did not subscribe within 10 s'); })]);
    return s;
  }

  close(): void {
    this.ws.terminate();
  }
}

function quantile(sorted: number[], q: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

interface Result { backend: Backend; coordination: boolean; run: number; node: 'A' | 'B'; p50_ms: number; p99_ms: number; messages: number; missing: number }

async function oneRun(backend: Backend, coordination: boolean, run: number, tmpDir: string): Promise<Result[]> {
  const stops: { stop(): Promise<void> }[] = [];
  try {
    let env: Record<string, string>;
    if (backend === 'redis') {
      const r = await RedisServer.start();
      stops.push(r);
      env = { ADAPTER_DRIVER: 'redis', DATABASE_REDIS_HOST: '127.0.0.1', DATABASE_REDIS_PORT: String(r.port) };
    } else {
      const n = await NatsServer.start(undefined, { jetstream: false });
      stops.push(n);
      env = { ADAPTER_DRIVER: 'nats', NATS_SERVERS: n.url };
    }
    const yaml = ['delta_compression:', `  cluster_coordination: ${coordination}`];
    const nodes: RunningTarget[] = [];
    for (let i = 0; i < 2; i++) {
      const node = await ringcastTarget(WORKERS, { env, yaml }).start({ port: await freePort(), tmpDir });
      stops.unshift(node);
      nodes.push(node);
    }
    await sleep(500); // the nodes' first heartbeats
    const channel = `coord-${run}`;
    const subs: Sub[][] = [];
    for (const n of nodes) {
      const list: Sub[] = [];
      for (let i = 0; i < SUBS; i++) list.push(await Sub.open(n.port, channel));
      subs.push(list);
      stops.unshift({ stop: async () => list.forEach((s) => s.close()) });
    }
    const sdk = new Pusher({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1', port: String(nodes[0].port), useTLS: false });
    const books = new Books(rng(run + 1));
    const sendAt: number[] = [];
    const total = Math.round(RATE * (WARMUP_S + SECONDS));
    const gap = 1000 / RATE;
    const t0 = performance.now();
    const inflight: Promise<unknown>[] = [];
    for (let i = 0; i < total; i++) {
      const due = t0 + i * gap;
      const wait = due - performance.now();
      if (wait > 1) await sleep(wait);
      sendAt.push(performance.now());
      inflight.push(sdk.trigger(channel, 'update', books.update('X')));
    }
    await Promise.all(inflight);
    await sleep(1500); // the last ones arrive
    const first = Math.round(RATE * WARMUP_S);
    return subs.map((list, ni): Result => {
      const lat: number[] = [];
      let missing = 0;
      for (const s of list) {
        for (let seq = first; seq < total; seq++) {
          const at = s.arrivals.get(seq);
          if (at === undefined) missing++;
          else lat.push(at - sendAt[seq]);
        }
      }
      lat.sort((x, y) => x - y);
      return { backend, coordination, run, node: ni === 0 ? 'A' : 'B', p50_ms: quantile(lat, 0.5), p99_ms: quantile(lat, 0.99), messages: lat.length, missing };
    });
  } finally {
    for (const s of stops) await s.stop().catch(() => undefined);
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main(): Promise<void> {
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ringcast-bench-coord-'));
  const all: Result[] = [];
  try {
    for (let run = 0; run < RUNS; run++) {
      for (const backend of BACKENDS) {
        for (const coordination of [false, true]) {
          const rs = await oneRun(backend, coordination, run, tmpDir);
          for (const r of rs) {
            log(`${backend} coordination ${coordination ? 'on ' : 'off'} run ${run} node ${r.node}: p50 ${r.p50_ms.toFixed(2)} ms, p99 ${r.p99_ms.toFixed(2)} ms (${r.messages} msgs, ${r.missing} missing)`);
            if (JSON_FILE) fs.appendFileSync(JSON_FILE, JSON.stringify(r) + '\n');
          }
          all.push(...rs);
        }
      }
    }
  } finally {
    fs.rmSync(tmpDir, { recursive: true, force: true });
  }
  process.stdout.write(`\n${WORKERS} shards per node, ${SUBS} delta subscribers per node, ${RATE} publishes/s to node A, medians of ${RUNS} runs\n\n`);
  process.stdout.write('| backend | subscribers on | p50 off | p50 on | p99 off | p99 on | p50 added |\n|---|---|---|---|---|---|---|\n');
  for (const backend of BACKENDS) {
    for (const node of ['A', 'B'] as const) {
      const pick = (c: boolean, k: 'p50_ms' | 'p99_ms') => median(all.filter((r) => r.backend === backend && r.node === node && r.coordination === c).map((r) => r[k]));
      const [p50off, p50on, p99off, p99on] = [pick(false, 'p50_ms'), pick(true, 'p50_ms'), pick(false, 'p99_ms'), pick(true, 'p99_ms')];
      process.stdout.write(`| ${backend} | node ${node}${node === 'A' ? ' (publishing)' : ''} | ${p50off.toFixed(2)} | ${p50on.toFixed(2)} | ${p99off.toFixed(2)} | ${p99on.toFixed(2)} | ${(p50on - p50off).toFixed(2)} ms |\n`);
    }
  }
  const missing = all.reduce((a, r) => a + r.missing, 0);
  if (missing > 0) process.stdout.write(`\n${missing} expected deliveries did not arrive\n`);
}

main().catch((err: Error) => {
  process.stderr.write(`bench/delta/coordination: ${err.stack ?? err.message}\n`);
  killAllNow();
  process.exit(1);
});
