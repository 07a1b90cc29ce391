// A ringcast node as a real `ringcast start` child process (bin/ringcast.js; needs tsc
// first), for the tests that kill a node with -9 (node-failure, watchlist, the delta
// coordinator's failure).

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { eventually } from '../helpers/server';

const BIN = path.resolve(__dirname, '..', '..', '..', 'bin', 'ringcast.js');

/** Cluster health of the nodes of these tests: a dead node is declared failed within ~1.2 s. */
export const HEALTH = { enabled: true, heartbeat_interval_ms: 200, node_timeout_ms: 1000, cleanup_interval_ms: 200 };

/** Starts `ringcast start` with this config; resolves once it accepts WebSocket connections. */
export async function startChild(t: Test, config: object, port: number): Promise<ChildProcess> {
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
  await eventually(() => new Promise<boolean>((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  }), 15_000, 'the child node to listen');
  return child;
}

