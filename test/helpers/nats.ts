// A real nats-server for tests, started on a free port on 127.0.0.1 and killed in
// teardown. nats-server missing is a FAILURE with a clear message, never a skip:
// `make test` installs it (scripts/deps.sh).

import { spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './net';
import { killServer, spawnServer } from './procs';


function requireNatsBinary(): void {
  const r = spawnSync('nats-server', ['--version'], { encoding: 'utf8' });
  if (r.error || r.status !== 0) {
    throw new Error('nats-server is not installed: these tests need a real NATS. Run scripts/deps.sh ' +
      '(make test does) or apt-get install -y nats-server.');
  }
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

/** A nats-server that exited before it listened (its port taken meanwhile). */
class NatsExited extends Error {}

export class NatsServer {
  private proc: ChildProcess | null = null;
  private constructor(readonly port: number, private readonly auth: string[], private readonly store: string | null) {}

  /**
   * `auth`: clients must give this user and password, or this token. JetStream is on (the
   * cluster-wide idempotency window's key-value bucket), its store in a temporary directory
   * that outlives kill() / resume() like a server's disk; `jetstream: false` runs without.
   */
  static async start(auth?: { user: string; password: string } | { token: string }, opts: { jetstream?: boolean } = {}): Promise<NatsServer> {
    requireNatsBinary();
    const args = !auth ? [] : 'token' in auth ? ['--auth', auth.token] : ['--user', auth.user, '--pass', auth.password];
    const store = opts.jetstream === false ? null : mkdtempSync(path.join(os.tmpdir(), 'ringcast-nats-'));
    // a free port is free a moment ago only: taken before nats-server binds it, the server
    // exits at once, and another port is tried
    for (let attempt = 1; ; attempt++) {
      const s = new NatsServer(await freePort(), args, store);
      try {
        await s.resume();
        return s;
      } catch (err) {
        if (!(err instanceof NatsExited) || attempt >= 5) throw err;
      }
    }
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** The server's pid while it runs (benchmarks read its CPU), else null. */
  get pid(): number | null {
    return this.proc?.pid ?? null;
  }

  /** (Re)starts the server on the same port and waits until it accepts connections. */
  async resume(): Promise<void> {
    if (this.proc) return;
    const js = this.store === null ? [] : ['-js', '-sd', this.store];
    const proc = spawnServer('nats-server', ['-a', '127.0.0.1', '-p', String(this.port), ...this.auth, ...js]);
    this.proc = proc;
    const end = Date.now() + 10_000;
    const exited = () => proc.exitCode !== null || proc.signalCode !== null;
    while (!exited() && !(await portOpen(this.port))) {
      if (Date.now() > end) throw new Error(`nats-server did not listen on ${this.port}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    if (exited()) {
      if (this.proc === proc) this.proc = null;
      throw new NatsExited(`nats-server on port ${this.port} exited before it listened (code ${proc.exitCode ?? proc.signalCode})`);
    }
  }

  /** SIGKILL (an outage) and wait for the exit. */
  async kill(): Promise<void> {
    const proc = this.proc;
    this.proc = null;
    await killServer(proc);
  }

  /** SIGSTOP / SIGCONT: a hung server (connections open, nothing read or answered). */
  freeze(): void {
    this.proc?.kill('SIGSTOP');
  }

  thaw(): void {
    this.proc?.kill('SIGCONT');
  }

  async stop(): Promise<void> {
    this.thaw();
    await this.kill();
    if (this.store !== null) rmSync(this.store, { recursive: true, force: true });
  }
}
