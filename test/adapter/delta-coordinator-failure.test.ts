// test-modes: once (its nodes have fixed shard counts)
// test-split: LOGIC_BACKENDS (every test is inside the loop over the backends: one process per backend)
// delta_compression.cluster_coordination when the coordinator dies (kill -9): node A's
// events wait for a position at most 1 s, then A decides locally (counted) and keeps
// deciding locally without waiting; once cluster health declares the coordinator failed,
// A is the coordinator and numbers from 0 again (full at every interval + 1-th position).
// A's delta client reconstructs every event byte for byte throughout. The coordinator is
// a real `ringcast start` child process (bin/ringcast.js; needs tsc first) started before
// A: the older node has the smaller id (ids start with the start time).

import t from 'tap';
import { APP, eventually, startServer } from '../helpers/server';
import { Books, core, DeltaClient, positions, rng } from '../delta/clients';
import { metric } from '../faults/api';
import { LOGIC_BACKENDS as BACKENDS, startBackend } from './backends';
import { HEALTH, startChild } from './child';

const INTERVAL = 4;

for (const name of BACKENDS) {
  t.test(`${name}: the coordinator is killed`, async (t) => {
    const backend = await startBackend(name);
    t.teardown(() => backend.stop());
    const base = backend.config();
    const cfg = {
      ...base, workers: 2, adapter: { ...base.adapter, cluster_health: HEALTH },
      delta_compression: { cluster_coordination: true, full_message_interval: INTERVAL },
    };
    // the child first: node ids start with the start time (adapter/cluster.ts), so the
    // older node, the child, has the smaller id and is the coordinator
    const { child } = await startChild(t, (port) => ({ ...cfg, host: '127.0.0.1', port, log: { level: 'error' }, apps: [{ ...APP }] }));
    const a = await startServer({ ...cfg, metrics: { enabled: true, port: 0, host: '127.0.0.1' } });
    const nodeA = a;
    t.teardown(() => nodeA.stop());
    const me = a.server.cluster!.id;
    await eventually(() => a.server.cluster!.nodes().length === 2, 10_000, 'node A to see the child node');
    t.ok(a.server.cluster!.nodes().find((n) => n !== me)! < me, 'the child, the older node, has the smaller id: it is the coordinator');

    const channel = 'book';
    const plain = await DeltaClient.open(a, null);
    const delta = await DeltaClient.open(a, new core.DeltaDecoder());
    await plain.subscribe(channel);
    await delta.enable();
    await delta.subscribe(channel);
    const books = new Books(rng(3));
    let sent = 0;
    const publish = async (n: number) => {
      for (let i = 0; i < n; i++) {
        await a.sdk().trigger(channel, 'update', books.update('X'));
        sent++;
        for (const c of [plain, delta]) await c.until(() => c.events(channel).length >= sent, `event ${sent}`);
      }
    };
    await publish(7);
    t.equal(await metric(a.server.metricsPort!, 'delta_coordination_fallbacks_total'), 0, 'numbered by the child coordinator');

    child.kill('SIGKILL');
    const killedAt = Date.now();
    await publish(5);
    const took = Date.now() - killedAt;
    const fallbacks = await metric(a.server.metricsPort!, 'delta_coordination_fallbacks_total');
    t.ok(fallbacks >= 1, `node A decided locally meanwhile (${fallbacks} events)`);
    t.ok(took < 5 * 1000, `five events within ${took} ms: one waited for the timeout, the next ones did not`);

    await eventually(() => a.server.cluster!.nodes().length === 1, 10_000, 'node A to declare the coordinator failed');
    // node A numbers now, but asks again only when its 5 s of local decisions are over:
    // publish until an event is numbered by it (a position from 0 comes full)
    const numbered = async () => {
      const before = await metric(a.server.metricsPort!, 'delta_coordination_fallbacks_total');
      await publish(1);
      return (await metric(a.server.metricsPort!, 'delta_coordination_fallbacks_total')) === before;
    };
    await eventually(numbered, 20_000, 'node A to number its own events');
    await publish(2 * (INTERVAL + 1));
    const tail = positions(delta, channel).slice(-2 * (INTERVAL + 1));
    const seqs = tail.map((p) => p.seq);
    t.ok(seqs.every((s, i) => i === 0 || s === seqs[i - 1] + 1), `consecutive positions from node A (${seqs.join(',')})`);
    t.ok(tail.every((p) => p.full === (p.seq % (INTERVAL + 1) === 0)), 'full exactly at the multiples of interval + 1');
    t.same(delta.events(channel), plain.events(channel), 'the delta client reconstructed every event byte for byte');
    t.equal(delta.decoder!.stats.syncErrors, 0, 'no sync error');
  });
}
