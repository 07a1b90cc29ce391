// What the harness needs from a server under test, and the common way to run one: a
// guard process (guard.ts) starts it with its output in a log file, the harness waits
// until it answers HTTP, reads its RSS and CPU time from /proc, and stops it.

import { fork } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { GuardEvent, GuardMessage } from './guard';
import { track, trackPid, untrackPid } from './procs';

export const APP = { id: 'app-id', key: 'app-key', secret: 'app-secret' } as const;

export interface RunningTarget {
  readonly name: string;
  readonly port: number;
  /** pid of the server process itself (RSS, CPU). */
  readonly pid: number;
  readonly logFile: string;
  alive(): boolean;
  /** Why the server is gone (exit code/signal and the end of its log), or null while it runs. */
  exitReport(): string | null;
  stop(): Promise<void>;
}

export interface TargetDef {
  /** Short id used on the command line and in the output: ceiling, soketi, ringcast-1, … */
  readonly name: string;
  readonly label: string;
  /** One-time preparation (install) before the first start. */
  prepare?(log: (msg: string) => void): Promise<void>;
  start(opts: { port: number; tmpDir: string }): Promise<RunningTarget>;
}

export interface LaunchOptions {
  name: string;
  cmd: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  port: number;
  tmpDir: string;
  /** GET path that answers < 500 once the server is ready. */
  readyPath: string;
  readyTimeoutMs?: number;
  stopGraceMs?: number;
}

/** A small environment for servers: no stray PORT/WORKERS/... from the caller's shell. */
export function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const k of ['PATH', 'HOME', 'TMPDIR', 'LANG', 'TZ']) {
    const v = process.env[k];
    if (v !== undefined) env[k] = v;
  }
  return env;
}

export { freePort } from '../../test/helpers/net';

function httpStatus(port: number, p: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: p, agent: false, timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
  });
}

function tail(file: string, lines = 20): string {
  try {
    return fs.readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

export async function launchServer(o: LaunchOptions): Promise<RunningTarget> {
  const logFile = path.join(o.tmpDir, `${o.name}-${o.port}.log`);
  const guard = fork(path.join(__dirname, 'guard.js'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  track(guard);
  let pid = 0;
  let exited: GuardEvent | null = null;
  const exitWaiters: (() => void)[] = [];
  const guardGone = new Promise<void>((resolve) => guard.once('exit', () => resolve()));
  const onExit = (): void => {
    if (pid !== 0) untrackPid(pid);
    for (const w of exitWaiters.splice(0)) w();
  };
  void guardGone.then(() => {
    if (exited === null) exited = { type: 'exit', code: null, signal: 'guard-exit' };
    onExit();
  });
  const spawned = new Promise<number>((resolve, reject) => {
    guard.on('message', (m: GuardEvent) => {
      if (m.type === 'spawned') {
        pid = m.pid;
        trackPid(pid);
        resolve(m.pid);
      } else if (m.type === 'exit') {
        exited = m;
        onExit();
        reject(new Error(`${o.name} exited at once (code ${m.code}, signal ${m.signal}); log ${logFile}:\n${tail(logFile)}`));
      }
    });
  });
  const msg: GuardMessage = { type: 'spawn', cmd: o.cmd, args: o.args, cwd: o.cwd, env: o.env, logFile };
  guard.send(msg);
  await spawned;

  const readyBy = Date.now() + (o.readyTimeoutMs ?? 30_000);
  for (;;) {
    if (exited !== null) {
      const e = exited as GuardEvent & { type: 'exit' };
      throw new Error(`${o.name} exited before it was ready (code ${e.code}, signal ${e.signal}); log ${logFile}:\n${tail(logFile)}`);
    }
    const st = await httpStatus(o.port, o.readyPath);
    if (st > 0 && st < 500) break;
    if (Date.now() > readyBy) {
      guard.send({ type: 'stop', graceMs: 1000 } satisfies GuardMessage);
      throw new Error(`${o.name} did not answer on port ${o.port} within ${o.readyTimeoutMs ?? 30_000} ms; log ${logFile}:\n${tail(logFile)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }

  const grace = o.stopGraceMs ?? 5000;
  let stopping: Promise<void> | null = null;
  return {
    name: o.name,
    port: o.port,
    pid,
    logFile,
    alive: () => exited === null,
    exitReport: () => {
      if (exited === null) return null;
      const e = exited as GuardEvent & { type: 'exit' };
      return `${o.name} exited (code ${e.code}, signal ${e.signal}); log ${logFile}:\n${tail(logFile)}`;
    },
    stop() {
      stopping ??= (async () => {
        if (exited !== null) return;
        const gone = new Promise<void>((r) => exitWaiters.push(r));
        if (guard.connected) guard.send({ type: 'stop', graceMs: grace } satisfies GuardMessage);
        const t = setTimeout(() => {
          try {
            process.kill(pid, 'SIGKILL');
          } catch { /* gone */ }
          guard.kill('SIGKILL');
        }, grace + 3000);
        await gone;
        clearTimeout(t);
        await guardGone;
      })();
      return stopping;
    },
  };
}

/** VmRSS of a process in KiB (NaN if it is gone). */
export function rssKb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : NaN;
  } catch {
    return NaN;
  }
}

/** utime + stime of a process in µs (all its threads), NaN if it is gone. */
export function processCpuUs(pid: number): number {
  return statCpuUs(`/proc/${pid}/stat`);
}

/** utime + stime of one thread of a process in µs, NaN if it is gone. */
export function threadCpuUs(pid: number, tid: number): number {
  return statCpuUs(`/proc/${pid}/task/${tid}/stat`);
}

function statCpuUs(file: string): number {
  try {
    const s = fs.readFileSync(file, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    // fields after the name start at field 3 (state): utime is field 14, stime 15
    return (Number(f[11]) + Number(f[12])) * (1e6 / CLK_TCK);
  } catch {
    return NaN;
  }
}

/** Jiffies of all CPUs from /proc/stat: [busy, total] (busy = all but idle and iowait). */
export function machineJiffies(): [number, number] {
  try {
    const line = fs.readFileSync('/proc/stat', 'utf8').split('\n', 1)[0];
    const f = line.trim().split(/\s+/).slice(1, 9).map(Number);
    const total = f.reduce((a, b) => a + b, 0);
    return [total - f[3] - f[4], total];
  } catch {
    return [NaN, NaN];
  }
}

/** USER_HZ: 100 on every Linux architecture Node runs on. */
const CLK_TCK = 100;
