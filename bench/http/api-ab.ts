// A/B of builds on the whole API path: signed `POST /apps/{id}/events` as the SDK sends
// it, through each build's real server, and through each build's routes in process.
//
//   npx tsc -p . && node dist/bench/http/api-ab.js [options] NAME=ROOT NAME=ROOT ...
//
// ROOT is a checkout with its build (dist/). Each round runs every build, in turn, the
// order reversed every other time, so that the runs a ratio compares are seconds apart.
//
// wrk mode: the build's server (`workers: 1`) pinned to --server-cpu, wrk (the C load
// generator, Debian package `wrk`) pinned to --client-cpu, replaying 64 pre-signed
// requests (100-byte data, channels nobody subscribes to) over --conns keep-alive
// connections: req/s, and the server's CPU (all its threads, from /proc) per request,
// which moves less than req/s when other work shares the machine. A round starts every
// build's server once and runs --windows windows on each, alternating window by window
// (paired samples seconds apart; with several builds' servers up, idle ones cost nothing).
// Ratios: median of the per-window (per-round) ratios to the first build.
// inproc mode: ROOT/dist/bench/http/inproc.bench.js (the routes' JavaScript only).
//
// Options: --mode wrk|inproc|both [both]  --rounds N [5]  --windows N [1]  --duration S [8]  --warmup S [2]
//          --conns N [16]  --server-cpu N [0]  --client-cpu N [1]  --inproc-requests N [50000]
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { signApiQuery } from '../../src/protocol/api-auth';
import { APP, baseEnv, freePort, launchServer, processCpuUs, threadCpuUs, type RunningTarget } from '../harness/target';

const run = promisify(execFile);

interface Options {
  mode: 'wrk' | 'inproc' | 'both'; rounds: number; windows: number; duration: number; warmup: number; conns: number;
  serverCpu: number; clientCpu: number; inprocRequests: number; builds: { name: string; root: string }[];
}

