// A real PostgreSQL for tests: initdb into a temporary directory, the server on a free
// port of 127.0.0.1 with its Unix socket in that directory, stopped in teardown. The
// Debian package keeps its binaries in /usr/lib/postgresql/<version>/bin (not on PATH);
// missing, it is a FAILURE naming the package, never a skip (scripts/deps.sh installs it).
// As root the server runs as the package's `postgres` user (PostgreSQL refuses root).

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { freePort } from './net';

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

function pgBin(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(path.join(root, v, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a)) : [];
  if (versions.length === 0) {
    throw new Error('PostgreSQL is not installed (no /usr/lib/postgresql/<version>/bin/initdb): these tests need a real PostgreSQL. Run scripts/deps.sh (make test does) or apt-get install -y postgresql.');
  }
  return path.join(root, versions[0], 'bin');
}

/** uid/gid to run as: ours, or the `postgres` user's when we are root. */
function runAs(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const line = readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith('postgres:'));
  if (!line) throw new Error('running as root and there is no postgres user to run PostgreSQL as (apt-get install -y postgresql creates it)');
  const f = line.split(':');
  return { uid: Number(f[2]), gid: Number(f[3]) };
}

export class PostgresServer {
  private proc: ChildProcess | null = null;
  private constructor(readonly dir: string, readonly port: number, private readonly bin: string, private readonly user: { uid: number; gid: number } | null) {}

  /** initdb (trust authentication, user postgres, database postgres) and start. */
  static async start(): Promise<PostgresServer> {
    const bin = pgBin();
    const user = runAs();
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-pg-'));
    if (user) chownSync(dir, user.uid, user.gid);
    const init = spawnSync(path.join(bin, 'initdb'), ['-D', path.join(dir, 'data'), '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync'],
      { encoding: 'utf8', ...(user ?? {}) });
    if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr || init.error?.message}`);
    const s = new PostgresServer(dir, await freePort(), bin, user);
    await s.resume();
    return s;
  }

  /** Where clients connect: the TCP address (`host` may also be `dir`, the socket's directory). */
  get host(): string {
    return '127.0.0.1';
  }

  /** (Re)starts the server on the same port and waits until it answers a query. */
  async resume(): Promise<void> {
    if (this.proc) return;
    const proc = spawn(path.join(this.bin, 'postgres'), ['-D', path.join(this.dir, 'data'), '-p', String(this.port), '-k', this.dir,
      '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'],
    { stdio: 'ignore', ...(this.user ?? {}) });
    live.add(proc);
    proc.once('exit', () => live.delete(proc));
    this.proc = proc;
    const end = Date.now() + 20_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`postgres exited (${proc.exitCode}) before it answered on port ${this.port}`);
      try {
        await this.query('SELECT 1');
        return;
      } catch (err) {
        if (Date.now() > end) throw new Error(`postgres did not answer on port ${this.port}: ${(err as Error).message}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  /** Runs SQL as postgres in `database` (default postgres). */
  async query(sql: string, params: unknown[] = [], database = 'postgres'): Promise<Record<string, unknown>[]> {
    const c = new Client({ host: '127.0.0.1', port: this.port, user: 'postgres', database, connectionTimeoutMillis: 2000 });
    c.on('error', () => undefined);
    await c.connect();
    try {
      return (await c.query(sql, params)).rows as Record<string, unknown>[];
    } finally {
      await c.end();
    }
  }

  /** Fast shutdown (connections refused until resume()); the data stays. */
  async pause(): Promise<void> {
    const proc = this.proc;
    if (!proc) return;
    this.proc = null;
    if (proc.exitCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGINT');
    await exited;
  }

  async stop(): Promise<void> {
    await this.pause();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
