// Real Redis servers for tests, started by the test itself on free ports in a temp dir
// (no persistence) and killed in teardown: a standalone server, or a 3-master cluster
// built with `redis-cli --cluster create`. redis-server missing is a FAILURE with a
// clear message, never a skip: `make test` installs it (scripts/deps.sh).

import { spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort, portFree } from './net';
import { killServer, spawnServer } from './procs';


/** Throws (the test fails) when the binaries are missing. */
export function requireRedisBinaries(): void {
  for (const bin of ['redis-server', 'redis-cli']) {
    const r = spawnSync(bin, ['--version'], { encoding: 'utf8' });
    if (r.error || r.status !== 0) {
      throw new Error(`${bin} is not installed: these tests need a real Redis. Run scripts/deps.sh ` +
        '(make test does) or apt-get install -y redis-server.');
    }
  }
}

/** A whole one-line (+ - :) or bulk ($) reply: enough for what the helpers read. */
function complete(buf: string): boolean {
  const eol = buf.indexOf('\r\n');
  if (eol < 0) return false;
  if (buf[0] !== '$') return true;
  const n = Number(buf.slice(1, eol));
  return n < 0 || Buffer.byteLength(buf) >= eol + 2 + n + 2;
}

/** Who a helper command authenticates as: a password (requirepass) or an ACL user and its password. */
export interface RedisAuth {
  username?: string;
  password: string;
}

/**
 * Sends one inline command and resolves with the raw reply (or rejects); with `auth`, an
 * AUTH first (its +OK is not part of the reply; a refused AUTH is the reply).
 */
export function redisCommand(port: number, command: string, timeoutMs = 1000, auth?: RedisAuth): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let buf = '';
    let authed = auth === undefined;
    const timer = setTimeout(() => { sock.destroy(); reject(new Error('redis command timed out')); }, timeoutMs);
    sock.on('connect', () => sock.write(auth ? `AUTH ${auth.username ?? ''} ${auth.password}\r\n${command}\r\n` : `${command}\r\n`));
    sock.on('data', (d) => {
      buf += d.toString();
      if (!authed && buf.startsWith('+OK\r\n')) {
        authed = true;
        buf = buf.slice(5);
      }
      if (complete(buf)) {
        clearTimeout(timer);
        sock.end();
        resolve(buf);
      }
    });
    sock.on('error', (err) => { clearTimeout(timer); reject(err); });
  });
}

/** A redis-server that exited before it answered (its port taken meanwhile: freePort is a moment's answer). */
class RedisExited extends Error {}

async function until(what: string, fn: () => Promise<boolean>, timeoutMs = 10_000, gone: () => Error | null = () => null): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const err = gone();
    if (err) throw err;
    try {
      if (await fn()) return;
    } catch { /* not yet */ }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The last lines of a log file, for an error message ('' when unreadable). */
function lastLines(file: string, n = 3): string {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').slice(-n).join(' | ');
  } catch {
    return '';
  }
}

export interface RedisServerOptions {
  /** requirepass (and masterauth: a replica or cluster peer authenticates with it too). */
  password?: string;
  /** An ACL user with every permission (`user <name> on ><password> ~* &* +@all`); the default user is then off. */
  user?: { name: string; password: string };
}

export class RedisServer {
  private proc: ChildProcess | null = null;

  private constructor(readonly port: number, readonly dir: string, private readonly extra: string[], readonly auth?: RedisAuth) {}

