// Two stand-in cluster nodes joined by a function call in place of the ctl subject (in
// order, like a backend), for unit tests of the layers above the cluster (presence,
// watchlists) without a backend. While `link.down`, broadcasts fail (lost), as
// Transport.publish does.

import type { ClusterNode, PeerMsg } from '../../src/adapter/cluster';

export interface StandIn {
  cluster: ClusterNode;
  /** What this node broadcast (while the link was up). */
  sent: PeerMsg[];
  /** Tells this node's layers that `node` joined. */
  joined(node: string): void;
  /** Hands this node a message as if the backend delivered it. */
  inject(msg: PeerMsg): void;
}

export function standInPair(link: { down: boolean }): [StandIn, StandIn] {
  const ids = ['node-a', 'node-b'];
  const peers: ((msg: PeerMsg) => void)[][] = [[], []];
  const out: StandIn[] = ids.map((id, i) => {
    const joinedFns: ((node: string) => void)[] = [];
    const sent: PeerMsg[] = [];
    const cluster = {
      id,
      broadcast: (msg: PeerMsg) => {
        if (link.down) return false;
        sent.push(msg);
        for (const fn of peers[1 - i]) fn(msg);
        return true;
      },
      onPeerMsg: (fn: (msg: PeerMsg) => void) => peers[i].push(fn),
      onEcho: () => undefined,
      onNodeJoined: (fn: (node: string) => void) => joinedFns.push(fn),
      onNodeGone: () => undefined,
      nodes: () => [...ids],
      oldest: () => ids[0],
    } as unknown as ClusterNode;
    return {
      cluster,
      sent,
      joined: (n: string) => { for (const fn of joinedFns) fn(n); },
      inject: (msg: PeerMsg) => { for (const fn of peers[i]) fn(msg); },
    };
  });
  return [out[0], out[1]];
}
