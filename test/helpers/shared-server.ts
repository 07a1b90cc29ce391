// One server shared by the subtests of a file (starting one costs seconds with several
// shards under tap), and per-subtest client lists closed when the subtest ends.

import type PusherJS from 'pusher-js';
import type { Test } from 'tap';
import type { ConfigInput } from '../../src/config';
import { RawClient, startServer, type TestServer } from './server';

/** A getter for one server, started on first use and stopped when `t` (the file's root test) ends. */
export function sharedServer(t: Test, overrides: ConfigInput): () => Promise<TestServer> {
  let srv: Promise<TestServer> | null = null;
  t.teardown(async () => {
    if (srv) await (await srv).stop();
  });
  return () => (srv ??= startServer(overrides));
}

export type Closable = RawClient | PusherJS;

/** Clients of one subtest, closed when it ends (the shared server outlives the subtest). */
export function scope(t: Test): <C extends Closable>(c: C) => C {
  const list: Closable[] = [];
  t.teardown(async () => {
    for (const c of list) {
      if (c instanceof RawClient) await c.close().catch(() => 0);
      else c.disconnect();
    }
  });
  return (c) => {
    list.push(c);
    return c;
  };
}
