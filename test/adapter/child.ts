// A ringcast node as a real `ringcast start` child process (bin/ringcast.js; needs tsc
// first), for the tests that kill a node with -9 (node-failure, watchlist, the delta
// coordinator's failure).

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { freePort, listensOn } from '../helpers/net';
import { eventually } from '../helpers/server';

const BIN = path.resolve(__dirname, '..', '..', '..', 'bin', 'ringcast.js');

/** Cluster health of the nodes of these tests: a dead node is declared failed within ~1.2 s. */
export const HEALTH = { enabled: true, heartbeat_interval_ms: 200, node_timeout_ms: 1000, cleanup_interval_ms: 200 };

/**
 * Starts `ringcast start` with `config(port)`; resolves once the child itself listens on the
 * port (it accepts WebSocket connections). Without `opts.port` a free port is picked, and
 * picked again when the child exits before it listens (another process took the port
 * between freePort and the child's bind: a child boots for a second or more). With
 * `opts.port` (a node started again on its port) that port or a failure.
 */
export async function startChild(t: Test, config: (port: number) => object, opts: { port?: number } = {}): Promise<{ child: ChildProcess; port: number }> {
  for (let attempt = 1; ; attempt++) {
    const port = opts.port ?? await freePort();
    const child = spawnChild(t, config(port));
    const exited = () => child.exitCode !== null || child.signalCode !== null;
    // a whole process starting on a loaded machine
    await eventually(() => exited() || listensOn(child.pid!, port), 30_000, `the child node to listen on ${port}`);
    if (!exited()) return { child, port };
    if (opts.port !== undefined || attempt >= 5) {
      throw new Error(`the child node exited (${child.exitCode ?? child.signalCode}) before it listened on ${port}`);
    }
  }
}

function spawnChild(t: Test, config: object): ChildProcess {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-node-'));
  const file = path.join(dir, 'config.yaml');
  writeFileSync(file, JSON.stringify(config)); // YAML is a superset of JSON
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith('TAP') || k.startsWith('RINGCAST_') || k === 'NODE_OPTIONS') delete env[k];
  const child = spawn(process.execPath, [BIN, 'start', '--config', file], { env, stdio: 'ignore' });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  return child;
}