function parse(argv: string[]): Options {
  const o: Options = { mode: 'both', rounds: 5, windows: 1, duration: 8, warmup: 2, conns: 16, serverCpu: 0, clientCpu: 1, inprocRequests: 50_000, builds: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const num = (): number => {
      const v = Number(argv[++i]);
      if (!Number.isFinite(v) || v < 0) throw new Error(`${a} needs a number, got '${argv[i]}'`);
      return v;
    };
    if (a === '--mode') {
      const m = argv[++i];
      if (m !== 'wrk' && m !== 'inproc' && m !== 'both') throw new Error(`--mode is wrk, inproc or both, got '${m}'`);
      o.mode = m;
    } else if (a === '--rounds') o.rounds = num();
    else if (a === '--windows') o.windows = Math.max(1, Math.floor(num()));
    else if (a === '--duration') o.duration = num();
    else if (a === '--warmup') o.warmup = num();
    else if (a === '--conns') o.conns = num();
    else if (a === '--server-cpu') o.serverCpu = num();
    else if (a === '--client-cpu') o.clientCpu = num();
    else if (a === '--inproc-requests') o.inprocRequests = num();
    else if (/^[\w.-]+=/.test(a)) {
      const [name, root] = [a.slice(0, a.indexOf('=')), path.resolve(a.slice(a.indexOf('=') + 1))];
      if (!fs.existsSync(path.join(root, 'dist', 'src', 'cli.js'))) throw new Error(`${root}/dist/src/cli.js is missing: build that checkout first`);
      o.builds.push({ name, root });
    } else throw new Error(`unknown argument '${a}' (see the comment at the top of bench/http/api-ab.ts)`);
  }
  if (o.builds.length === 0) throw new Error('name at least one build: NAME=ROOT');
  return o;
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ringcast-api-ab-'));
const script = path.join(__dirname, '..', '..', '..', 'bench', 'http', 'signed-post.lua');

async function startServer(root: string, cpu: number): Promise<RunningTarget> {
  const port = await freePort();
  const file = path.join(tmp, `ringcast-${port}.yaml`);
  fs.writeFileSync(file, [
    'host: 127.0.0.1', `port: ${port}`, 'workers: 1', 'shutdown_grace_period: 3000', 'log:', '  level: warn',
    'apps:', `  - id: ${APP.id}`, `    key: ${APP.key}`, `    secret: ${APP.secret}`, '    max_client_events_per_second: 10000000', '',
  ].join('\n'));
  return launchServer({
    name: 'ringcast', cmd: 'taskset', args: ['-c', String(cpu), process.execPath, path.join(root, 'bin', 'ringcast.js'), 'start', '--config', file],
    cwd: root, env: baseEnv(), port, tmpDir: tmp, readyPath: '/up', stopGraceMs: 4000,
  });
}

/** 64 requests signed now (the server accepts ±600 s), one per line for signed-post.lua. */
function writeRequests(): string {
  const p = `/apps/${APP.id}/events`;
  const now = Math.floor(Date.now() / 1000);
  const lines: string[] = [];
  for (let i = 0; i < 64; i++) {
    const body = JSON.stringify({ name: 'bench', channels: [`nobody-${i}`], data: '@0 ' + 'x'.repeat(82) });
    lines.push(`${p}?${signApiQuery(APP.key, APP.secret, 'POST', p, {}, body, now)}\t${body}`);
  }
  const file = path.join(tmp, 'requests.txt');
  fs.writeFileSync(file, lines.join('\n') + '\n');
  return file;
}

async function wrk(o: Options, port: number, seconds: number, requests: string): Promise<{ requests: number; perS: number }> {
  const { stdout } = await run('taskset', ['-c', String(o.clientCpu), 'wrk', '-t1', `-c${o.conns}`, `-d${seconds}s`, '-s', script,
    `http://127.0.0.1:${port}`, '--', requests], { maxBuffer: 1 << 20 });
  const total = /(\d+) requests in/.exec(stdout);
  const perS = /Requests\/sec:\s+([\d.]+)/.exec(stdout);
  if (!total || !perS) throw new Error(`unexpected wrk output:\n${stdout}`);
  if (/Non-2xx or 3xx responses/.test(stdout) || /Socket errors/.test(stdout)) throw new Error(`wrk saw failed requests:\n${stdout}`);
  return { requests: Number(total[1]), perS: Number(perS[1]) };
}

interface Sample { perS: number; cpuUs: number; threads?: Record<string, number> }

/** CPU µs of each thread of a process, summed by thread name (/proc/PID/task/TID/comm). */
function threadsCpu(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    let name: string;
    try { name = fs.readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim(); } catch { continue; }
    const us = threadCpuUs(pid, Number(tid));
    if (Number.isFinite(us)) out.set(name, (out.get(name) ?? 0) + us);
  }
  return out;
}

/** One window of wrk against a running server: req/s, the server's CPU per request, and per thread (by name). */
async function wrkWindow(o: Options, server: RunningTarget, requests: string): Promise<Sample> {
  const c0 = processCpuUs(server.pid);
  const t0 = threadsCpu(server.pid);
  const r = await wrk(o, server.port, o.duration, requests);
  const cpu = processCpuUs(server.pid) - c0;
  const t1 = threadsCpu(server.pid);
  if (!server.alive()) throw new Error(server.exitReport() ?? 'server gone');
  const threads: Record<string, number> = {};
  for (const [name, us] of t1) {
    const per = (us - (t0.get(name) ?? 0)) / r.requests;
    if (per >= 0.05) threads[name] = Number(per.toFixed(2));
  }
  return { perS: r.perS, cpuUs: cpu / r.requests, threads };
}

/**
 * One wrk round: every build's server started (fresh) and warmed up, then --windows
 * windows per build, the builds taking turns window by window (order reversed every other
 * window), so that paired windows are seconds apart; then the servers are stopped.
 */
