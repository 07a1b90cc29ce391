// The whole-state messages of watchlists across nodes (adapter/watchlist.ts), without a
// backend: two nodes' watchlist layers on stand-in cluster nodes (stand-in-cluster.ts),
// their shards' control messages recorded. A node's state goes in parts; the last part
// takes offline what the sender no longer has; a node whose backend comes back sends
// its state to all and each answers with its own.
// The real paths (two processes, real backends) are in watchlist.test.ts.

import pino from 'pino';
import t from 'tap';
import type { ControlMsg } from '../../src/bus/messages';
import type { PeerMsg } from '../../src/adapter/cluster';
import { startClusterWatchlists, type ClusterWatchlists } from '../../src/adapter/watchlist';
import { standInPair } from './stand-in-cluster';

interface Node {
  w: ClusterWatchlists;
  /** remote_user messages to this node's shards, as "node op user". */
  told: string[];
  joined(node: string): void;
  backendUp(): void;
  sent: PeerMsg[];
}

/** The stand-in backend: while down, broadcasts fail (lost), as Transport.publish does. */
const link = { down: false };

function pair(perMessage: number): [Node, Node] {
  const nodes = standInPair(link).map((n) => {
    let backend: (up: boolean) => void = () => undefined;
    const told: string[] = [];
    const bus = {
      control: (_to: number, msg: ControlMsg) => {
        if (msg.type === 'remote_user') told.push(`${msg.node} ${msg.op} ${msg.userId}`);
      },
    };
    const w = startClusterWatchlists({ cluster: n.cluster, bus, shards: 2, log: pino({ level: 'silent' }), onBackendState: (fn) => { backend = fn; }, usersPerMessage: perMessage });
    return { w, told, sent: n.sent, joined: n.joined, backendUp: () => backend(true) };
  });
  return [nodes[0], nodes[1]];
}

const online = (w: ClusterWatchlists, userId: string) => w.fromShard({ type: 'cluster_user', op: 'online', app: 'app', userId });

t.test('a joining node gets the state in parts', async (t) => {
  const [a, b] = pair(3);
  for (let i = 0; i < 7; i++) online(a.w, `u${i}`);
  b.told.length = 0;
  a.sent.length = 0;
  a.joined('node-b');
  t.same(a.sent.map((m) => m.t === 'users' && [m.users.length, m.first, m.last]), [[3, true, false], [3, false, false], [1, false, true]], 'three parts');
  t.same(b.told.sort(), Array.from({ length: 7 }, (_, i) => `node-a online u${i}`).sort(), 'every user online at node B');
});

t.test('a whole state takes offline what its sender no longer has; a \'*\' is answered', async (t) => {
  const [a, b] = pair(2);
  for (let i = 0; i < 5; i++) online(a.w, `u${i}`);
  link.down = true; // the backend is down: these are lost
  for (const id of ['u1', 'u3']) a.w.fromShard({ type: 'cluster_user', op: 'offline', app: 'app', userId: id });
  online(b.w, 'b0');
  link.down = false;
  a.told.length = 0;
  b.told.length = 0;
  a.backendUp();
  t.same(a.sent.filter((m) => m.t === 'users').map((m) => m.t === 'users' && [m.to, m.users.length, m.first, m.last]),
    [['*', 2, true, false], ['*', 1, false, true]], 'node A sends its state to every node, in parts');
  t.same(b.told.filter((x) => x.includes('offline')).sort(), ['node-a offline u1', 'node-a offline u3'], 'node B takes offline what node A no longer has');
  t.notOk(b.told.some((x) => /offline u[024]/.test(x)), 'and nothing else');
  t.same(a.told, ['node-b online b0'], 'node B answers with its own state');
});
