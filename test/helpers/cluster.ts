// Nodes of a ringcast cluster for the tests that run several on one backend: each a
// real server in this process (test/helpers/server.ts), stopped when its test ends.

import type { Test } from 'tap';
import type { ConfigInput } from '../../src/config';
import { eventually, startServer, type TestServer } from './server';

/** A node on `cfg`, stopped when `t` ends. */
export async function startNode(t: Test, cfg: ConfigInput): Promise<TestServer> {
  const s = await startServer(cfg);
  t.teardown(() => s.stop());
  return s;
}

/** Two nodes on `cfg`, each stopped when `t` ends; resolves once each sees the other (within 10 s). */
export async function startNodePair(t: Test, cfg: ConfigInput): Promise<[TestServer, TestServer]> {
  const a = await startNode(t, cfg);
  const b = await startNode(t, cfg);
  await eventually(() => a.server.cluster!.nodes().length === 2 && b.server.cluster!.nodes().length === 2, 10_000, 'the nodes to see each other');
  return [a, b];
}
