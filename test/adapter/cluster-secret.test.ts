// test-modes: once (frames are signed and checked in the primary thread, the cluster transport's)
// adapter.cluster_secret, through real redis-server and nats-server: two nodes with the
// same secret exchange events and presence; frames published straight on the backend
// under the cluster prefix (an attacker who can reach it: ioredis PUBLISH, a NATS client)
// without a signature or with another key's are not delivered, are counted
// (adapter_frames_rejected_total{reason}) and fake no node; the same crafted frame signed
// with the cluster's secret IS delivered (so the dropped ones were well-formed: only the
// signature kept them out) and serves as the positive marker, coming after them down the
// same connection. A node with another secret, and one with none, exchange nothing with
// the pair. A frame of node A captured on the backend and published again is dropped
// (reason replayed), and one stamped a minute ago (stale). Any shard count (RINGCAST_TEST_WORKERS; the transport lives in the primary).

import { createSecretKey, type KeyObject } from 'node:crypto';
import { Redis } from 'ioredis';
import { connect as natsConnect } from 'nats';
import t from 'tap';
import { bucketOf } from '../../src/channels/interest';
import { encodeNodeMsg, encodeNodePublish, signFrame } from '../../src/adapter/wire';
import { loadConfig, type ConfigInput } from '../../src/config';
import { metric } from '../faults/api';
import { startNode, startNodePair } from '../helpers/cluster';
import { APP, RawClient, eventually, type Frame, type TestServer } from '../helpers/server';
import { startBackend, type Backend } from './backends';

const SECRET = 'same-secret-0123456789';
const OTHER = 'other-secret-0123456789';
const key = (s: string): KeyObject => createSecretKey(Buffer.from(s));
const METRICS = { metrics: { enabled: true, port: 0, host: '127.0.0.1' } };

/**
 * Anyone who can reach the backend: publishes raw bytes (in order, one connection) and
 * sees every frame on `watch` (the backend handed a frame seen here to every subscriber).
 */
interface Injector {
  publish(subject: string, bytes: Uint8Array): Promise<void>;
  seen(text: string): boolean;
  /** The frames seen on `watch` holding `text`. */
  frames(text: string): Buffer[];
  close(): Promise<void>;
}

async function injector(cfg: ConfigInput & { adapter: { driver: string } }, watch: string): Promise<Injector> {
  const got: Buffer[] = [];
  const seen = (text: string) => got.some((b) => b.includes(text));
  const frames = (text: string) => got.filter((b) => b.includes(text));
  if (cfg.adapter.driver === 'redis') {
    const opts = { host: '127.0.0.1', port: (cfg as { database: { redis: { port: number } } }).database.redis.port, lazyConnect: true };
    const r = new Redis(opts);
    const sub = new Redis(opts);
    await Promise.all([r.connect(), sub.connect()]);
    sub.on('messageBuffer', (_ch: Buffer, m: Buffer) => got.push(m));
    await sub.subscribe(watch);
    return { publish: async (s, b) => { await r.publish(s, Buffer.from(b)); }, seen, frames, close: async () => { r.disconnect(); sub.disconnect(); } };
  }
  const nc = await natsConnect({ servers: (cfg as { adapter: { nats: { servers: string[] } } }).adapter.nats.servers });
  nc.subscribe(watch, { callback: (err, m) => { if (!err) got.push(Buffer.from(m.data)); } });
  await nc.flush();
  return { publish: async (s, b) => { nc.publish(s, b); await nc.flush(); }, seen, frames, close: () => nc.close() };
}

/** The sender id of the crafted publishes (a node that signs right is a member: it is left out below). */
const ATTACKER = '0000000000ffattacker';
const members = (s: TestServer) => s.server.cluster!.nodes().filter((n) => n !== ATTACKER);

/** The client frame bytes a publish carries (what the shards hand to the sockets). */
function eventFrame(channel: string, event: string, data: string): Uint8Array {
  return encodeNodePublish(ATTACKER, { app: APP.id, channel, except: '', message: Buffer.from(JSON.stringify({ event, channel, data })) });
}

const rejected = (s: TestServer, reason: string) => metric(s.server.metricsPort!, 'adapter_frames_rejected_total', { reason });
const named = (c: RawClient, event: string) => c.frames.filter((f: Frame) => f.event === event);

t.test('config: a cluster_secret shorter than 16 characters is refused, naming the key', async (t) => {
  const load = (v: unknown, env: Record<string, string> = {}) => loadConfig({ env, overrides: { apps: [{ ...APP }], adapter: { cluster_secret: v as string } } });
  t.throws(() => load('short'), /adapter\.cluster_secret must be a string of at least 16 characters, or null, got a string/);
  t.throws(() => load(42), /adapter\.cluster_secret must be a string of at least 16 characters, or null, got a number/);
  t.throws(() => loadConfig({ env: { ADAPTER_CLUSTER_SECRET: 'abc' }, overrides: { apps: [{ ...APP }] } }), /from env ADAPTER_CLUSTER_SECRET/);
  t.equal(loadConfig({ env: { ADAPTER_CLUSTER_SECRET: SECRET }, overrides: { apps: [{ ...APP }] } }).adapter.cluster_secret, SECRET, 'read from the environment');
  t.equal(load('').adapter.cluster_secret, null, 'empty: not set');
  t.equal(load(null).adapter.cluster_secret, null);
});

