// Names the calling thread for the operating system, so that `top -H`, `ps -L`, perf and
// /proc/<pid>/task/<tid>/comm tell ringcast's threads apart (every thread is "node"
// otherwise: Node 20 uses a Worker's `name` option for the inspector only). Linux keeps
// 15 bytes of a thread name; elsewhere, or without /proc, it does nothing.

import { writeFileSync } from 'node:fs';

export const THREAD_NAME_MAX = 15;

/** Sets the calling thread's name (cut to 15 bytes); false when the system has no such file. */
export function nameThread(name: string): boolean {
  try {
    writeFileSync('/proc/thread-self/comm', Buffer.from(name, 'utf8').subarray(0, THREAD_NAME_MAX));
    return true;
  } catch {
    return false;
  }
}
