// Backend server processes the tests start (redis-server, redis-sentinel, nats-server):
// spawned with their output ignored, SIGKILLed when the test process exits, however it ends.

import { spawn, type ChildProcess } from 'node:child_process';

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

/** Spawns `cmd` (stdio ignored) and kills it when this process exits. */
export function spawnServer(cmd: string, args: string[]): ChildProcess {
  const proc = spawn(cmd, args, { stdio: 'ignore' });
  live.add(proc);
  proc.once('exit', () => live.delete(proc));
  return proc;
}

/** SIGKILL (an outage, not a clean shutdown) and wait for the exit. */
export async function killServer(proc: ChildProcess | null): Promise<void> {
  if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGKILL');
  await exited;
}
