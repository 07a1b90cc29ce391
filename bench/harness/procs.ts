// Child processes of the harness: request/response over IPC, and one registry so that
// everything started is stopped on the way out (normal end, error, Ctrl-C, SIGTERM).

import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';

const live = new Set<ChildProcess>();

/** Omit over each member of a union (plain Omit would merge the members). */
export type DistOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** A forked Node child speaking {id, ...} request/response messages. */
export class Child<Cmd extends { id: number }, Reply extends { id: number }> {
  readonly proc: ChildProcess;
  private nextId = 1;
  private waiting = new Map<number, { resolve: (r: Reply) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
  private exitError: Error | null = null;
  readonly exited: Promise<void>;

  constructor(readonly name: string, script: string, args: string[] = [], execArgv: string[] = []) {
    this.proc = fork(path.join(__dirname, script), args, {
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      execArgv,
    });
    live.add(this.proc);
    this.proc.on('message', (m: Reply) => {
      const w = this.waiting.get(m.id);
      if (w === undefined) return;
      this.waiting.delete(m.id);
      clearTimeout(w.timer);
      w.resolve(m);
    });
    this.exited = new Promise((resolve) => {
      this.proc.once('exit', (code, signal) => {
        live.delete(this.proc);
        this.exitError = new Error(`${this.name} exited (code ${code}, signal ${signal})`);
        for (const w of this.waiting.values()) {
          clearTimeout(w.timer);
          w.reject(this.exitError);
        }
        this.waiting.clear();
        resolve();
      });
    });
  }

  /** Sends cmd (its id is assigned here) and resolves with the reply of the same id. */
  request(cmd: DistOmit<Cmd, 'id'>, timeoutMs: number): Promise<Reply> {
    if (this.exitError) return Promise.reject(this.exitError);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`${this.name}: no answer to ${(cmd as { type?: string }).type} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiting.set(id, { resolve, reject, timer });
      this.proc.send({ ...cmd, id });
    });
  }

  /** Ends the child: SIGTERM, then SIGKILL after graceMs. */
  async kill(graceMs = 2000): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => this.proc.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(t);
  }
}

/** Registers a process to be killed if the harness exits before it does. */
export function track(proc: ChildProcess): void {
  live.add(proc);
  proc.once('exit', () => live.delete(proc));
}

const serverPids = new Set<number>();

/** A server pid (a guard's child) to SIGKILL if the harness dies without stopping it. */
export function trackPid(pid: number): void {
  serverPids.add(pid);
}

export function untrackPid(pid: number): void {
  serverPids.delete(pid);
}

/** SIGKILLs whatever is still running (last resort, synchronous). */
export function killAllNow(): void {
  for (const pid of serverPids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch { /* already gone */ }
  }
  serverPids.clear();
  for (const p of live) {
    try {
      p.kill('SIGKILL');
    } catch { /* already gone */ }
  }
  live.clear();
}

export function liveCount(): number {
  return live.size;
}

process.once('exit', killAllNow);
