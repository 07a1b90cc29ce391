// A real MariaDB for tests: mariadb-install-db into a temporary directory, mariadbd on a
// free port of 127.0.0.1 (its socket in that directory, no grant tables: any user is
// root), stopped in teardown. mariadb-server missing is a FAILURE naming it, never a
// skip (scripts/deps.sh installs it).

import { spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createConnection } from 'mysql2/promise';
import { freePort } from './net';
import { spawnServer } from './procs';

export class MariaDbServer {
  private proc: ChildProcess | null = null;
  private constructor(readonly dir: string, readonly port: number) {}

  static async start(): Promise<MariaDbServer> {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-mariadb-'));
    const init = spawnSync('mariadb-install-db', ['--no-defaults', `--datadir=${path.join(dir, 'data')}`, '--user=root',
      '--auth-root-authentication-method=normal', '--skip-test-db'], { encoding: 'utf8' });
    if (init.error || init.status !== 0) {
      throw new Error(`mariadb-install-db failed (is mariadb-server installed? Run scripts/deps.sh, which make test does, or apt-get install -y mariadb-server): ${init.stderr || init.error?.message}`);
    }
    const s = new MariaDbServer(dir, await freePort());
    await s.resume();
    return s;
  }

  get socket(): string {
    return path.join(this.dir, 'mysqld.sock');
  }

  /** (Re)starts the server on the same port and waits until it answers a query. */
  async resume(): Promise<void> {
    if (this.proc) return;
    const proc = spawnServer('mariadbd', ['--no-defaults', `--datadir=${path.join(this.dir, 'data')}`, `--socket=${this.socket}`,
      `--port=${this.port}`, '--bind-address=127.0.0.1', '--user=root', '--skip-grant-tables', '--skip-log-bin',
      `--pid-file=${path.join(this.dir, 'mysqld.pid')}`, '--innodb-buffer-pool-size=16M', '--innodb-flush-log-at-trx-commit=0']);
    this.proc = proc;
    const end = Date.now() + 30_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`mariadbd exited (${proc.exitCode}) before it answered on port ${this.port}`);
      try {
        await this.query('SELECT 1');
        return;
      } catch (err) {
        if (Date.now() > end) throw new Error(`mariadbd did not answer on port ${this.port}: ${(err as Error).message}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  async query(sql: string, params: unknown[] = [], database?: string): Promise<unknown> {
    const c = await createConnection({ host: '127.0.0.1', port: this.port, user: 'root', database, connectTimeout: 2000 });
    try {
      const [rows] = await c.query(sql, params);
      return rows;
    } finally {
      await c.end();
    }
  }

  /** SIGTERM (a clean shutdown: connections refused until resume()); the data stays. */
  async pause(): Promise<void> {
    const proc = this.proc;
    if (!proc) return;
    this.proc = null;
    if (proc.exitCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await exited;
  }

  async stop(): Promise<void> {
    await this.pause();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