async function wrkRound(o: Options, round: number, record: (name: string, s: Sample) => void): Promise<void> {
  const requests = writeRequests();
  const servers: { name: string; server: RunningTarget }[] = [];
  try {
    for (const b of o.builds) {
      const server = await startServer(b.root, o.serverCpu);
      servers.push({ name: b.name, server });
      await wrk(o, server.port, o.warmup, requests);
    }
    for (let w = 0; w < o.windows; w++) {
      const order = (round * o.windows + w) % 2 === 0 ? servers : [...servers].reverse();
      for (const { name, server } of order) record(name, await wrkWindow(o, server, requests));
    }
  } finally {
    await Promise.all(servers.map(({ server }) => server.stop()));
  }
}

async function inprocRun(o: Options, root: string): Promise<Sample> {
  const { stdout } = await run('taskset', ['-c', String(o.clientCpu), process.execPath,
    path.join(root, 'dist', 'bench', 'http', 'inproc.bench.js'), '5', String(o.inprocRequests)]);
  const r = JSON.parse(stdout.trim().split('\n').pop()!) as { us_per_req: number };
  return { perS: 1e6 / r.us_per_req, cpuUs: r.us_per_req };
}

const median = (a: number[]): number => { const s = [...a].sort((x, y) => x - y); return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };

async function main(): Promise<void> {
  const o = parse(process.argv.slice(2));
  const modes = o.mode === 'both' ? ['inproc', 'wrk'] as const : [o.mode];
  for (const mode of modes) {
    const samples = new Map<string, Sample[]>(o.builds.map((b) => [b.name, []]));
    const record = (name: string, s: Sample): void => {
      samples.get(name)!.push(s);
      console.error(`${mode} sample ${samples.get(name)!.length} ${name}: ${s.perS.toFixed(0)} req/s, ${s.cpuUs.toFixed(2)} µs CPU per request${s.threads ? ` (by thread: ${JSON.stringify(s.threads)})` : ''}`);
    };
    for (let round = 0; round < o.rounds; round++) {
      if (mode === 'wrk') {
        await wrkRound(o, round, record);
        continue;
      }
      for (const b of round % 2 === 0 ? o.builds : [...o.builds].reverse()) record(b.name, await inprocRun(o, b.root));
    }
    const base = samples.get(o.builds[0].name)!;
    console.log(`\n${mode}: ${o.rounds} rounds${mode === 'wrk' ? ` × ${o.windows} windows of ${o.duration} s, ${o.conns} connections, server on CPU ${o.serverCpu}, wrk on CPU ${o.clientCpu}` : ''}`);
    const first = o.builds[0].name;
    console.log(`| build | ${mode === 'wrk' ? 'req/s' : 'req/s of CPU'} | req/s / ${first} | CPU µs / request | CPU / ${first} | per ${mode === 'wrk' ? 'window' : 'round'}: req/s, CPU µs |`);
    console.log('|---|---|---|---|---|---|');
    for (const b of o.builds) {
      const s = samples.get(b.name)!;
      const cpuRatio = median(s.map((x, i) => x.cpuUs / base[i].cpuUs));
      const rateRatio = median(s.map((x, i) => x.perS / base[i].perS));
      const rounds = s.map((x) => `${(x.perS / 1000).toFixed(1)} k ${x.cpuUs.toFixed(2)}`).join(', ');
      console.log(`| ${b.name} | ${median(s.map((x) => x.perS)).toFixed(0)} | ${rateRatio.toFixed(3)}× | ${median(s.map((x) => x.cpuUs)).toFixed(2)} | ${cpuRatio.toFixed(3)}× | ${rounds} |`);
    }
    console.log(JSON.stringify({ mode, builds: Object.fromEntries([...samples].map(([k, v]) => [k, v.map((x) => ({ perS: Math.round(x.perS), cpuUs: Number(x.cpuUs.toFixed(3)) }))])) }));
  }
  fs.rmSync(tmp, { recursive: true, force: true });
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
