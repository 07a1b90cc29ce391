// Idempotent publish across the nodes of a cluster (adapter.driver redis / redis-cluster:
// the window is in Redis, history/idempotency-redis.ts; nats: in a JetStream key-value
// bucket, history/idempotency-nats.ts). Two nodes on a real Redis, Redis Cluster or
// nats-server -js; a subscriber on each node counts deliveries, settled with markers
// published on both nodes.
// - a retry that reaches the other node is not delivered again and gets the first answer
//   (events and batch items); a key reused on the other route is 422 naming the route it
//   was first used on, delivers nothing and leaves no key of the batch pending;
// - the same key sent to both nodes at once, many times: delivered once, every 200 the
//   same answer, the others 503 "still being answered" (retried until answered);
// - the store down: a publish with a key is refused 503 naming Redis / NATS, nothing
//   delivered; the same retried once it is back is delivered once, and a retry on the other
//   node then gets its answer;
// - Redis hung (SIGSTOP: connected, answering nothing): 503 within seconds, nothing
//   delivered; once it answers again the retry is delivered once;
// - a NATS server without JetStream: a key is refused 503 saying so, nothing delivered.
import t from 'tap';
import type { Test } from 'tap';
import { startNode, startNodePair } from '../helpers/cluster';
import { signedPost } from '../helpers/http';
import { MARKER, settle } from '../helpers/settle';
import { APP, RawClient, eventually, type TestServer } from '../helpers/server';
import { startBackend } from '../adapter/backends';
import { NatsServer } from '../helpers/nats';
import { RedisServer } from '../helpers/redis';

type Answer = { status: number; body: unknown; text: string };
// two clusters of two nodes, Redis outages: past tap's 120 s default with workers 4 on a loaded machine
t.setTimeout(280_000);

const post = (srv: TestServer, path: string, body: unknown): Promise<Answer> =>
  signedPost(srv.port, APP, path, body).then((r) => ({ status: r.status, body: r.json as unknown, text: r.text }));

/** Every client has both nodes' markers on `channel`: what either node published before is there. */
async function settleBoth(nodes: TestServer[], clients: RawClient[], channel: string): Promise<void> {
  for (const n of nodes) await settle(n, clients, channel, { timeoutMs: 10_000 });
}

/**
 * settleBoth, tried again while the adapters settle after a Redis outage (a Redis Cluster's
 * subscribers come back one by one; past 40 s once on a loaded machine). A marker published
 * before a node's adapter is back is lost, and waiting for it long only delays the next try.
 */
async function settleAfterOutage(nodes: TestServer[], clients: RawClient[], channel: string): Promise<void> {
  let last = '';
  try {
    await eventually(async () => {
      try {
        for (const n of nodes) await settle(n, clients, channel, { timeoutMs: 3000 });
        return true;
      } catch (err) {
        last = (err as Error).message;
        return false;
      }
    }, 90_000, 'the markers of both nodes to reach both subscribers');
  } catch (err) {
    // what each node thought of its backend, for the report
    const state = nodes.map((n, i) => `node ${i}: backend ${n.server.cluster!.isUp() ? 'up' : 'down'}, sees ${n.server.cluster!.nodes().length} nodes`).join('; ');
    throw new Error(`${(err as Error).message} (${state}; last try: ${last})`);
  }
}

const delivered = (c: RawClient, channel: string, event: string) => c.frames.filter((f) => f.channel === channel && f.event === event && f.event !== MARKER);