for (const name of ['redis', 'nats'] as const) {
  t.test(name, async (t) => {
    const backend: Backend = await startBackend(name);
    t.teardown(() => backend.stop());
    const cfg = backend.config() as ConfigInput & { adapter: { driver: string } };
    const node = (secret: string | null): ConfigInput => ({ ...cfg, ...METRICS, adapter: { ...cfg.adapter, cluster_secret: secret } });
    const [a, b] = await startNodePair(t, node(SECRET));
    const prefix = 'ringcast';

    t.test('same secret: events and presence cross', async (t) => {
      const ca = a.track(await RawClient.connect(a.wsUrl()));
      const cb = b.track(await RawClient.connect(b.wsUrl()));
      await cb.subscribe('crossing');
      await a.sdk().trigger('crossing', 'hello', { from: 'a' });
      t.same((await cb.event('hello', 'crossing', 5000)).data, JSON.stringify({ from: 'a' }), 'node A\'s event reached node B\'s client');
      const channel = 'presence-signed';
      await cb.subscribeAuthed(channel, { user_id: 'ub', user_info: {} });
      await ca.subscribeAuthed(channel, { user_id: 'ua', user_info: {} });
      const added = await cb.next((f) => f.event === 'pusher_internal:member_added' && f.channel === channel, 5000);
      t.equal((JSON.parse(added.data as string) as { user_id: string }).user_id, 'ua', 'node A\'s member reached node B');
      t.equal(await rejected(a, 'bad_signature') + await rejected(a, 'unsigned'), 0, 'node A dropped nothing of node B');
      t.equal(await rejected(b, 'bad_signature') + await rejected(b, 'unsigned'), 0, 'node B dropped nothing of node A');
    });

    t.test('frames injected on the prefix without or with a wrong signature are dropped and counted', async (t) => {
      const cb = b.track(await RawClient.connect(b.wsUrl()));
      const channel = 'injected';
      await cb.subscribe(channel);
      const inj = await injector(cfg, `${prefix}.pub`);
      t.teardown(() => inj.close());
      const before = { unsigned: await rejected(b, 'unsigned'), bad: await rejected(b, 'bad_signature') };
      const pub = `${prefix}.pub`;
      const ctl = `${prefix}.ctl`;
      await inj.publish(pub, eventFrame(channel, 'evil', 'unsigned'));
      await inj.publish(pub, signFrame(key(OTHER), pub, eventFrame(channel, 'evil', 'wrong key')));
      // the right key over another subject's frame: the tag binds the subject
      await inj.publish(pub, signFrame(key(SECRET), ctl, eventFrame(channel, 'evil', 'signed for ctl')));
      // a fake node: a heartbeat, then a fake presence member, unsigned
      await inj.publish(ctl, encodeNodeMsg({ t: 'hb', node: '0000000000fffake', v: 3 }));
      await inj.publish(ctl, encodeNodeMsg({ t: 'member', node: '0000000000fffake', op: 'added', app: APP.id, channel: 'presence-x', userId: 'ghost', userInfo: {} }));
      // the marker: the same crafted frame, signed with the cluster's secret, after them on the same connection
      await inj.publish(pub, signFrame(key(SECRET), pub, eventFrame(channel, 'marker', 'signed')));
      t.equal((await cb.event('marker', channel, 5000)).data, 'signed', 'a frame signed with the secret is delivered');
      t.equal(named(cb, 'evil').length, 0, 'none of the unsigned or wrongly signed events reached the client');
      t.notOk(b.server.cluster!.nodes().includes('0000000000fffake'), 'the fake node is not a member');
      await eventually(async () => await rejected(b, 'unsigned') - before.unsigned >= 3, 5000, 'three unsigned frames counted');
      t.equal(await rejected(b, 'unsigned') - before.unsigned, 3, 'node B counted the three unsigned frames');
      t.equal(await rejected(b, 'bad_signature') - before.bad, 2, 'and the two with a wrong signature');
      // a later publish of node A still arrives: the drops harmed nothing
      await a.sdk().trigger(channel, 'after', 'ok');
      await cb.event('after', channel, 5000);
      t.equal(named(cb, 'evil').length, 0);
    });

    t.test('a captured signed frame published again is dropped (replayed), an old one too (stale); both counted', async (t) => {
      const cb = b.track(await RawClient.connect(b.wsUrl()));
      const channel = 'replay';
      await cb.subscribe(channel);
      // the nodes publish on the channel's bucket subject (adapter/buckets.ts; adapter.buckets' default)
      const pub = `${prefix}.b.${bucketOf(APP.id, channel, 16_384)}`;
      const inj = await injector(cfg, pub);
      t.teardown(() => inj.close());
      const before = { replayed: await rejected(b, 'replayed'), stale: await rejected(b, 'stale') };
      await a.sdk().trigger(channel, 'once', 'x');
      await eventually(() => inj.frames('"once"').length > 0, 5000, 'node A\'s signed frame on the backend');
      const captured = inj.frames('"once"')[0];
      // published again, three times; then a frame signed with the secret but stamped a minute ago
      for (let i = 0; i < 3; i++) await inj.publish(pub, captured);
      await inj.publish(pub, signFrame(key(SECRET), pub, eventFrame(channel, 'old', 'x'), { sender: 'aa'.repeat(8), ms: Date.now() - 60_000, seq: 1 }));
      await inj.publish(pub, signFrame(key(SECRET), pub, eventFrame(channel, 'marker', 'replay')));
      await cb.next((f) => f.event === 'marker' && f.data === 'replay', 5000);
      t.equal(named(cb, 'once').length, 1, 'the event was delivered once');
      t.equal(named(cb, 'old').length, 0, 'the stale frame was not delivered');
      await eventually(async () => await rejected(b, 'replayed') - before.replayed >= 3, 5000, 'three replays counted');
      t.equal(await rejected(b, 'replayed') - before.replayed, 3, 'node B counted the three replays');
      t.equal(await rejected(b, 'stale') - before.stale, 1, 'and the stale one');
    });

    t.test('nodes with another secret, or none, exchange nothing with the pair', async (t) => {
      const c = await startNode(t, node(OTHER));
      const d = await startNode(t, node(null));
      const cb = b.track(await RawClient.connect(b.wsUrl()));
      const cc = c.track(await RawClient.connect(c.wsUrl()));
      const cd = d.track(await RawClient.connect(d.wsUrl()));
      const channel = 'apart';
      for (const x of [cb, cc, cd]) await x.subscribe(channel);
      // each node has heard the others' heartbeats (counted) without taking them as members
      await eventually(async () => await rejected(c, 'bad_signature') > 0 && await rejected(d, 'signed') > 0
        && await rejected(a, 'bad_signature') > 0 && await rejected(a, 'unsigned') > 0, 10_000, 'the other nodes\' frames to be refused');
      const pub = `${prefix}.pub`;
      // the nodes publish on the channel's bucket subject (adapter/buckets.ts)
      const inj = await injector(cfg, `${prefix}.b.${bucketOf(APP.id, channel, 16_384)}`); // adapter.buckets' default
      t.teardown(() => inj.close());
      await a.sdk().trigger(channel, 'from-a', 'x');
      await c.sdk().trigger(channel, 'from-c', 'x');
      await d.sdk().trigger(channel, 'from-d', 'x');
      await cc.event('from-c', channel, 5000); // local delivery on each
      await cd.event('from-d', channel, 5000);
      // the backend has handed each node's frame to every subscriber once the watcher has it
      await eventually(() => inj.seen('from-a') && inj.seen('from-c') && inj.seen('from-d'), 5000, 'the three frames on the backend');
      // markers down one connection after them: signed with C's secret for C, unsigned for D, with the pair's for B
      await inj.publish(pub, signFrame(key(OTHER), pub, eventFrame(channel, 'marker', 'c')));
      await inj.publish(pub, eventFrame(channel, 'marker', 'd'));
      await cc.next((f) => f.event === 'marker' && f.data === 'c', 5000);
      await cd.next((f) => f.event === 'marker' && f.data === 'd', 5000);
      t.equal(named(cc, 'from-a').length, 0, 'node A\'s event did not reach the node with another secret');
      t.equal(named(cd, 'from-a').length, 0, 'nor the node without one');
      t.equal(named(cd, 'marker').length, 0, 'the node without a secret did not take the signed marker for C');
      t.same(members(c), [c.server.cluster!.id], 'the node with another secret sees no other node');
      t.same(members(d), [d.server.cluster!.id], 'the node without a secret sees no other node');
      t.same(members(a).sort(), [a.server.cluster!.id, b.server.cluster!.id].sort(), 'the pair sees only each other');
      await inj.publish(pub, signFrame(key(SECRET), pub, eventFrame(channel, 'marker', 'b')));
      await cb.next((f) => f.event === 'marker' && f.data === 'b', 5000);
      t.equal(named(cb, 'from-a').length, 1, 'the pair\'s own event crossed');
      t.equal(named(cb, 'from-c').length + named(cb, 'from-d').length, 0, 'no event of C or D reached the pair');
    });
  });
}
