// test-modes: once (its nodes have fixed shard counts)
// test-split: LOGIC_BACKENDS (every test is inside the loop over the backends: one process per backend)
// delta_compression.cluster_coordination on real backends (redis, nats): two nodes with
// delta and plain clients on both, events published on both nodes. The delta clients of
// every node get their full messages at the same seq positions (every interval + 1-th
// position of the cluster's numbering), a node started late aligns after its first
// message, and every delta client reconstructs byte for byte what a plain client of its
// node receives.

import t from 'tap';
import { APP, eventually, startServer, type TestServer } from '../helpers/server';
import { rawRequest, signedPost } from '../helpers/http';
import { Books, core, DeltaClient, positions, rng } from '../delta/clients';
import { metric } from '../faults/api';
import { LOGIC_BACKENDS as BACKENDS, startBackend } from './backends';

const NODE_WORKERS = 2;
const INTERVAL = 4;
const CONSOLE_TOKEN = 'coordination-console-token';

const fulls = (p: { seq: number; full: boolean }[]) => p.filter((x) => x.full).map((x) => x.seq);

for (const name of BACKENDS) {
  t.test(`${name}: full messages at the same positions on every node`, async (t) => {
    const backend = await startBackend(name);
    t.teardown(() => backend.stop());
    const cfg = {
      ...backend.config(), workers: NODE_WORKERS, metrics: { enabled: true, port: 0, host: '127.0.0.1' },
      // local: publishes go on while the backend is down (decided locally, below)
      adapter: { ...backend.config().adapter, when_down: 'local' as const },
      console: { enabled: true, host: '127.0.0.1', port: 0, token: CONSOLE_TOKEN },
      delta_compression: { cluster_coordination: true, full_message_interval: INTERVAL },
    };
    const nodes: TestServer[] = [];
    const start = async () => {
      const s = await startServer(cfg);
      t.teardown(() => s.stop());
      nodes.push(s);
      await eventually(() => nodes.every((n) => n.server.cluster!.nodes().length === nodes.length), 10_000, `${nodes.length} nodes to see each other`);
      return s;
    };
    const a = await start();
    const b = await start();
    const channel = 'book';
    const clients = async (srv: TestServer) => {
      const plain = await DeltaClient.open(srv, null);
      const delta = await DeltaClient.open(srv, new core.DeltaDecoder());
      await plain.subscribe(channel);
      await delta.enable();
      await delta.subscribe(channel);
      return { plain, delta };
    };
    const onNode = [{ ...(await clients(a)), skip: 0 }, { ...(await clients(b)), skip: 0 }];

    const rand = rng(7);
    const books = new Books(rand);
    let sent = 0;
    /** Publishes on the nodes in turn; each event reaches every client before the next goes. */
    const publish = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const srv = nodes[sent % nodes.length];
        await srv.sdk().trigger(channel, 'update', books.update('X'));
        sent++;
        const want = sent;
        for (const c of onNode) {
          for (const cl of [c.plain, c.delta]) await cl.until(() => cl.events(channel).length >= want - c.skip, `event ${want} on every client`);
        }
      }
    };

    await publish(22);
    // a third node starts late, with its clients
    const late = await start();
    const lateClients = { ...(await clients(late)), skip: sent };
    onNode.push(lateClients);
    await publish(23);
    // "delta": false on a publish to node B: every node sends that message in full (at a
    // position that would have been a delta's)
    if ((positions(onNode[0].delta, channel).at(-1)!.seq + 1) % (INTERVAL + 1) === 0) await publish(1);
    const forced = await signedPost(b.port, APP, 'events', { name: 'update', channel, data: books.update('X'), delta: false });
    t.equal(forced.status, 200, 'a publish with "delta": false');
    sent++;
    for (const c of onNode) for (const cl of [c.plain, c.delta]) await cl.until(() => cl.events(channel).length >= sent - c.skip, 'the forced event');
    const lasts = onNode.map((c) => positions(c.delta, channel).at(-1)!);
    t.ok(lasts.every((p) => p.full && p.seq === lasts[0].seq), `"delta": false: full on every node, at seq ${lasts[0].seq} everywhere`);
    t.not(lasts[0].seq % (INTERVAL + 1), 0, 'a position that is not an interval\'s');

    const [pa, pb] = [positions(onNode[0].delta, channel), positions(onNode[1].delta, channel)];
    t.equal(pa.length, sent, `node A's delta client got all ${sent} events`);
    t.same(pb, pa, 'node B\'s delta client got the same seq positions, full at the same ones');
    const fullA = fulls(pa.slice(0, -1));
    t.ok(fullA.length >= 45 / (INTERVAL + 1) - 1, `full messages every ${INTERVAL + 1} positions (${fullA.join(',')})`);
    t.ok(pa.filter((p) => !p.full).length >= sent / 2, 'the rest came as deltas');
    for (const p of pa.slice(1, -1)) if (p.full) t.equal(p.seq % (INTERVAL + 1), 0, `full at position ${p.seq}: a multiple of ${INTERVAL + 1}`);

    const pl = positions(lateClients.delta, channel);
    t.equal(pl.length, sent - lateClients.skip, 'the late node\'s delta client got every event since it subscribed');
    t.ok(pl[0].full, 'its first message came full (no base yet)');
    // (when the late node's id is the smallest it numbers from then on: a restart at 0)
    const tail = pa.slice(pa.length - pl.length);
    t.same(pl.slice(1), tail.slice(1), 'then the same seq numbers as the others\', full at the same ones');

    for (const [who, c] of [['A', onNode[0]], ['B', onNode[1]], ['late', lateClients]] as const) {
      t.same(c.delta.events(channel), c.plain.events(channel), `node ${who}: the delta client reconstructs the plain client's envelopes byte for byte`);
      t.equal(c.delta.decoder!.stats.syncErrors, 0, `node ${who}: no sync error`);
    }
    // the live console publishes on node A only: its delta client gets that event too
    const published = await rawRequest(a.server.consolePort!, 'POST', `/api/apps/${APP.id}/publish`,
      JSON.stringify({ channel, event: 'update', data: books.update('X') }), { authorization: `Bearer ${CONSOLE_TOKEN}`, 'content-type': 'application/json' });
    t.equal(published.status, 200, 'a console publish on node A');
    for (const cl of [onNode[0].plain, onNode[0].delta]) await cl.until(() => cl.events(channel).length >= sent - onNode[0].skip + 1, 'the console event on node A');
    t.same(onNode[0].delta.events(channel), onNode[0].plain.events(channel), 'node A\'s delta client got the console\'s event, byte for byte');

    for (const n of nodes) t.equal(await metric(n.server.metricsPort!, 'delta_coordination_fallbacks_total'), 0, 'no message was decided locally');

    // the backend goes down: node A decides locally (counted) and its clients still decode
    await backend.kill();
    await eventually(() => !a.server.cluster!.isUp(), 10_000, 'node A to see the backend down');
    const before = onNode[0].plain.events(channel).length; // (the console event included)
    for (let i = 0; i < 3; i++) await a.sdk().trigger(channel, 'update', books.update('X'));
    for (const cl of [onNode[0].plain, onNode[0].delta]) await cl.until(() => cl.events(channel).length >= before + 3, 'the local events');
    t.same(onNode[0].delta.events(channel), onNode[0].plain.events(channel), 'backend down: node A\'s delta client still reconstructs byte for byte');
    t.equal(await metric(a.server.metricsPort!, 'delta_coordination_fallbacks_total'), 3, 'three local decisions, counted');
  });
}
