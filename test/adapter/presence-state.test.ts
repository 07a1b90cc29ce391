// The whole-state `sync` messages of presence across nodes (adapter/presence.ts), without
// a backend: two nodes' presence layers on stand-in cluster nodes (stand-in-cluster.ts),
// their shards' control messages recorded and their `local_presence` answered from a
// table. A shard's state goes in parts; the last part
// removes what the sender no longer has in that shard's channels (and only there); a node
// whose backend comes back sends its state to all and each answers with its own.
// The real paths (two processes, real backends) are in presence-outage.test.ts.

import pino from 'pino';
import t from 'tap';
import type { ControlMsg } from '../../src/bus/messages';
import { ownerOf } from '../../src/channels/owner';
import type { PeerMsg } from '../../src/adapter/cluster';
import { COUNTS_PER_SYNC, MEMBERS_PER_SYNC, startClusterPresence, syncParts, type ClusterPresence } from '../../src/adapter/presence';
import type { ChannelCount } from '../../src/adapter/wire';
import { standInPair } from './stand-in-cluster';

const SHARDS = 2;
type Member = [app: string, channel: string, userId: unknown, userInfo: unknown];

interface Node {
  p: ClusterPresence;
  /** remote_member / remote_count messages to this node's shards, as "node op channel user" / "node count channel n". */
  told: string[];
  /** What this node's shards hold: the answer to `local_presence`. */
  members: Member[];
  counts: ChannelCount[];
  sent: PeerMsg[];
  joined(node: string): void;
  backendUp(): void;
  /** Hands this node a message as if the backend delivered it. */
  inject(msg: PeerMsg): void;
}

/** The stand-in backend: while down, broadcasts fail (lost), as Transport.publish does. */
const link = { down: false };

function pair(perMessage: number): [Node, Node] {
  const nodes = standInPair(link).map((n) => {
    let backend: (up: boolean) => void = () => undefined;
    const node = { told: [] as string[], members: [] as Member[], counts: [] as ChannelCount[], sent: n.sent, joined: n.joined, inject: n.inject } as Node;
    const bus = {
      control: (_to: number, msg: ControlMsg) => {
        if (msg.type === 'remote_member') node.told.push(`${msg.node} ${msg.op} ${msg.channel} ${String(msg.userId)}`);
        if (msg.type === 'remote_count') node.told.push(`${msg.node} count ${msg.channel} ${msg.total}`);
      },
      request: <T>(to: number) => Promise.resolve({
        members: node.members.filter(([app, channel]) => ownerOf(app, channel, SHARDS) === to),
        counts: node.counts.filter(([app, channel]) => ownerOf(app, channel, SHARDS) === to),
      } as T),
    };
    node.p = startClusterPresence({ cluster: n.cluster, bus, shards: SHARDS, log: pino({ level: 'silent' }), webhook: null, ordered: true, onBackendState: (fn) => { backend = fn; }, membersPerSync: perMessage });
    node.backendUp = () => backend(true);
    return node;
  });
  t.teardown(() => { for (const n of nodes) n.p.stop(); });
  return [nodes[0], nodes[1]];
}

/** Lets the `local_presence` answers (promises) and what they send run. */
const settle = () => new Promise((r) => setImmediate(r));

/** Two channels owned by different shards. */
function channels(): [string, string] {
  let a = '';
  let b = '';
  for (let i = 0; !a || !b; i++) {
    const c = `presence-c${i}`;
    if (ownerOf('app', c, SHARDS) === 0 && !a) a = c;
    if (ownerOf('app', c, SHARDS) === 1 && !b) b = c;
  }
  return [a, b];
}

t.test('syncParts: members and counts cut into parts, first and last marked; an empty state is one part', async (t) => {
  const members: Member[] = Array.from({ length: 5 }, (_, i) => ['app', 'presence-x', `u${i}`, {}]);
  const counts: ChannelCount[] = Array.from({ length: 3 }, (_, i) => ['app', `c${i}`, 1]);
  const parts = syncParts('n', '*', 1, 4, members, counts, 2, 2);
  t.same(parts.map((p) => [p.members.length, p.counts.length, p.first, p.last, p.shard, p.shards]),
    [[2, 0, true, false, 1, 4], [2, 0, false, false, 1, 4], [1, 0, false, false, 1, 4], [0, 2, false, false, 1, 4], [0, 1, false, true, 1, 4]]);
  t.same(syncParts('n', 'm', 0, 2, [], []).map((p) => [p.members.length, p.counts.length, p.first, p.last]), [[0, 0, true, true]]);
  t.ok(MEMBERS_PER_SYNC > 0 && COUNTS_PER_SYNC > 0);
});

