// ClusterTransitions without a backend: several nodes' views fed the same ordered stream
// of node-local transitions (as the backend delivers the control subject to every node),
// each sending only its own cluster-wide transitions. Every transition must be sent by
// exactly one node, whatever the interleaving.

import t from 'tap';
import { ClusterTransitions } from '../../src/adapter/transitions';
import type { WebhookEvent } from '../../src/bus/messages';

type Op = ['member', string, 'added' | 'removed', string] | ['occ', string, 'occupied' | 'vacated', string];

function cluster(ids: string[]) {
  const sent: string[] = [];
  const views = ids.map((id) => new ClusterTransitions(id, (app: string, e: WebhookEvent) => {
    sent.push(`${id} ${e.name} ${e.channel}${'user_id' in e ? ' ' + String(e.user_id) : ''}`);
  }));
  /** One message of the ordered stream, applied by every node (the sender's own echo included). */
  const deliver = (op: Op) => {
    for (const v of views) {
      if (op[0] === 'member') v.member(op[1], op[2], 'app', 'presence-c', op[3]);
      else v.occupancy(op[1], op[2], 'app', op[3]);
    }
  };
  return { sent, views, deliver };
}

t.test('two nodes adding the same user at once: only the first in order sends member_added', (t) => {
  const { sent, deliver } = cluster(['n1', 'n2']);
  deliver(['member', 'n2', 'added', 'u']);
  deliver(['member', 'n1', 'added', 'u']);
  t.same(sent, ['n2 member_added presence-c u']);
  deliver(['member', 'n2', 'removed', 'u']);
  t.same(sent.length, 1, 'n1 still has the user: nothing');
  deliver(['member', 'n1', 'removed', 'u']);
  t.same(sent, ['n2 member_added presence-c u', 'n1 member_removed presence-c u'], 'the last node sends member_removed');
  t.end();
});

t.test('occupancy hands over between nodes: occupied by one, vacated by the other', (t) => {
  const { sent, deliver } = cluster(['n1', 'n2', 'n3']);
  deliver(['occ', 'n1', 'occupied', 'ch']);
  deliver(['occ', 'n3', 'occupied', 'ch']);
  deliver(['occ', 'n1', 'vacated', 'ch']);
  deliver(['occ', 'n3', 'vacated', 'ch']);
  deliver(['occ', 'n3', 'occupied', 'ch']);
  t.same(sent, ['n1 channel_occupied ch', 'n3 channel_vacated ch', 'n3 channel_occupied ch']);
  t.end();
});

t.test('random interleavings: every cluster-wide transition sent exactly once, alternating', (t) => {
  let seed = 7;
  const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) % n);
  const ids = ['n1', 'n2', 'n3'];
  for (let round = 0; round < 50; round++) {
    const { sent, deliver } = cluster(ids);
    // each node's own transitions of one user alternate added / removed (node-local)
    const has = new Map<string, boolean>();
    for (let i = 0; i < 200; i++) {
      const node = ids[rnd(3)];
      const user = `u${rnd(3)}`;
      const k = node + user;
      deliver(['member', node, has.get(k) ? 'removed' : 'added', user]);
      has.set(k, !has.get(k));
    }
    for (const u of ['u0', 'u1', 'u2']) {
      const mine = sent.filter((s) => s.endsWith(` ${u}`)).map((s) => s.split(' ')[1]);
      const alternates = mine.every((name, i) => name === (i % 2 === 0 ? 'member_added' : 'member_removed'));
      if (!alternates) t.fail(`round ${round} ${u}: ${mine.join(', ')}`);
      const present = ids.some((n) => has.get(n + u));
      if (mine.length % 2 !== (present ? 1 : 0)) t.fail(`round ${round} ${u}: ${mine.length} events, present ${present}`);
    }
  }
  t.pass('50 rounds of 200 transitions');
  t.end();
});

