// test-modes: once (its nodes have fixed shard counts)
// Nodes of different cluster wire versions do not mix (adapter/wire.ts WIRE_VERSION): a
// ringcast node on a real redis-server, and two stand-in nodes that speak on the same
// subjects through their own ioredis client. The one whose heartbeat names our version
// joins; the one whose heartbeat names none (a build before it) is not a member, its
// publishes are dropped and counted; once it sends our version it joins. "Dropped" is
// checked with a positive marker: a publish of the joined stand-in after it on the same
// subject, which the client must get alone. The second test does the same on delta
// coordination's subjects (records and numbering requests).

import { Redis } from 'ioredis';
import t from 'tap';
import { subjectPrefix } from '../../src/adapter';
import { encodeNodeMsg, encodeNodePublish, WIRE_VERSION, type NodeMsg } from '../../src/adapter/wire';
import { metric } from '../faults/api';
import { APP, eventually, RawClient, startServer } from '../helpers/server';
import { startBackend } from './backends';
import { core, DeltaClient } from '../delta/clients';

t.test('a node of another wire version is not a member; its messages are dropped', async (t) => {
  const backend = await startBackend('redis');
  t.teardown(() => backend.stop());
  const srv = await startServer({ ...backend.config(), workers: 2, metrics: { enabled: true, port: 0, host: '127.0.0.1' } });
  t.teardown(() => srv.stop());
  const prefix = subjectPrefix(srv.server.config);
  const port = (srv.server.config.database.redis as { port: number }).port;
  const pub = new Redis({ host: '127.0.0.1', port });
  t.teardown(() => pub.disconnect());
  const ctl = (msg: NodeMsg) => pub.publish(`${prefix}.ctl`, Buffer.from(encodeNodeMsg(msg)));
  const publish = (node: string, event: string) => pub.publish(`${prefix}.pub`, Buffer.from(encodeNodePublish(node, {
    app: APP.id, channel: 'wire-v', except: '', message: Buffer.from(JSON.stringify({ event, channel: 'wire-v', data: '{}' })),
  })));
  const nodes = () => srv.server.cluster!.nodes();

  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  await c.subscribe('wire-v');
  await ctl({ t: 'hb', node: 'stand-in-new', v: WIRE_VERSION });
  await eventually(() => nodes().includes('stand-in-new'), 5000, 'the stand-in of this version to join');
  await ctl({ t: 'hb', node: 'stand-in-old' }); // no version: a build before WIRE_VERSION
  await publish('stand-in-old', 'from-old');
  await publish('stand-in-new', 'marker');
  await c.event('marker', 'wire-v', 5000);
  t.notOk(c.frames.some((f) => f.event === 'from-old'), 'the other version\'s publish was dropped');
  t.notOk(nodes().includes('stand-in-old'), 'the other version is not a member');
  t.ok((await metric(srv.server.metricsPort!, 'adapter_errors_total')) >= 1, 'counted in adapter_errors_total');

  // the same node speaking this version: it joins and its publishes go through
  await ctl({ t: 'hb', node: 'stand-in-old', v: WIRE_VERSION });
  await eventually(() => nodes().includes('stand-in-old'), 5000, 'the node to join once it speaks this version');
  await publish('stand-in-old', 'now-ok');
  await c.event('now-ok', 'wire-v', 5000);
  t.pass('its publishes are delivered');
});

// delta_compression.cluster_coordination has subjects of its own (delta/coord.ts rule 5):
// a record or a numbering request of a node of another version is dropped there too.
t.test('delta coordination drops the records and requests of another wire version', async (t) => {
  const backend = await startBackend('redis');
  t.teardown(() => backend.stop());
  const srv = await startServer({
    ...backend.config(), workers: 2, metrics: { enabled: true, port: 0, host: '127.0.0.1' },
    delta_compression: { cluster_coordination: true },
  });
  t.teardown(() => srv.stop());
  const prefix = subjectPrefix(srv.server.config);
  const port = (srv.server.config.database.redis as { port: number }).port;
  const pub = new Redis({ host: '127.0.0.1', port });
  const sub = new Redis({ host: '127.0.0.1', port });
  t.teardown(() => { pub.disconnect(); sub.disconnect(); });
  const records: { o: string; m: string }[] = [];
  sub.on('message', (_ch: string, text: string) => records.push(JSON.parse(text) as { o: string; m: string }));
  await sub.subscribe(`${prefix}.dseq`);
  const ctl = (msg: NodeMsg) => pub.publish(`${prefix}.ctl`, Buffer.from(encodeNodeMsg(msg)));
  const me = srv.server.cluster!.nodes()[0];
  const channel = 'wire-delta';
  let i = 0;
  const wire = (node: string, event: string, extra: Record<string, unknown>) => JSON.stringify({
    o: node, i: ++i, a: APP.id, c: channel, x: '', f: 0, m: JSON.stringify({ event, channel, data: '{"n":1}' }), ...extra,
  });
  const record = (node: string, event: string) => pub.publish(`${prefix}.dseq`, wire(node, event, { p: -1 }));
  const request = (node: string, event: string) => pub.publish(`${prefix}.dseq.req.${me}`, wire(node, event, { k: `${event}\0`, to: me }));

  const c = await DeltaClient.open(srv, new core.DeltaDecoder());
  await c.enable();
  await c.subscribe(channel);
  await ctl({ t: 'hb', node: 'stand-in-new', v: WIRE_VERSION });
  await ctl({ t: 'hb', node: 'stand-in-old' }); // no version: a build before WIRE_VERSION
  await eventually(() => srv.server.cluster!.nodes().includes('stand-in-new'), 5000, 'the stand-in of this version to join');
  const errors0 = await metric(srv.server.metricsPort!, 'adapter_errors_total');

  // records: the other version's is not delivered, this version's after it is
  await record('stand-in-old', 'rec-old');
  await record('stand-in-new', 'rec-marker');
  await c.until(() => c.events(channel).some((e) => e.includes('rec-marker')), 'the marker record');
  t.notOk(c.events(channel).some((e) => e.includes('rec-old')), 'the other version\'s record was dropped');

  // requests: this node numbers this version's, not the other's
  await request('stand-in-old', 'req-old');
  await request('stand-in-new', 'req-marker');
  await eventually(() => records.some((r) => r.o === 'stand-in-new' && r.m.includes('req-marker')), 5000, 'the marker request numbered');
  t.notOk(records.some((r) => r.o === 'stand-in-old' && r.m.includes('req-old')), 'the other version\'s request was not numbered');
  await c.until(() => c.events(channel).some((e) => e.includes('req-marker')), 'the numbered marker delivered');
  t.ok((await metric(srv.server.metricsPort!, 'adapter_errors_total')) >= errors0 + 2, 'both counted in adapter_errors_total');
});
