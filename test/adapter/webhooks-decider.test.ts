// test-modes: once (its nodes have fixed shard counts)
// Over NATS, which orders each publisher only, the oldest node decides every presence
// webhook of the cluster (adapter/transitions.ts). A real ringcast node on a real
// nats-server and a stand-in node that speaks on the same subjects through its own NATS
// connection, with an id that sorts after the real node's (node ids start with the start
// time: the stand-in is "younger"). The orders here are the ones the self rule got wrong:
//  - the stand-in adds a user first: the real node, the decider, sends member_added;
//  - the real node's client leaves first, then the stand-in's: the stand-in's removal
//    empties the user, and the real node sends member_removed (under the self rule nobody
//    would: the stand-in made the last transition).
// "Once" is checked behind a marker user the stand-in adds last.

import { connect, type NatsConnection } from 'nats';
import t from 'tap';
import { subjectPrefix } from '../../src/adapter';
import { decodeNode, encodeNodeMsg, Kind, WIRE_VERSION, type NodeMsg } from '../../src/adapter/wire';
import { APP, eventually, RawClient, startServer } from '../helpers/server';
import { startReceiver } from '../webhooks/receiver';
import { startBackend } from './backends';

const STAND_IN = 'ffffffffffffffffffff';

t.test('nats: the oldest node sends the webhooks of every node\'s transitions', async (t) => {
  const backend = await startBackend('nats');
  t.teardown(() => backend.stop());
  const r = await startReceiver();
  t.teardown(() => r.close());
  const srv = await startServer({
    ...backend.config(), workers: 2, webhooks: { concurrency: 1 },
    apps: [{ ...APP, webhooks: [{ url: r.url, event_types: ['member_added', 'member_removed'] }] }],
  });
  t.teardown(() => srv.stop());
  const me = srv.server.cluster!.id;
  t.ok(me < STAND_IN, 'the real node is the older one');

  const nats: NatsConnection = await connect({ servers: (backend.config().adapter as { nats: { servers: string[] } }).nats.servers });
  t.teardown(() => nats.close());
  const ctlSubject = `${subjectPrefix(srv.server.config)}.ctl`;
  const seen: NodeMsg[] = [];
  nats.subscribe(ctlSubject, {
    callback: (err, m) => {
      if (err) return;
      const d = decodeNode(m.data);
      if (d.kind === Kind.Control) seen.push(d.msg);
    },
  });
  await nats.flush();
  const ctl = async (msg: NodeMsg) => {
    nats.publish(ctlSubject, encodeNodeMsg(msg));
    await nats.flush();
  };
  const member = (op: 'added' | 'removed', userId: string) =>
    ctl({ t: 'member', node: STAND_IN, op, app: APP.id, channel: 'presence-decider', userId, userInfo: op === 'added' ? {} : null });
  const hooks = (name: string, user: string) =>
    r.events().filter((e) => e.name === name && e.channel === 'presence-decider' && e.user_id === user).length;

  await ctl({ t: 'hb', node: STAND_IN, v: WIRE_VERSION });
  await eventually(() => srv.server.cluster!.nodes().includes(STAND_IN), 5000, 'the stand-in to join');

  // the stand-in's user first: its transition, sent by the real node
  await member('added', 'u');
  await r.until(() => hooks('member_added', 'u') > 0, 10_000, 'member_added of u from the decider');

  // the same user through the real node, then the real node's client leaves first
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  await c.subscribeAuthed('presence-decider', { user_id: 'u', user_info: {} });
  await eventually(() => seen.some((m) => m.t === 'member' && m.node === me && m.op === 'added'), 5000, 'the real node\'s member added');
  await c.close();
  await eventually(() => seen.some((m) => m.t === 'member' && m.node === me && m.op === 'removed'), 5000, 'the real node\'s member removed');
  // the stand-in's removal empties the user
  await member('removed', 'u');
  await r.until(() => hooks('member_removed', 'u') > 0, 10_000, 'member_removed of u from the decider');

  // once: a marker the stand-in adds after everything above
  await member('added', 'marker');
  await r.until(() => hooks('member_added', 'marker') > 0, 10_000, 'the marker');
  t.equal(hooks('member_added', 'u'), 1, 'member_added of u once');
  t.equal(hooks('member_removed', 'u'), 1, 'member_removed of u once');
});