t.test('a failed node: one survivor sends what it empties; a sync is state, not transitions', (t) => {
  const sent: string[] = [];
  const v = new ClusterTransitions('n1', (app, e) => sent.push(`${e.name} ${e.channel}${'user_id' in e ? ' ' + String(e.user_id) : ''}`));
  v.member('n2', 'added', 'app', 'presence-c', 'a', true); // from n2's sync
  v.occupancy('n2', 'occupied', 'app', 'presence-c', true);
  v.member('n2', 'added', 'app', 'presence-c', 'b');
  v.member('n1', 'added', 'app', 'presence-c', 'b');
  v.occupancy('n1', 'occupied', 'app', 'other');
  t.same(sent, ['channel_occupied other'], 'synced state and n2\'s own transitions send nothing here');
  v.nodeGone('n2', true);
  t.same(sent, ['channel_occupied other', 'member_removed presence-c a', 'channel_vacated presence-c'],
    'a (only on n2) removed, b stays (on n1), presence-c vacated');
  t.same(v.nodesOf('app', 'presence-c', 'b'), ['n1']);
  const quiet = new ClusterTransitions('n3', () => t.fail('not the sender'));
  quiet.member('n2', 'added', 'app', 'presence-c', 'a');
  quiet.nodeGone('n2', false);
  t.same(quiet.nodesOf('app', 'presence-c', 'a'), [], 'removed without a webhook');
  t.end();
});

// An unordered backend (NATS): each node gets the others' messages in its own order. With
// the self rule, two nodes removing the same user at once, each seeing the other's
// removal last, would send nothing; the decider (the oldest node) sends every transition.
t.test('an unordered backend: opposite orders on two nodes, the decider sends each transition once', (t) => {
  const sent: string[] = [];
  const emitter = (id: string) => (_app: string, e: WebhookEvent) => sent.push(`${id} ${e.name} ${e.channel}${'user_id' in e ? ' ' + String(e.user_id) : ''}`);
  const ids = ['n1', 'n2'];
  // the self rule first: the failure this mode exists for
  const selfRule = ids.map((id) => new ClusterTransitions(id, emitter(id)));
  const decided = ids.map((id) => new ClusterTransitions(id, emitter(id), () => id === 'n1'));
  const feed = (views: ClusterTransitions[]) => {
    for (const v of views) {
      v.occupancy('n1', 'occupied', 'app', 'presence-c');
      v.member('n1', 'added', 'app', 'presence-c', 'u');
      v.occupancy('n2', 'occupied', 'app', 'presence-c');
      v.member('n2', 'added', 'app', 'presence-c', 'u');
    }
    // both leave at once: n1 sees its own removal first, n2 its own
    const [v1, v2] = views;
    v1.member('n1', 'removed', 'app', 'presence-c', 'u');
    v1.member('n2', 'removed', 'app', 'presence-c', 'u');
    v2.member('n2', 'removed', 'app', 'presence-c', 'u');
    v2.member('n1', 'removed', 'app', 'presence-c', 'u');
    v1.occupancy('n1', 'vacated', 'app', 'presence-c');
    v1.occupancy('n2', 'vacated', 'app', 'presence-c');
    v2.occupancy('n2', 'vacated', 'app', 'presence-c');
    v2.occupancy('n1', 'vacated', 'app', 'presence-c');
  };
  feed(selfRule);
  t.notOk(sent.some((s) => s.includes('member_removed') || s.includes('channel_vacated')), 'the self rule sends neither member_removed nor channel_vacated');
  sent.length = 0;
  feed(decided);
  t.same(sent, ['n1 channel_occupied presence-c', 'n1 member_added presence-c u', 'n1 member_removed presence-c u', 'n1 channel_vacated presence-c'], 'the decider sends each once');
  sent.length = 0;
  // alone (the backend down): a node sends its own transitions whatever the rule
  decided[1].member('n2', 'added', 'app', 'presence-d', 'w', false, true);
  t.same(sent, ['n2 member_added presence-d w'], 'alone, the non-decider sends its own');
  t.end();
});