for (const name of ['redis', 'redis-cluster', 'nats'] as const) {
  t.test(`${name}: idempotent publish across two nodes`, async (t) => {
    const backend = await startBackend(name);
    t.teardown(() => backend.stop());
    const [a, b] = await startNodePair(t, backend.config());
    const ca = a.track(await RawClient.connect(a.wsUrl()));
    const cb = b.track(await RawClient.connect(b.wsUrl()));
    const subscribe = async (channel: string) => {
      await Promise.all([ca.subscribe(channel), cb.subscribe(channel)]);
      // both nodes know of both subscribers before anything is published
      await settleBoth([a, b], [ca, cb], channel);
    };

    await t.test('a retry on the other node: not delivered again, the first answer', async (t) => {
      const ch = `idem-retry-${name}`;
      await subscribe(ch);
      const body = { name: 'once', channel: ch, data: 'x', idempotency_key: 'retry-1', info: 'subscription_count' };
      const first = await post(a, 'events', body);
      t.equal(first.status, 200, first.text);
      for (const n of [b, a, b]) {
        const again = await post(n, 'events', body);
        t.equal(again.status, 200);
        t.same(again.body, first.body, 'the first answer');
      }
      const item = (k: string) => ({ name: 'item', channel: ch, data: k, idempotency_key: k });
      const b1 = await post(b, 'batch_events', { batch: [item('i-1'), item('i-2')] });
      t.equal(b1.status, 200, b1.text);
      const b2 = await post(a, 'batch_events', { batch: [item('i-2'), item('i-3')] });
      t.equal(b2.status, 200, b2.text);
      t.same((b2.body as { batch: unknown[] }).batch.length, 2, 'one answer per item');
      // a key on the other route, on either node: 422 naming the first route, nothing delivered, no key left pending
      const cross = await post(b, 'batch_events', { batch: [item('i-9'), { ...item('retry-1'), name: 'cross' }] });
      t.equal(cross.status, 422, cross.text);
      t.match(cross.body, { error: /^batch\[1\]: idempotency_key "retry-1" was first used on POST \/apps\/\{app_id\}\/events, not batch_events/ });
      const back = await post(a, 'events', { name: 'cross', channel: ch, data: 'x', idempotency_key: 'i-1' });
      t.equal(back.status, 422, back.text);
      t.match(back.body, { error: /first used on POST \/apps\/\{app_id\}\/batch_events, not events/ });
      const freed = await post(a, 'batch_events', { batch: [item('i-9')] });
      t.equal(freed.status, 200, `the refused batch's other key is free: ${freed.text}`);
      await settleBoth([a, b], [ca, cb], ch);
      for (const c of [ca, cb]) {
        t.equal(delivered(c, ch, 'once').length, 1, 'the event delivered once to each node\'s subscriber');
        t.same(delivered(c, ch, 'item').map((f) => f.data), ['i-1', 'i-2', 'i-3', 'i-9'], 'batch items: each once');
        t.equal(delivered(c, ch, 'cross').length, 0, 'nothing of a cross-route request');
      }
    });

    await t.test('the same key on both nodes at once: delivered once', async (t) => {
      const ch = `idem-race-${name}`;
      await subscribe(ch);
      for (let round = 0; round < 5; round++) {
        const body = { name: 'race', channel: ch, data: String(round), idempotency_key: `race-${round}` };
        const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => post(i % 2 === 0 ? a : b, 'events', body)));
        for (const r of answers) {
          if (r.status === 503) t.match(r.text, /still being answered: retry/, 'a racing duplicate: 503 retry');
          else t.equal(r.status, 200, r.text);
        }
        t.ok(answers.some((r) => r.status === 200), 'one of them published');
        // the 503s, retried, get the first answer
        for (const r of answers.filter((x) => x.status === 503)) {
          let again: Answer = r;
          await eventually(async () => (again = await post(b, 'events', body)).status === 200, 15_000, 'the retry to be answered');
          t.same(again.body, answers.find((x) => x.status === 200)!.body);
        }
      }
      await settleBoth([a, b], [ca, cb], ch);
      for (const c of [ca, cb]) t.same(delivered(c, ch, 'race').map((f) => f.data), ['0', '1', '2', '3', '4'], 'each key delivered once, in order');
    });

    const store = name === 'nats' ? 'NATS JetStream' : 'Redis';
    await t.test(`${store} down: 503 naming it, nothing delivered; retried once it is back: delivered once`, async (t) => {
      const ch = `idem-down-${name}`;
      await subscribe(ch);
      await backend.kill();
      const body = { name: 'after-outage', channel: ch, data: 'x', idempotency_key: 'down-1' };
      const refused = await post(a, 'events', body);
      t.equal(refused.status, 503);
      t.match(refused.body, { error: new RegExp(`^the idempotency window's ${store} at .+ did not answer \\(.+\\): nothing was delivered, retry later$`) });
      const batch = await post(b, 'batch_events', { batch: [{ ...body, idempotency_key: 'down-2' }] });
      t.equal(batch.status, 503);
      t.match(batch.body, { error: new RegExp(`idempotency window's ${store} .* nothing was delivered`) });
      await backend.resume();
      // both nodes' adapters are back (markers cross them): a publish now reaches both subscribers
      await settleAfterOutage([a, b], [ca, cb], ch);
      // the client retries until it is answered (a node's window client may still reconnect: more 503s, none delivered)
      let ok: Answer | null = null;
      await eventually(async () => {
        const r = await post(a, 'events', body);
        if (r.status === 200) ok = r;
        else t.equal(r.status, 503, `a retry before Redis is back: 503 (${r.text})`);
        return ok !== null;
      }, 30_000, 'a retry to be answered once Redis is back');
      const other = await post(b, 'events', body);
      t.equal(other.status, 200, other.text);
      t.same(other.body, ok!.body, 'the other node answers the first answer');
      await settleAfterOutage([a, b], [ca, cb], ch);
      for (const c of [ca, cb]) t.equal(delivered(c, ch, 'after-outage').length, 1, 'delivered once');
    });
  });
}

