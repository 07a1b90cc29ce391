// Soak test: `node bin/ringcast.js start` (workers 2) as a child process, 5,000
// connections with churn for --minutes (default 10), and three checks:
//
//  1. RSS of the server process at the end at most 10% above RSS after warm-up (warm-up:
//     10 s ramp, then a quarter of the run, ≤ 60 s; each the mean over a window, as the
//     heaps' GC sawtooth alone moves RSS by ~25%);
//  2. zero lost messages, counted by the clients: the publisher sends a sequence per
//     channel (one request at a time per channel) and notes when each request was sent
//     and answered 200; a client subscribed (subscription_succeeded received) before the
//     request was sent, and still subscribed LEAVE_MARGIN_MS after the answer, must have
//     received it (see Ledger) — and nothing may arrive twice or out of order;
//  3. zero server errors: API answers other than 200, connections that failed or were
//     closed by the server, error/fatal lines in the server log.
//
// Churn: each connection slot (gen.ts) connects, subscribes to a random channel, stays
// 5–30 s, then subscribes elsewhere (up to 3 channels per connection) or disconnects,
// reconnects after 50–500 ms, and so on. Exit status 0 only if every check passed.
//
//   make build && node dist/bench/soak/soak.js --minutes 10
//   node dist/bench/soak/soak.js --help

import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { signApiQuery } from '../../src/protocol/api-auth';
import { killAllNow, track } from '../harness/procs';
import { APP, freePort, rssKb, type RunningTarget } from '../harness/target';
import { ringcastTarget } from '../targets/ringcast';
import { nowMs, type GenCommand, type GenReply, type GenStats, type Session } from './protocol';

interface Options {
  minutes: number;
  conns: number;
  channels: number;
  /** Publishes per second per channel. */
  rate: number;
  genProcs: number;
  workers: number;
  json: string | null;
  /** Minutes between RSS-after-full-GC samples (the curve); 0: only after warm-up and at the end. */
  gcEvery: number;
}

const LEAVE_MARGIN_MS = 2000;
const RSS_TOLERANCE = 0.10;

const USAGE = `usage: node dist/bench/soak/soak.js [options]
  --minutes N      duration after the ramp-up (default 10)
  --conns N        connection slots (default 5000)
  --channels N     channels (default 100)
  --rate N         publishes per second per channel (default 1)
  --gen-procs N    client processes (default 2)
  --workers N      ringcast shards (default 2)
  --json FILE      also write the result as JSON
  --gc-every MIN   also take RSS after a full GC every MIN minutes (the curve; default 5)`;

function parseArgs(argv: string[]): Options {
  const o: Options = { minutes: 10, conns: 5000, channels: 100, rate: 1, genProcs: 2, workers: 2, json: null, gcEvery: 5 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => {
      const s = argv[++i];
      if (s === undefined) throw new Error(`${a} needs a value`);
      return s;
    };
    const num = () => {
      const n = Number(v());
      if (!(n > 0)) throw new Error(`${a} must be a positive number`);
      return n;
    };
    switch (a) {
      case '--minutes': o.minutes = num(); break;
      case '--conns': o.conns = Math.floor(num()); break;
      case '--channels': o.channels = Math.floor(num()); break;
      case '--rate': o.rate = num(); break;
      case '--gen-procs': o.genProcs = Math.floor(num()); break;
      case '--workers': o.workers = Math.floor(num()); break;
      case '--json': o.json = v(); break;
      case '--gc-every': o.gcEvery = num(); break;
      case '--help': case '-h': process.stdout.write(USAGE + '\n'); process.exit(0);
      // falls through (never reached)
      default: throw new Error(`unknown option ${a}\n${USAGE}`);
    }
  }
  return o;
}