t.test('a joining node gets every shard\'s members in parts', async (t) => {
  const [a, b] = pair(2);
  const [c0, c1] = channels();
  a.members.push(...['u0', 'u1', 'u2'].map((u): Member => ['app', c0, u, {}]), ['app', c1, 'v0', {}]);
  a.counts.push(['app', c0, 3], ['app', c1, 1]);
  a.joined('node-b');
  await settle();
  t.same(a.sent.filter((m) => m.t === 'sync').length, 5, 'shard 0: 2 + 1 members, then its count; shard 1: its member, then its count');
  t.same(b.told.filter((x) => x.includes(' added ')).sort(), [`node-a added ${c0} u0`, `node-a added ${c0} u1`, `node-a added ${c0} u2`, `node-a added ${c1} v0`].sort());
  t.same(b.told.filter((x) => x.includes(' count ')).sort(), [`node-a count ${c0} 3`, `node-a count ${c1} 1`].sort());
});

t.test('a whole state removes what its sender no longer has, in that shard\'s channels only; a \'*\' is answered', async (t) => {
  const [a, b] = pair(2);
  const [c0, c1] = channels();
  a.members.push(['app', c0, 'u0', {}], ['app', c0, 'u1', {}], ['app', c0, 'u2', {}], ['app', c1, 'v0', {}]);
  a.counts.push(['app', c0, 3], ['app', c1, 1]);
  a.joined('node-b');
  await settle();
  b.members.push(['app', c1, 'w0', {}]);
  b.counts.push(['app', c1, 1]);

  // the backend goes down: node A's changes meanwhile are lost (its shards have them)
  link.down = true;
  a.members.splice(0, a.members.length, ['app', c0, 'u1', {}], ['app', c0, 'u3', {}], ['app', c1, 'v0', {}]);
  a.counts.splice(0, a.counts.length, ['app', c0, 2], ['app', c1, 1]);
  link.down = false;
  a.told.length = 0;
  b.told.length = 0;
  a.sent.length = 0;
  a.backendUp();
  await settle();
  await settle();
  t.ok(a.sent.every((m) => m.t === 'sync' && m.to === '*'), 'node A sends its state to every node');
  t.same(b.told.filter((x) => !x.includes(' count ')).sort(), [`node-a added ${c0} u3`, `node-a removed ${c0} u0`, `node-a removed ${c0} u2`].sort(),
    'node B adds and removes what changed on node A, nothing else (v0 of the other shard stays)');
  t.ok(b.told.includes(`node-a count ${c0} 2`), 'and takes its count');
  t.same(a.told.sort(), [`node-b added ${c1} w0`, `node-b count ${c1} 1`].sort(), 'node B answers with its own state');

  // a channel node A no longer has at all: its count goes to 0 at node B
  a.members.splice(0, a.members.length, ['app', c1, 'v0', {}]);
  a.counts.splice(0, a.counts.length, ['app', c1, 1]);
  b.told.length = 0;
  a.backendUp();
  await settle();
  await settle();
  t.same(b.told.sort(), [`node-a count ${c0} 0`, `node-a count ${c1} 1`, `node-a removed ${c0} u1`, `node-a removed ${c0} u3`].sort(), 'emptied channel: members removed, count 0');
});

t.test('a part whose first part was lost changes nothing', async (t) => {
  const [a, b] = pair(1);
  const [c0] = channels();
  a.members.push(['app', c0, 'u0', {}]);
  a.joined('node-b');
  await settle();
  b.told.length = 0;
  // the middle and last parts only (as if the first was lost while the backend was down)
  const parts = syncParts('node-a', '*', ownerOf('app', c0, SHARDS), SHARDS, [['app', c0, 'x', {}], ['app', c0, 'y', {}], ['app', c0, 'z', {}]], [], 1);
  b.inject(parts[1]);
  b.inject(parts[2]);
  t.same(b.told, [], 'nothing applied: u0 stays, x, y, z are not added');
});