t.test('redis hung: 503 within the command timeout, nothing delivered; the retry after: delivered once', async (t: Test) => {
  const redis = await RedisServer.start();
  t.teardown(() => redis.stop());
  const a = await startNode(t, { adapter: { driver: 'redis' }, database: { redis: { host: '127.0.0.1', port: redis.port } } });
  const c = a.track(await RawClient.connect(a.wsUrl()));
  await c.subscribe('idem-hung');
  redis.freeze();
  const body = { name: 'hung', channel: 'idem-hung', data: 'x', idempotency_key: 'hung-1' };
  const started = Date.now();
  const r = await post(a, 'events', body);
  t.equal(r.status, 503);
  t.match(r.body, { error: /^the idempotency window's Redis at 127\.0\.0\.1:\d+ did not answer \(.+\): nothing was delivered, retry later$/i });
  t.ok(Date.now() - started < 5000, `answered within 5 s (${Date.now() - started} ms): the command timeout, not a hang`);
  redis.thaw();
  let ok: Answer | null = null;
  await eventually(async () => (ok = await post(a, 'events', body)).status === 200, 20_000, 'the retry to be answered');
  t.equal((await post(a, 'events', body)).status, 200, 'a repeat: the first answer');
  await settle(a, c, 'idem-hung', { timeoutMs: 10_000 });
  t.equal(delivered(c, 'idem-hung', 'hung').length, 1, 'delivered once');
  t.ok(ok);
});

t.test('nats without JetStream: a key is refused 503 saying so, nothing delivered; without a key: published', async (t: Test) => {
  const nats = await NatsServer.start(undefined, { jetstream: false });
  t.teardown(() => nats.stop());
  const a = await startNode(t, { adapter: { driver: 'nats', nats: { servers: [nats.url] } } });
  const c = a.track(await RawClient.connect(a.wsUrl()));
  await c.subscribe('idem-nats');
  const r = await post(a, 'events', { name: 'e', channel: 'idem-nats', data: 'x', idempotency_key: 'n-1' });
  t.equal(r.status, 503);
  t.match(r.body, { error: /^the idempotency window's NATS JetStream at nats:\/\/127\.0\.0\.1:\d+ did not answer \(JetStream is not enabled on the NATS server: start it with -js\): nothing was delivered, retry later$/ });
  const rb = await post(a, 'batch_events', { batch: [{ name: 'e', channel: 'idem-nats', data: 'x' }, { name: 'e', channel: 'idem-nats', data: 'y', idempotency_key: 'n-2' }] });
  t.equal(rb.status, 503);
  t.equal((await post(a, 'events', { name: 'plain', channel: 'idem-nats', data: 'x' })).status, 200, 'without a key: published');
  await settle(a, c, 'idem-nats');
  t.same(c.frames.filter((f) => f.channel === 'idem-nats' && f.event !== 'pusher_internal:subscription_succeeded').map((f) => f.event), ['plain'], 'the refused ones delivered nothing');
});
