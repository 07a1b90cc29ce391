// test-modes: once (history options act in each store with the same code on every shard)
// The process-wide bounds of history and idempotent publish, shown by what clients get:
// history.memory_budget_mb evicts the least recently written channels' messages first (REST
// history shows them gone, the newest channel keeps its own); idempotency.window_seconds
// ends a key's window (a repeat after it is delivered again); idempotency.max_keys forgets
// the oldest key of its shard first (keys kept by one shard: keyOwner).
// history.driver: memory, set explicitly (the default).
//
// "Not delivered again" is checked with a positive marker: a later publish on the same
// channel, after which the subscriber's count is final.

import t, { type Test } from 'tap';
import { ownerOf } from '../../src/channels/owner';
import { keyOwner } from '../../src/history/idempotency';
import { signedGet, signedPost } from '../helpers/http';
import { APP, RawClient, startServer, WORKERS, type TestServer } from '../helpers/server';

const KB20 = 'x'.repeat(20 * 1024);

/** Channels named `${prefix}N` owned by the same shard as `${prefix}0`. */
function sameOwner(prefix: string, count: number, shards: number): string[] {
  const owner = ownerOf(APP.id, `${prefix}0`, shards);
  const out: string[] = [];
  for (let i = 0; out.length < count; i++) if (ownerOf(APP.id, `${prefix}${i}`, shards) === owner) out.push(`${prefix}${i}`);
  return out;
}

async function history(srv: TestServer, channel: string): Promise<{ serial: number }[]> {
  const r = await signedGet(srv.port, APP, `channels/${channel}/history`, { limit: '100' });
  if (r.status !== 200) throw new Error(`history of ${channel}: ${r.status} ${r.text}`);
  return (r.json as { items: { serial: number }[] }).items;
}

t.test('history.memory_budget_mb: the least recently written channels lose their messages first', async (t) => {
  const srv = await startServer({
    apps: [{ ...APP, channel_history: { 'h-*': { size: 100, ttl: 600 } } as never }],
    history: { driver: 'memory', memory_budget_mb: 1 },
  });
  t.teardown(() => srv.stop());
  const shards = srv.config.workers;
  // 1 MiB per process, budget / shards per shard: 3 × 20 KiB per channel, all on one shard,
  // until the channels written add up to the shard's budget and two channels more
  const perShard = (1024 * 1024) / shards;
  const channels = sameOwner('h-', Math.ceil(perShard / (60 * 1024)) + 2, shards);
  for (const ch of channels) {
    for (let i = 0; i < 3; i++) t.equal((await signedPost(srv.port, APP, 'events', { name: 'm', channel: ch, data: KB20 })).status, 200);
  }
  t.same(await history(srv, channels[0]), [], `the first channel written (${channels[0]}) lost its messages`);
  t.same((await history(srv, channels.at(-1)!)).map((m) => m.serial).sort(), [1, 2, 3], 'the last channel written keeps its three');
});

async function counter(t: Test, srv: TestServer, channel: string): Promise<{ count: (name: string) => number; marker: (n: number) => Promise<void> }> {
  const c = await RawClient.connect(srv.wsUrl());
  t.teardown(() => c.close().catch(() => undefined));
  await c.subscribe(channel);
  return {
    count: (name) => c.frames.filter((f) => f.channel === channel && f.event === name).length,
    marker: async (n) => {
      t.equal((await signedPost(srv.port, APP, 'events', { name: `marker-${n}`, channel, data: 'm' })).status, 200);
      await c.event(`marker-${n}`, channel, 5000);
    },
  };
}

const publish = (srv: TestServer, channel: string, key: string) =>
  signedPost(srv.port, APP, 'events', { name: 'e', channel, data: key, idempotency_key: key });

t.test('idempotency.window_seconds: a repeat inside the window is answered, after it delivered again', async (t) => {
  const srv = await startServer({ idempotency: { window_seconds: 1 } });
  t.teardown(() => srv.stop());
  const sub = await counter(t, srv, 'idem-window');
  t.equal((await publish(srv, 'idem-window', 'w-1')).status, 200);
  const sentAt = Date.now();
  t.equal((await publish(srv, 'idem-window', 'w-1')).status, 200, 'the repeat is answered');
  await sub.marker(1);
  t.equal(sub.count('e'), 1, 'inside the window: delivered once');
  await new Promise((r) => setTimeout(r, Math.max(0, 1300 - (Date.now() - sentAt))));
  t.equal((await publish(srv, 'idem-window', 'w-1')).status, 200);
  await sub.marker(2);
  t.equal(sub.count('e'), 2, 'after window_seconds (1): the same key is delivered again');
});

t.test('idempotency.max_keys: past it the oldest key of its shard is forgotten first', async (t) => {
  const shards = WORKERS;
  // one key per shard: two keys of one shard push each other out
  const srv2 = await startServer({ idempotency: { max_keys: shards, window_seconds: 600 } });
  t.teardown(() => srv2.stop());
  const owner = keyOwner(APP.id, 'k-0', shards);
  let other = 1;
  while (keyOwner(APP.id, `k-${other}`, shards) !== owner) other++;
  const [first, second] = ['k-0', `k-${other}`];
  const sub = await counter(t, srv2, 'idem-keys');
  t.equal((await publish(srv2, 'idem-keys', first)).status, 200);
  t.equal((await publish(srv2, 'idem-keys', second)).status, 200);
  t.equal((await publish(srv2, 'idem-keys', second)).status, 200, 'the newest key repeated');
  await sub.marker(1);
  t.equal(sub.count('e'), 2, 'the newest key is still remembered: its repeat was not delivered');
  t.equal((await publish(srv2, 'idem-keys', first)).status, 200, 'the oldest key repeated');
  await sub.marker(2);
  t.equal(sub.count('e'), 3, `max_keys ${shards} (${shards === 1 ? 'one key' : 'one key per shard'}): the oldest key was forgotten, its repeat delivered`);
});
