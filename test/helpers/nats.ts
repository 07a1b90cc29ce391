// A real nats-server for tests, started on a free port on 127.0.0.1 and killed in
// teardown. nats-server missing is a FAILURE with a clear message, never a skip:
// `make test` installs it (scripts/deps.sh).

import { spawnSync, type ChildProcess } from 'node:child_process';
import net from 'node:net';
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

export class NatsServer {
  private proc: ChildProcess | null = null;
  private constructor(readonly port: number, private readonly auth: string[]) {}

  /** `auth`: clients must give this user and password, or this token. */
  static async start(auth?: { user: string; password: string } | { token: string }): Promise<NatsServer> {
    requireNatsBinary();
    const args = !auth ? [] : 'token' in auth ? ['--auth', auth.token] : ['--user', auth.user, '--pass', auth.password];
    const s = new NatsServer(await freePort(), args);
    await s.resume();
    return s;
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
    const proc = spawnServer('nats-server', ['-a', '127.0.0.1', '-p', String(this.port), ...this.auth]);
    this.proc = proc;
    const end = Date.now() + 10_000;
    while (!(await portOpen(this.port))) {
      if (Date.now() > end) throw new Error(`nats-server did not listen on ${this.port}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** SIGKILL (an outage) and wait for the exit. */
  async kill(): Promise<void> {
    const proc = this.proc;
    this.proc = null;
    await killServer(proc);
  }

  stop(): Promise<void> {
    return this.kill();
  }
}
