// Guard process between the harness and a target server (ceiling, soketi, ringcast).
//
// The harness forks this with an IPC channel and sends {type:'spawn'}; the guard starts
// the server with its output in a log file and reports the server's pid (whose RSS the
// harness reads). When the harness goes away for any reason — even SIGKILL, which gives
// it no chance to clean up — the IPC channel closes and the guard stops the server:
// SIGTERM, then SIGKILL after the grace period. Nothing outlives the harness.

import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';

export interface GuardSpawn {
  type: 'spawn';
  cmd: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  logFile: string;
}

export type GuardMessage = GuardSpawn | { type: 'stop'; graceMs: number };

export type GuardEvent =
  | { type: 'spawned'; pid: number }
  | { type: 'exit'; code: number | null; signal: string | null };

let child: ChildProcess | null = null;
let terminating = false;

function terminate(graceMs: number): void {
  if (child === null || child.exitCode !== null || child.signalCode !== null) process.exit(0);
  if (terminating) return;
  terminating = true;
  child.kill('SIGTERM');
  setTimeout(() => child?.kill('SIGKILL'), graceMs);
}

process.on('message', (m: GuardMessage) => {
  if (m.type === 'spawn') {
    const fd = fs.openSync(m.logFile, 'a');
    child = spawn(m.cmd, m.args, { cwd: m.cwd, env: m.env, stdio: ['ignore', fd, fd] });
    fs.closeSync(fd);
    child.once('exit', (code, signal) => {
      if (process.connected) process.send?.({ type: 'exit', code, signal } satisfies GuardEvent);
      setTimeout(() => process.exit(0), 20);
    });
    child.once('error', (err) => {
      fs.appendFileSync(m.logFile, `guard: ${err.message}\n`);
      if (process.connected) process.send?.({ type: 'exit', code: -1, signal: null } satisfies GuardEvent);
      setTimeout(() => process.exit(1), 20);
    });
    if (child.pid !== undefined) process.send?.({ type: 'spawned', pid: child.pid } satisfies GuardEvent);
  } else if (m.type === 'stop') {
    terminate(m.graceMs);
  }
});

process.on('disconnect', () => terminate(3000));
// Ctrl-C reaches the whole process group: the server gets it too; the harness decides.
process.on('SIGINT', () => { /* handled by the harness and the server */ });
process.on('SIGTERM', () => terminate(3000));