  static async start(extra: string[] = [], opts: RedisServerOptions = {}): Promise<RedisServer> {
    requireRedisBinaries();
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-redis-'));
    const args = [...extra];
    if (opts.password !== undefined) args.push('--requirepass', opts.password, '--masterauth', opts.password);
    if (opts.user) args.push('--user', opts.user.name, 'on', `>${opts.user.password}`, '~*', '&*', '+@all', '--user', 'default', 'off');
    const auth = opts.user ? { username: opts.user.name, password: opts.user.password }
      : opts.password !== undefined ? { password: opts.password } : undefined;
    // A free port is free a moment ago only: another process (an outgoing connection's local
    // port, another test's server) may take it, or a cluster node's bus port (port + 10000),
    // before redis-server binds them; it then exits at once, and another port is tried.
    const cluster = extra.includes('--cluster-enabled');
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      if (cluster && (port + 10_000 > 65_535 || !(await portFree(port + 10_000))) && attempt < 20) continue;
      const s = new RedisServer(port, dir, args, auth);
      try {
        await s.resume();
        return s;
      } catch (err) {
        if (!(err instanceof RedisExited) || attempt >= 5) throw err;
      }
    }
  }

  /** One command as the server's user (see redisCommand). */
  command(command: string, timeoutMs = 1000): Promise<string> {
    return redisCommand(this.port, command, timeoutMs, this.auth);
  }

  get running(): boolean {
    return this.proc !== null;
  }

  /** The server's pid while it runs (benchmarks read its CPU), else null. */
  get pid(): number | null {
    return this.proc?.pid ?? null;
  }

  /** (Re)starts the server on the same port and waits for PONG. */
  async resume(): Promise<void> {
    if (this.proc) return;
    const log = path.join(this.dir, `redis-${this.port}.log`);
    const proc = spawnServer('redis-server', [
      '--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--dir', this.dir, '--logfile', log, ...this.extra,
    ]);
    this.proc = proc;
    const exited = () => (proc.exitCode !== null || proc.signalCode !== null
      ? new RedisExited(`redis-server on port ${this.port} exited before it answered: ${lastLines(log)}`) : null);
    try {
      await until(`redis-server on port ${this.port}`, async () => (await this.command('PING')).startsWith('+PONG'), 10_000, exited);
    } catch (err) {
      if (this.proc === proc && exited() !== null) this.proc = null;
      throw err;
    }
  }

  /** Kills the server (SIGKILL: an outage, not a clean shutdown) and waits for its exit. */
  async kill(): Promise<void> {
    const proc = this.proc;
    this.proc = null;
    await killServer(proc);
  }

  /**
   * SIGSTOP / SIGCONT: a hung server. Its connections stay open and it answers nothing
   * (what a dead connection cannot show: ioredis still reports it ready).
   */
  freeze(): void {
    this.proc?.kill('SIGSTOP');
  }

  thaw(): void {
    this.proc?.kill('SIGCONT');
  }

  async stop(): Promise<void> {
    this.thaw();
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export class RedisCluster {
  private constructor(readonly nodes: RedisServer[]) {}

  get ports(): number[] {
    return this.nodes.map((n) => n.port);
  }

  /** Three masters, no replicas, all 16384 slots assigned, cluster_state:ok everywhere; `opts`: on every node. */
  static async start(opts: RedisServerOptions = {}): Promise<RedisCluster> {
    requireRedisBinaries();
    const nodes: RedisServer[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        const port = await freePort();
        nodes.push(await RedisServer.start([
          '--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`, '--cluster-node-timeout', '5000',
        ], opts));
      }
      const auth = nodes[0]!.auth;
      const args = ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '0', '--cluster-yes',
        ...(auth?.username ? ['--user', auth.username] : []), ...(auth ? ['-a', auth.password, '--no-auth-warning'] : [])];
      const r = spawnSync('redis-cli', args, { encoding: 'utf8', timeout: 30_000 });
      if (r.status !== 0) throw new Error(`redis-cli --cluster create failed: ${r.stderr || r.stdout}`);
      for (const n of nodes) {
        await until(`cluster_state:ok on ${n.port}`, async () => (await n.command('CLUSTER INFO')).includes('cluster_state:ok'), 20_000);
      }
      return new RedisCluster(nodes);
    } catch (err) {
      await Promise.all(nodes.map((n) => n.stop()));
      throw err;
    }
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.stop()));
  }
}

export interface RedisSentinelOptions {
  /** The sentinel's own requirepass (database.redis.sentinel_password). */
  sentinelPassword?: string;
  /** The master's and replica's requirepass (database.redis.password); the sentinel knows it (auth-pass). */
  password?: string;
}

/**
 * A master, one replica and one redis-sentinel monitoring them as `mymaster` (quorum 1).
 * ringcast connects through the sentinel (database.redis.sentinels).
 */
export class RedisSentinelSet {
  private sentinel: ChildProcess | null = null;

  private constructor(readonly master: RedisServer, readonly replica: RedisServer, readonly sentinelPort: number, readonly dir: string,
    private readonly opts: RedisSentinelOptions) {}

  static readonly NAME = 'mymaster';

  static async start(opts: RedisSentinelOptions = {}): Promise<RedisSentinelSet> {
    requireRedisBinaries();
    const r = spawnSync('redis-sentinel', ['--version'], { encoding: 'utf8' });
    if (r.error || r.status !== 0) {
      throw new Error('redis-sentinel is not installed: these tests need it. Run scripts/deps.sh (make test does) or apt-get install -y redis-sentinel.');
    }
    const server = { password: opts.password };
    const master = await RedisServer.start([], server);
    const replica = await RedisServer.start(['--replicaof', '127.0.0.1', String(master.port)], server);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-sentinel-'));
    const set = new RedisSentinelSet(master, replica, await freePort(), dir, opts);
    await set.startSentinel();
    return set;
  }

  private async startSentinel(): Promise<void> {
    const conf = path.join(this.dir, 'sentinel.conf');
    writeFileSync(conf, [
      `port ${this.sentinelPort}`, 'bind 127.0.0.1', `dir ${this.dir}`,
      `sentinel monitor ${RedisSentinelSet.NAME} 127.0.0.1 ${this.master.port} 1`,
      `sentinel down-after-milliseconds ${RedisSentinelSet.NAME} 1000`,
      `sentinel failover-timeout ${RedisSentinelSet.NAME} 5000`,
      ...(this.opts.password !== undefined ? [`sentinel auth-pass ${RedisSentinelSet.NAME} ${this.opts.password}`] : []),
      ...(this.opts.sentinelPassword !== undefined ? [`requirepass ${this.opts.sentinelPassword}`] : []),
    ].join('\n') + '\n');
    const proc = spawnServer('redis-sentinel', [conf]);
    this.sentinel = proc;
    await until(`redis-sentinel on ${this.sentinelPort}`, async () =>
      (await redisCommand(this.sentinelPort, `SENTINEL get-master-addr-by-name ${RedisSentinelSet.NAME}`, 1000,
        this.opts.sentinelPassword !== undefined ? { password: this.opts.sentinelPassword } : undefined)).includes(String(this.master.port)));
  }

  async stop(): Promise<void> {
    this.sentinel?.kill('SIGKILL');
    this.sentinel = null;
    await Promise.all([this.master.stop(), this.replica.stop()]);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
