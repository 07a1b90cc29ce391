// The delta shard's fan-out (src/delta/shard.ts, deliver.ts) in process: what its
// JavaScript costs per sequencer frame, with uWS replaced by counters (a native publish is
// one count; a socket's subscribe / unsubscribe a Set operation). It compares builds on a
// loaded machine better than bench/delta/delta.bench.ts's end-to-end rate: the work is on
// one thread, timed in CPU time (process.cpuUsage: time the process waited for a core is
// not counted), and the figure is the best of several repetitions.
//
//   steady    N fossil subscribers, every one in step, 8 streams in turn (a conflation
//             key); the frame carries a fossil delta and no xdelta3 one, as the sequencer
//             sends it when only fossil is in use
//   full      every frame a full message (the interval): one publish to the channel
//   restep    every frame a new stream that drops the previous one: every subscriber
//             steps out, gets the full message in JavaScript and steps in (late joiners)
//   filtered  N subscribers in one tag-filter group, its deltas in the frame's `filtered`

import path from 'node:path';
import { readOptions } from '../harness/args';

const USAGE = `node dist/bench/delta/shard.bench.js [--subs 1000] [--scale 1] [--reps 7]
     [--only steady,full,restep,filtered] [--base DIR]
  DIR: another checkout (its build, dist/src, is run), e.g. main's
Each rep delivers a scenario's frames (steady 20,000, full 200,000, restep 1,000,
filtered 100,000, times --scale: ~0.2 s each). Prints CPU ns per frame (best and median
of the reps) and the publishes and sends of a rep, which two builds of the same
behaviour make alike.`;

const opts = readOptions(process.argv.slice(2), USAGE, ['subs', 'scale', 'reps', 'only', 'base']);
const SUBS = Math.ceil(opts.num('subs', 1000, 1));
const SCALE = opts.num('scale', 1, 0.001);
const REPS = Math.ceil(opts.num('reps', 7, 1));
const ONLY = opts.get('only')?.split(',') ?? null;
const baseDir = opts.get('base');
const SRC = baseDir !== undefined ? path.resolve(baseDir, 'dist', 'src') : path.resolve(__dirname, '..', '..', 'src');

/* eslint-disable @typescript-eslint/no-require-imports -- the build under test is chosen at run time */
const { createDeltaShard } = require(path.join(SRC, 'delta', 'shard.js')) as typeof import('../../src/delta/shard');
const { loadConfig } = require(path.join(SRC, 'config', 'index.js')) as typeof import('../../src/config');
const { compileFilter } = require(path.join(SRC, 'filter', 'compile.js')) as typeof import('../../src/filter/compile');
const { parseFilter } = require(path.join(SRC, 'filter', 'parse.js')) as typeof import('../../src/filter/parse');
/* eslint-enable @typescript-eslint/no-require-imports */

type DeltaFrame = Parameters<ReturnType<typeof createDeltaShard>['deliver']>[0];

/** uWS's topics, counted. */
class Hub {
  readonly topics = new Map<string, Set<Sock>>();
  publishes = 0;
  publish(): boolean {
    this.publishes++;
    return true;
  }
  publishFrom(): void {
    this.publishes++;
  }
  numSubscribers(topic: string): number {
    return this.topics.get(topic)?.size ?? 0;
  }
}

class Sock {
  sends = 0;
  readonly d: { id: string; app: ReturnType<typeof loadConfig>['apps'][number]; closed: boolean; channels: Map<string, never>; delta: null };
  constructor(private readonly hub: Hub, id: string, app: ReturnType<typeof loadConfig>['apps'][number]) {
    this.d = { id, app, closed: false, channels: new Map<string, never>(), delta: null };
  }
  send(): number {
    this.sends++;
    return 1;
  }
  cork(cb: () => void): this {
    cb();
    return this;
  }
  subscribe(topic: string): boolean {
    let set = this.hub.topics.get(topic);
    if (set === undefined) this.hub.topics.set(topic, (set = new Set()));
    set.add(this);
    return true;
  }
  unsubscribe(topic: string): boolean {
    return this.hub.topics.get(topic)?.delete(this) ?? false;
  }
  isSubscribed(topic: string): boolean {
    return this.hub.topics.get(topic)?.has(this) ?? false;
  }
  publish(): boolean {
    this.hub.publishes++;
    return true;
  }
  getUserData(): Sock['d'] {
    return this.d;
  }
}

