// The C load generator of the API-only and many-channels scenarios: wrk (a Debian
// package, `make bench-deps`) replaying a pool of pre-signed publishes with
// bench/harness/wrk/replay.lua.
//
// Why wrk and a pool: the Node publisher (publisher.ts) tops out near the rate a bare uWS
// server answers on this machine, so it read the API ceiling low and flattered the
// ratios. wrk's Lua has no HMAC; rather than an HMAC-SHA256 and an MD5 in Lua
// (slower than the server's own check, and more code to trust), Node signs a pool of
// distinct requests right before each run with the pusher SDK's own signer
// (`createSignedQueryString`, exactly what the SDKs send) and wrk replays them in turn.
// A signature stays valid for ±600 s of its auth_timestamp and a run lasts seconds, so a
// replayed request is as valid as a fresh one; every request of the pool differs (its
// channel, or a sequence number in its data), so no server could answer from a cache of
// seen requests.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { track } from './procs';

/** The wrk binary: RINGCAST_BENCH_WRK, else `wrk` on PATH; null if there is none. */
export function findWrk(): string | null {
  const env = process.env.RINGCAST_BENCH_WRK;
  if (env) return fs.existsSync(env) ? env : null;
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const p = path.join(dir, 'wrk');
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch { /* next */ }
  }
  return null;
}

/** wrk's version line, to put in the output next to node's. */
export function wrkVersion(bin: string): string {
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 5000 });
  return (r.stdout || r.stderr || '').split('\n')[0].trim();
}

/** The Lua script, from the source tree (dist/bench/harness → bench/harness/wrk). */
export function replayScript(): string {
  const p = path.resolve(__dirname, '..', '..', '..', 'bench', 'harness', 'wrk', 'replay.lua');
  if (!fs.existsSync(p)) throw new Error(`${p} is missing (the harness runs from dist/ of a checkout)`);
  return p;
}

interface SdkToken { key: string; secret: string }
type SignFn = (token: SdkToken, req: { method: string; path: string; body?: string; params?: Record<string, string> }) => string;

// The pusher SDK's signer (a devDependency): no types are published for lib/.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const sdkRequests = require('pusher/lib/requests') as { createSignedQueryString: SignFn };
// eslint-disable-next-line @typescript-eslint/no-require-imports
const SdkTokenClass = require('pusher/lib/token') as new (key: string, secret: string) => SdkToken;

export interface PoolSpec {
  host: string;
  port: number;
  appId: string;
  key: string;
  secret: string;
  event: string;
  /** Length of each event's data string (as the Node publisher's: '@0 ' + padding). */
  payloadBytes: number;
  /** Request i publishes to channelOf(i). */
  channelOf(i: number): string;
  size: number;
}

/** `size` signed `POST /apps/{id}/events` requests, each distinct, as raw HTTP/1.1 bytes. */
export function signedPublishes(s: PoolSpec): Buffer[] {
  const token = new SdkTokenClass(s.key, s.secret);
  const reqPath = `/apps/${encodeURIComponent(s.appId)}/events`;
  const out: Buffer[] = [];
  for (let i = 0; i < s.size; i++) {
    // '@0 ' + sequence + padding: the same length as the Node publisher's data, distinct.
    const head = `@0 ${i} `;
    const data = head + 'x'.repeat(Math.max(0, s.payloadBytes - 18 - (head.length - 3)));
    const body = JSON.stringify({ name: s.event, channels: [s.channelOf(i)], data });
    const q = sdkRequests.createSignedQueryString(token, { method: 'POST', path: reqPath, body });
    const bodyBuf = Buffer.from(body, 'utf8');
    out.push(Buffer.concat([
      Buffer.from(`POST ${reqPath}?${q} HTTP/1.1\r\nHost: ${s.host}:${s.port}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${bodyBuf.length}\r\n\r\n`, 'latin1'),
      bodyBuf,
    ]));
  }
  return out;
}

/** Writes the pool in replay.lua's format: "<byte length>\n<bytes>" per request. */
export function writePool(file: string, reqs: Buffer[]): void {
  const parts: Buffer[] = [];
  for (const r of reqs) parts.push(Buffer.from(`${r.length}\n`, 'latin1'), r);
  fs.writeFileSync(file, Buffer.concat(parts));
}

/** What replay.lua's done() prints (times in µs, over wrk's whole run). */
export interface WrkResult {
  duration_us: number;
  requests: number;
  bytes: number;
  connect_errors: number;
  read_errors: number;
  write_errors: number;
  /** Responses with a status above 399 (wrk's own count). */
  status_errors: number;
  timeouts: number;
  p50_us: number;
  p90_us: number;
  p99_us: number;
  max_us: number;
  mean_us: number;
}

export interface WrkRun {
  pid: number;
  /** Resolves with the counts when wrk ends; rejects if it failed or printed none. */
  done: Promise<WrkResult>;
}

export interface WrkOptions {
  bin: string;
  url: string;
  poolFile: string;
  threads: number;
  conns: number;
  /** wrk counts whole seconds only. */
  durationS: number;
}

/** Starts one wrk run. */
export function startWrk(o: WrkOptions): WrkRun {
  const threads = Math.max(1, Math.min(o.threads, o.conns));
  const args = ['-t', String(threads), '-c', String(o.conns), '-d', `${Math.max(1, Math.ceil(o.durationS))}s`,
    '-s', replayScript(), o.url, o.poolFile, String(threads)];
  const proc = spawn(o.bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  track(proc);
  let out = '';
  let err = '';
  proc.stdout.setEncoding('utf8').on('data', (s: string) => { out += s; });
  proc.stderr.setEncoding('utf8').on('data', (s: string) => { err += s; });
  const done = new Promise<WrkResult>((resolve, reject) => {
    proc.once('error', (e) => reject(new Error(`wrk: ${e.message}`)));
    proc.once('exit', (code, signal) => {
      const m = /^WRK_RESULT (\{.*\})$/m.exec(out);
      if (code !== 0 || m === null) {
        reject(new Error(`wrk ${args.join(' ')} ended with code ${code}, signal ${signal}: ${(err + out).trim().slice(-600)}`));
        return;
      }
      resolve(JSON.parse(m[1]) as WrkResult);
    });
  });
  return { pid: proc.pid ?? 0, done };
}
