// Small network helpers for tests that start their own processes.

import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import net from 'node:net';

/** A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** Whether `port` on 127.0.0.1 can be bound now (bound, then released). */
export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/**
 * Whether process `pid` holds the listening TCP socket of 127.0.0.1:`port` (Linux /proc: the
 * socket's inode in /proc/net/tcp, among the process's open files). A connection that
 * succeeds says only that *something* listens there.
 */
export function listensOn(pid: number, port: number): boolean {
  const local = `0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  const inodes = new Set<string>();
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f[1] === local && f[3] === '0A') inodes.add(`socket:[${f[9]}]`); // 0A: LISTEN
  }
  if (inodes.size === 0) return false;
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return false; // exited
  }
  return fds.some((fd) => {
    try {
      return inodes.has(readlinkSync(`/proc/${pid}/fd/${fd}`));
    } catch {
      return false;
    }
  });
}
