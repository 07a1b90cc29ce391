// test-modes: once (its nodes have fixed shard counts)
// test-split: LOGIC_BACKENDS (every test is inside the loop over the backends: one process per backend)
// A publish's `"delta": true|false` crosses nodes (channels/bridge.ts, adapter/wire.ts):
// published on node A, it reaches a delta subscriber on node B as the publisher asked — a
// full message for `"delta": false` where the configuration would send a delta, a delta
// for `"delta": true` below min_message_size — and what the delta client rebuilds is what
// a plain client on node B gets, byte for byte. For every backend.

import t from 'tap';
import { signedPost } from '../helpers/http';
import { APP, type TestServer } from '../helpers/server';
import { startNodePair } from '../helpers/cluster';
import { Books, core, DeltaClient, rng } from '../delta/clients';
import { LOGIC_BACKENDS as BACKENDS, startBackend } from './backends';

async function publish(srv: TestServer, channel: string, data: string, extra: Record<string, unknown> = {}): Promise<void> {
  const r = await signedPost(srv.port, APP, 'events', { name: 'price', channel, data, ...extra });
  if (r.status !== 200) throw new Error(`publish answered ${r.status}: ${r.text}`);
}

const deltas = (c: DeltaClient, channel: string) => c.texts.filter((x) => x.startsWith('{"event":"pusher:delta"') && x.includes(`"channel":${JSON.stringify(channel)}`));

for (const name of BACKENDS) {
  t.test(`${name}: "delta" of a publish on node A holds at node B`, async (t) => {
    const backend = await startBackend(name);
    t.teardown(() => backend.stop());
    const cfg = { ...backend.config(), workers: 2, apps: [{ ...APP }], delta_compression: { full_message_interval: 10, min_message_size: 300 } };
    const [a, b] = await startNodePair(t, cfg);

    const plain = await DeltaClient.open(b, null);
    const c = await DeltaClient.open(b, new core.DeltaDecoder());
    await c.enable();
    const channel = `ticker-${name}`;
    await c.subscribe(channel);
    await plain.subscribe(channel);

    const books = new Books(rng(11), 1000);
    // 0 full (the first), 1 delta, 2 full (asked), 3 delta
    for (let i = 0; i < 4; i++) await publish(a, channel, books.update('A'), i === 2 ? { delta: false } : {});
    // 4 and 5: small messages (below min_message_size, full by the configuration) asked as deltas
    const small = new Books(rng(12), 150);
    for (let i = 0; i < 2; i++) await publish(a, channel, small.update('A'), { delta: true });
    await c.until(() => c.events(channel).length === 6, 'six events at the delta client');
    await plain.until(() => plain.events(channel).length === 6, 'six events at the plain client');

    const seqOf = (x: string) => Number(/"seq":(\d+)/.exec(x)?.[1] ?? /"__delta_seq":(\d+)/.exec(x)?.[1]);
    t.same(deltas(c, channel).map(seqOf), [1, 3, 4, 5], 'deltas for 1 and 3 (configuration) and 4, 5 ("delta": true); 2 went full ("delta": false)');
    t.ok(c.texts.some((x) => x.includes('"__delta_seq":2')), 'message 2 arrived as a full message');
    t.same(c.events(channel), plain.events(channel), 'reconstructed byte for byte');
  });
}