const config = loadConfig({ env: {}, overrides: { apps: [{ id: 'bench', key: 'bench-key', secret: 'bench-secret' }] } });
const app = config.apps[0];
const FULL = JSON.stringify({ event: 'book', channel: 'market', data: JSON.stringify({ bids: Array.from({ length: 20 }, (_, i) => [100 + i, i]) }) });
const DELTA = JSON.stringify({ event: 'pusher:delta', channel: 'market', data: JSON.stringify({ seq: 1, base_index: 0, algorithm: 'fossil', delta: 'x'.repeat(60) }) });
const parsed = parseFilter({ key: 'sym', cmp: 'eq', val: 'GBPUSD' }, 10);
if (!parsed.ok) throw new Error(parsed.error);
const filter = compileFilter(parsed.filter);

interface Scenario {
  filtered: boolean;
  frames: number;
  frame(i: number): DeltaFrame;
}
const base = { type: 'delta', app: app.id, channel: 'market', except: '' } as const;
const SCENARIOS: Record<string, Scenario> = {
  steady: { filtered: false, frames: 20_000, frame: (i) => ({ ...base, stream: i % 8, full: FULL, deltas: [DELTA, null], dropped: [] }) },
  full: { filtered: false, frames: 200_000, frame: (i) => ({ ...base, stream: i % 8, full: FULL, deltas: null, dropped: [] }) },
  restep: { filtered: false, frames: 1_000, frame: (i) => ({ ...base, stream: i + 1, full: FULL, deltas: [DELTA, null], dropped: [i] }) },
  filtered: {
    filtered: true,
    frames: 100_000,
    frame: (i) => ({ ...base, stream: 0, full: FULL, deltas: null, dropped: [], tags: 'sym=GBPUSD', filtered: [{ key: filter.key, stream: i % 8, full: FULL, deltas: [DELTA, null], dropped: [] }] }),
  },
};

async function run(s: Scenario): Promise<{ best: number; median: number; publishes: number; sends: number }> {
  const hub = new Hub();
  const interest = { add() {}, remove() {} };
  const log = { warn() {}, error() {}, info() {}, debug() {} };
  const shard = createDeltaShard<Sock>({
    config, uws: hub, sockets: new Map(), interest: { fossil: interest, xdelta3: interest } as never, out: (e) => e, log: log as never,
    states: () => Promise.reject(new Error('no sequencer')), register: () => Promise.resolve(), sendFrame: (_m, ws) => ws.send(),
  });
  const socks = Array.from({ length: SUBS }, (_, i) => new Sock(hub, `s${i}`, app));
  for (const ws of socks) shard.subscribe(ws, ws.d, app, 'market', 'fossil', s.filtered ? filter : null);
  await new Promise((r) => setImmediate(r)); // the sequencer's answer to a filter group's registration
  // the frames are made beforehand: only the shard's work is timed
  const n = Math.ceil(s.frames * SCALE);
  const frames = Array.from({ length: n }, (_, i) => s.frame(i));
  for (let i = 0; i < Math.min(n, 2000); i++) shard.deliver(frames[i]); // warm-up
  const times: number[] = [];
  let publishes = 0;
  let sends = 0;
  for (let r = 0; r < REPS; r++) {
    const p0 = hub.publishes;
    const s0 = socks.reduce((a, w) => a + w.sends, 0);
    const t0 = process.cpuUsage();
    for (let i = 0; i < n; i++) shard.deliver(frames[i]);
    const t = process.cpuUsage(t0);
    times.push(((t.user + t.system) * 1000) / n);
    publishes = hub.publishes - p0;
    sends = socks.reduce((a, w) => a + w.sends, 0) - s0;
  }
  times.sort((a, b) => a - b);
  return { best: times[0], median: times[times.length >> 1], publishes, sends };
}

async function main(): Promise<void> {
  for (const name of ONLY ?? []) if (!(name in SCENARIOS)) throw new Error(`--only: no scenario "${name}" (${Object.keys(SCENARIOS).join(', ')})`);
  const out: Record<string, unknown> = { build: path.dirname(SRC), subs: SUBS, scale: SCALE, reps: REPS };
  for (const [name, s] of Object.entries(SCENARIOS)) {
    if (ONLY !== null && !ONLY.includes(name)) continue;
    const r = await run(s);
    console.log(`${name.padEnd(8)} ${r.best.toFixed(0).padStart(8)} CPU ns/frame best, ${r.median.toFixed(0).padStart(8)} median; per rep ${r.publishes} publishes, ${r.sends} sends`);
    out[name] = r;
  }
  console.log(JSON.stringify(out));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
