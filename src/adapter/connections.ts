// app max_connections over the cluster, the primary's part: every `intervalMs` this node
// tells the others its connection count per app when it changed (and all of them to a
// node that just joined; a node seen again after this one declared it failed is asked for
// its own, `ask`, since it sends them on change only); it sums what the others told and writes it into the remote row
// of the shared counters (channels/counters.ts), which every shard adds when it admits a
// connection. A node that is gone no longer counts.
//
// The bound while counts propagate: a connection made on one node is counted by the
// others within intervalMs plus one backend hop; in that window each node admits against
// the older sum, so an app can exceed max_connections by at most what the other nodes
// admit in that window (README, "Many hosts").

import type { ConnectionCounters } from '../channels/counters';
import type { ClusterNode } from './cluster';

export const CONNECTION_COUNT_INTERVAL_MS = 100;

export function shareConnectionCounts(deps: {
  cluster: ClusterNode;
  counters: ConnectionCounters;
  /** App id → its slot in the counters (reload/primary.ts keeps it current across reloads). */
  slots: () => Readonly<Record<string, number>>;
  intervalMs?: number;
}): { stop(): void } {
  const { cluster, counters } = deps;
  /** node → app id → connections */
  const byNode = new Map<string, Map<string, number>>();
  let sent = '';

  function sum(): void {
    for (const [app, slot] of Object.entries(deps.slots())) {
      let n = 0;
      for (const counts of byNode.values()) n += counts.get(app) ?? 0;
      counters.setRemote(slot, n);
    }
  }

  function tell(force: boolean, ask = false): void {
    const counts: Record<string, number> = {};
    for (const [app, slot] of Object.entries(deps.slots())) counts[app] = counters.get(slot);
    const key = JSON.stringify(counts);
    if (!force && key === sent) return;
    if (cluster.broadcast({ t: 'conns', node: cluster.id, counts, ...(ask ? { ask: true } : {}) })) sent = key;
  }

  cluster.onPeerMsg((msg) => {
    if (msg.t !== 'conns') return;
    byNode.set(msg.node, new Map(Object.entries(msg.counts)));
    sum();
    // a node that dropped another and sees it again asks for the counts (sent on change only)
    if (msg.ask === true) tell(true);
  });
  cluster.onNodeJoined((_node, rejoined) => tell(true, rejoined));
  cluster.onNodeGone((node) => {
    if (byNode.delete(node)) sum();
  });
  const timer = setInterval(() => tell(false), deps.intervalMs ?? CONNECTION_COUNT_INTERVAL_MS);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