const log = (msg: string) => process.stderr.write(`[soak ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);

/** One client process. */
class Gen {
  readonly proc: ChildProcess;
  stats: GenStats = { opened: 0, open: 0, unexpectedCloses: {}, errors: {}, messages: 0 };
  readonly stopped: Promise<void>;
  constructor(onSessions: (list: Session[]) => void) {
    this.proc = fork(path.join(__dirname, 'gen.js'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'advanced' });
    track(this.proc);
    this.stopped = new Promise((resolve) => {
      this.proc.on('message', (m: GenReply) => {
        onSessions(m.list);
        this.stats = m.stats;
        if (m.type === 'stopped') resolve();
      });
      this.proc.once('exit', () => resolve());
    });
  }
  send(cmd: GenCommand): void { this.proc.send(cmd); }
}

/**
 * Per channel and seq: when the publish request was sent and when it was answered 200
 * (NaN: not 200). A subscription must have received seq when it was confirmed before the
 * request was sent, and still held LEAVE_MARGIN_MS after the answer. (Confirmed before
 * the *answer* is not enough: the frame may reach the subscriber's shard before the
 * subscribe does while the answer reaches the publisher after the confirmation reaches
 * the client — measured: misses with the answer 0.2–0.8 ms after the confirmation.)
 */
class Ledger {
  private readonly sent: number[][];
  private readonly answered: number[][];
  /** answered with each NaN replaced by the time before it: non-decreasing, for searching. */
  private readonly answeredKeys: number[][];
  constructor(channels: number) {
    this.sent = Array.from({ length: channels }, () => []);
    this.answered = Array.from({ length: channels }, () => []);
    this.answeredKeys = Array.from({ length: channels }, () => []);
  }

  /** Seqs are recorded in order per channel (one request in flight per channel). */
  record(ch: number, seq: number, sentAt: number, answeredAt: number): void {
    this.sent[ch][seq] = sentAt;
    this.answered[ch][seq] = answeredAt;
    this.answeredKeys[ch][seq] = Number.isNaN(answeredAt) ? (seq > 0 ? this.answeredKeys[ch][seq - 1] : -Infinity) : answeredAt;
  }

  /** The first index whose key is > t (keys non-decreasing). */
  private static firstAfter(keys: number[], t: number): number {
    let lo = 0;
    let hi = keys.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (keys[mid] <= t) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** [from, to): the seqs the session had to receive (those answered 200 among them). */
  private range(x: Session): [number, number] {
    return [Ledger.firstAfter(this.sent[x.ch], x.s), Ledger.firstAfter(this.answeredKeys[x.ch], x.u - LEAVE_MARGIN_MS)];
  }

  /** Seqs the session had to receive that it did not. */
  lost(x: Session): number {
    const a = this.answered[x.ch];
    const [from, to] = this.range(x);
    let lost = 0;
    const gaps = new Set(x.gaps);
    for (let seq = from; seq < to; seq++) {
      if (Number.isNaN(a[seq])) continue;
      const got = x.first >= 0 && seq >= x.first && seq <= x.last && !gaps.has(seq);
      if (!got) lost++;
    }
    // a gap between two received seqs is a loss even outside [from, to)
    for (const g of x.gaps) if ((g < from || g >= to) && !Number.isNaN(a[g])) lost++;
    return lost;
  }

  required(x: Session): number {
    const a = this.answered[x.ch];
    const [from, to] = this.range(x);
    let n = 0;
    for (let seq = from; seq < to; seq++) if (!Number.isNaN(a[seq])) n++;
    return n;
  }

  /** A lossy session with the times that decided it (ms, relative to its confirmation). */
  explain(x: Session): Record<string, unknown> {
    const [from, to] = this.range(x);
    const rel = (v: number | undefined) => (v === undefined ? null : +(v - x.s).toFixed(1));
    const at = (seq: number) => ({ sent: rel(this.sent[x.ch][seq]), answered: rel(this.answered[x.ch][seq]) });
    return {
      ch: x.ch, first: x.first, last: x.last, count: x.count, gaps: x.gaps.slice(0, 20), disorder: x.disorder,
      left_after_ms: +(x.u - x.s).toFixed(1), required: [from, to - 1],
      times: { [from - 1]: at(from - 1), [from]: at(from), [x.first]: at(x.first), [to - 1]: at(to - 1) },
    };
  }
}

/** Publishes seq 0, 1, … to every channel, one request in flight per channel, at `rate`/s each. */
function publisher(port: number, o: Options, ledger: Ledger) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const outcomes: Record<string, number> = {};
  let running = true;
  let maxMs = 0;
  const publishOne = (ch: number, seq: number) => new Promise<string>((resolve) => {
    const body = JSON.stringify({ name: 'soak', channel: `soak-${ch}`, data: JSON.stringify({ seq, t: nowMs() }) });
    const p = `/apps/${APP.id}/events`;
    const q = signApiQuery(APP.key, APP.secret, 'POST', p, {}, body, Math.floor(Date.now() / 1000));
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: `${p}?${q}`, agent, headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(String(res.statusCode)));
      res.on('error', () => resolve('response error'));
    });
    req.on('error', (err) => resolve(`request error: ${err.message}`));
    req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
    req.end(body);
  });
  const loops = Array.from({ length: o.channels }, async (_, ch) => {
    const every = 1000 / o.rate;
    let next = Date.now() + Math.random() * every;
    for (let seq = 0; running; seq++) {
      const wait = next - Date.now();
      if (wait > 0) await sleep(wait);
      if (!running) break;
      next += every;
      const t0 = nowMs();
      const outcome = await publishOne(ch, seq);
      const t1 = nowMs();
      maxMs = Math.max(maxMs, t1 - t0);
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
      ledger.record(ch, seq, t0, outcome === '200' ? t1 : NaN);
    }
  });
  return {
    outcomes,
    get maxMs() { return maxMs; },
    async stop() {
      running = false;
      await Promise.all(loops);
      agent.destroy();
    },
  };
}

function serverLogErrors(file: string): { count: number; sample: string[] } {
  let text = '';
  try { text = fs.readFileSync(file, 'utf8'); } catch { return { count: 0, sample: [] }; }
  const bad = text.split('\n').filter((l) => /"level":(50|60)\b/.test(l) || /^(Error|ringcast:)/.test(l));
  return { count: bad.length, sample: bad.slice(0, 5) };
}

async function main(): Promise<number> {
  const o = parseArgs(process.argv.slice(2));
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ringcast-soak-'));
  const port = await freePort();
  log(`starting ringcast (workers ${o.workers}) on :${port}; logs in ${tmp}`);
  // RINGCAST_TEST_HOOKS + --expose-gc: SIGUSR2 makes every server thread run a full GC,
  // so RSS after warm-up and at the end can also be compared without the GC sawtooth.
  // MALLOC_ARENA_MAX / LD_PRELOAD, when set for the soak, go to the server too (allocator experiments).
  const allocEnv: Record<string, string> = {};
  for (const k of ['MALLOC_ARENA_MAX', 'LD_PRELOAD']) if (process.env[k]) allocEnv[k] = process.env[k]!;
  const target = ringcastTarget(o.workers, { env: { RINGCAST_TEST_HOOKS: '1', ...allocEnv }, nodeArgs: ['--expose-gc'] });
  await target.prepare?.(log);
  const server: RunningTarget = await target.start({ port, tmpDir: tmp });
  const ledger = new Ledger(o.channels);
  const sessions: Session[] = [];
  const gens = Array.from({ length: o.genProcs }, () => new Gen((list) => { for (const s of list) sessions.push(s); }));
  const rampMs = Math.max(5000, o.conns * 2); // 5,000 connections over 10 s
  gens.forEach((g, i) => g.send({
    type: 'start', port, appKey: APP.key, conns: Math.floor(o.conns / o.genProcs) + (i < o.conns % o.genProcs ? 1 : 0),
    channels: o.channels, stayMs: [5000, 30_000], maxSessions: 3, rampMs, seed: 1234 + i,
  }));
  const pub = publisher(port, o, ledger);
  const open = () => gens.reduce((n, g) => n + g.stats.open, 0);

  const durationMs = o.minutes * 60_000;
  const warmupMs = Math.min(60_000, durationMs / 4);
  const t0 = Date.now();
  const rssSamples: { at: number; kb: number }[] = [];
  let lastLog = 0;
  /** RSS right after a full GC in every server thread (under the same load). */
  const rssAfterGc = async (): Promise<number> => {
    process.kill(server.pid, 'SIGUSR2');
    await sleep(2000);
    return rssKb(server.pid);
  };
  let rssWarmGc = NaN;
  /** RSS after a full GC over the run: [seconds since start, MiB] (the curve; --gc-every). */
  const gcCurve: [number, number][] = [];
  let nextGc = 0;
  while (Date.now() - t0 < rampMs + durationMs) {
    await sleep(1000);
    if (!server.alive()) break;
    if (Number.isNaN(rssWarmGc) && Date.now() - t0 >= rampMs + Math.min(60_000, durationMs / 4)) {
      rssWarmGc = await rssAfterGc();
      gcCurve.push([Math.round((Date.now() - t0) / 1000), +(rssWarmGc / 1024).toFixed(1)]);
      nextGc = Date.now() + o.gcEvery * 60_000;
      log(`RSS after warm-up, after a full GC: ${(rssWarmGc / 1024).toFixed(1)} MiB`);
    } else if (o.gcEvery > 0 && nextGc > 0 && Date.now() >= nextGc && Date.now() - t0 < rampMs + durationMs - 30_000) {
      const kb = await rssAfterGc();
      nextGc = Date.now() + o.gcEvery * 60_000;
      gcCurve.push([Math.round((Date.now() - t0) / 1000), +(kb / 1024).toFixed(1)]);
      log(`RSS after a full GC at ${gcCurve[gcCurve.length - 1][0]} s: ${(kb / 1024).toFixed(1)} MiB`);
    }
    rssSamples.push({ at: Date.now() - t0, kb: rssKb(server.pid) });
    if (Date.now() - lastLog >= 10_000) {
      lastLog = Date.now();
      log(`${Math.round((Date.now() - t0) / 1000)} s: ${open()} open, ${sessions.length} subscriptions done, ` +
        `RSS ${(rssSamples[rssSamples.length - 1].kb / 1024).toFixed(0)} MiB, publishes ${JSON.stringify(pub.outcomes)}`);
    }
  }
  const alive = server.alive();
  // RSS follows the heaps' GC sawtooth (measured here: ~25% up and down over ~90 s), so
  // each figure is the mean over a window (a quarter of the run, 10–60 s): after ramp +
  // warm-up, and the last one (still under load).
  const warmAt = rampMs + warmupMs;
  const win = Math.max(10_000, Math.min(60_000, durationMs / 4));
  const rssWarm = mean(rssSamples.filter((s) => s.at >= warmAt && s.at < warmAt + win).map((s) => s.kb));
  const rssEnd = mean(rssSamples.filter((s) => s.at >= rampMs + durationMs - win).map((s) => s.kb));
  const rssAll = rssSamples.filter((s) => s.at >= rampMs).map((s) => s.kb);
  const openAtEnd = open();
  const rssEndGc = server.alive() ? await rssAfterGc() : NaN;
  log(`RSS at the end, after a full GC: ${(rssEndGc / 1024).toFixed(1)} MiB`);
  if (Number.isFinite(rssEndGc)) gcCurve.push([Math.round((Date.now() - t0) / 1000), +(rssEndGc / 1024).toFixed(1)]);
  log(`RSS after a full GC over the run (s, MiB): ${JSON.stringify(gcCurve)}`);

  log('stopping the publisher, letting deliveries finish');
  await pub.stop();
  await sleep(3000);
  for (const g of gens) g.send({ type: 'stop' });
  await Promise.all(gens.map((g) => g.stopped));
  log('stopping ringcast (SIGTERM)');
  await server.stop();
  const exitReport = server.exitReport();

  // the verdict
  let lost = 0;
  let required = 0;
  let disorder = 0;
  let maxLatency = 0;
  let lossySessions = 0;
  const lossyExamples: Record<string, unknown>[] = [];
  for (const x of sessions) {
    const l = ledger.lost(x);
    lost += l;
    if (l > 0 && ++lossySessions <= 5) lossyExamples.push(ledger.explain(x));
    required += ledger.required(x);
    disorder += x.disorder;
    maxLatency = Math.max(maxLatency, x.maxLatency);
  }
  const closes: Record<string, number> = {};
  const genErrors: Record<string, number> = {};
  let opened = 0;
  let received = 0;
  for (const g of gens) {
    opened += g.stats.opened;
    received += g.stats.messages;
    for (const [k, v] of Object.entries(g.stats.unexpectedCloses)) closes[k] = (closes[k] ?? 0) + v;
    for (const [k, v] of Object.entries(g.stats.errors)) genErrors[k] = (genErrors[k] ?? 0) + v;
  }
  const non200 = Object.entries(pub.outcomes).filter(([k]) => k !== '200').reduce((n, [, v]) => n + v, 0);
  const logErrors = serverLogErrors(server.logFile);
  const serverErrors = non200 + Object.values(closes).reduce((a, b) => a + b, 0) + Object.values(genErrors).reduce((a, b) => a + b, 0) + logErrors.count + (alive ? 0 : 1);
  const rssChange = (rssEnd - rssWarm) / rssWarm;
  const rssGcChange = (rssEndGc - rssWarmGc) / rssWarmGc;

  const result = {
    minutes: o.minutes, conns: o.conns, channels: o.channels, rate_per_channel: o.rate, workers: o.workers,
    connections_opened: opened, open_at_end: openAtEnd, subscriptions: sessions.length,
    publishes: pub.outcomes, max_publish_ms: Math.round(pub.maxMs),
    messages_received: received, messages_required: required, lost_messages: lost, lossy_subscriptions: lossySessions, lossy_examples: lossyExamples,
    out_of_order_or_duplicate: disorder, max_delivery_latency_ms: Math.round(maxLatency),
    rss_after_warmup_mib: +(rssWarm / 1024).toFixed(1), rss_end_mib: +(rssEnd / 1024).toFixed(1), rss_change_pct: +(rssChange * 100).toFixed(1),
    rss_after_warmup_gc_mib: +(rssWarmGc / 1024).toFixed(1), rss_end_gc_mib: +(rssEndGc / 1024).toFixed(1), rss_gc_change_pct: +(rssGcChange * 100).toFixed(1),
    rss_gc_curve: gcCurve,
    rss_window_s: win / 1000, rss_min_mib: +(Math.min(...rssAll) / 1024).toFixed(1), rss_max_mib: +(Math.max(...rssAll) / 1024).toFixed(1),
    server_errors: serverErrors, unexpected_closes: closes, client_errors: genErrors, server_log_errors: logErrors.sample,
    server_alive_until_stop: alive, server_exit: exitReport,
  };
  const checks = {
    // The verdict compares RSS right after a full GC at both points: the windowed means
    // (also reported) still carry the heaps' sawtooth, whose period here is minutes.
    rss: Number.isFinite(rssGcChange) && rssGcChange <= RSS_TOLERANCE,
    lost: lost === 0 && disorder === 0 && required > 0,
    server_errors: serverErrors === 0,
  };
  const pass = checks.rss && checks.lost && checks.server_errors;
  process.stdout.write(JSON.stringify({ ...result, checks, pass }) + '\n');
  process.stdout.write([
    '',
    `soak: ${o.minutes} min, ${o.conns} connections with churn (${opened} opened, ${sessions.length} subscriptions), ${o.channels} channels × ${o.rate}/s, workers ${o.workers}`,
    `  RSS after a full GC: after warm-up ${result.rss_after_warmup_gc_mib} MiB, at the end ${result.rss_end_gc_mib} MiB (${result.rss_gc_change_pct >= 0 ? '+' : ''}${result.rss_gc_change_pct}%, limit +${RSS_TOLERANCE * 100}%): ${checks.rss ? 'ok' : 'FAIL'}`,
    `  RSS after warm-up ${result.rss_after_warmup_mib} MiB, at the end ${result.rss_end_mib} MiB (means over ${result.rss_window_s} s; ${result.rss_change_pct >= 0 ? '+' : ''}${result.rss_change_pct}%, limit +${RSS_TOLERANCE * 100}%; range ${result.rss_min_mib}–${result.rss_max_mib} MiB): reported only`,
    `  lost messages ${lost} of ${required} required (${received} received; out of order/duplicate ${disorder}; max latency ${result.max_delivery_latency_ms} ms): ${checks.lost ? 'ok' : 'FAIL'}`,
    `  server errors ${serverErrors} (publishes ${JSON.stringify(pub.outcomes)}, unexpected closes ${JSON.stringify(closes)}, client errors ${JSON.stringify(genErrors)}, error log lines ${logErrors.count}): ${checks.server_errors ? 'ok' : 'FAIL'}`,
    `  ${pass ? 'PASS' : 'FAIL'}`,
    '',
  ].join('\n'));
  if (o.json) fs.appendFileSync(o.json, JSON.stringify({ ...result, checks, pass }) + '\n');
  if (pass) fs.rmSync(tmp, { recursive: true, force: true });
  else log(`server log kept: ${server.logFile}`);
  return pass ? 0 : 1;
}

main().then((code) => process.exit(code), (err: unknown) => {
  process.stderr.write(`soak: ${(err as Error)?.stack ?? String(err)}\n`);
  killAllNow();
  process.exit(2);
});
