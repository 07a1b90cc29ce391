// The NATS JetStream window itself (history/idempotency-nats.ts) against a real
// nats-server -js, two windows standing for two nodes: claim / done / release, keys of any
// printable characters, a pending marker whose node died taken over after PENDING_MS (and
// that node's late answer then not written over the new one), and claims refused 503 while
// NATS is down. idempotency-cluster.test.ts drives it through two real nodes.
// test-modes: once (no server: the window alone)
import t from 'tap';
import { connect } from 'nats';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/log';
import { noMetrics, type MetricsSink } from '../../src/metrics/types';
import { bucketOf, createNatsIdempotency, entryOf } from '../../src/history/idempotency-nats';
import { PENDING_MS, isIdempotencyDown } from '../../src/history/idempotency';
import { NatsServer } from '../helpers/nats';

t.setTimeout(120_000);

t.test('the NATS JetStream idempotency window', async (t) => {
  const nats = await NatsServer.start();
  t.teardown(() => nats.stop());
  const config = loadConfig({ env: {}, overrides: { adapter: { driver: 'nats', nats: { servers: [nats.url], prefix: 'rc.test' } }, idempotency: { window_seconds: 60 }, log: { level: 'silent' }, apps: [{ id: 'app', key: 'app-key', secret: 'app-secret' }] } });
  const counted: string[] = [];
  const metrics: MetricsSink = { ...noMetrics, inc: (name, labels) => { counted.push(`${name}:${labels?.op}`); } };
  const [a, b] = [0, 1].map(() => createNatsIdempotency({ config, log: createLogger(config.log), metrics }));
  t.teardown(() => Promise.all([a.close(), b.close()]));

  await t.test('claim, a second claim, the answer, the answer again from the other node', async (t) => {
    t.same(await a.claim('app', 'k-1'), { state: 'new' });
    t.same(await b.claim('app', 'k-1'), { state: 'pending' }, 'the other node: pending (503 retry)');
    a.done('app', 'k-1', 200, { channels: {} });
    let got: unknown;
    for (let i = 0; i < 50 && (got = await b.claim('app', 'k-1'), (got as { state: string }).state !== 'done'); i++) await new Promise((r) => setTimeout(r, 20));
    t.same(got, { state: 'done', status: 200, body: { channels: {} } }, 'the first answer');
    t.same(await a.claim('other-app', 'k-1'), { state: 'new' }, 'another app\'s key of the same name is its own');
  });

  await t.test('release: the key is free again (the 503 delivered nothing)', async (t) => {
    t.same(await a.claim('app', 'k-2'), { state: 'new' });
    a.release('app', 'k-2');
    let got: unknown;
    for (let i = 0; i < 50 && (got = await b.claim('app', 'k-2'), (got as { state: string }).state !== 'new'); i++) await new Promise((r) => setTimeout(r, 20));
    t.same(got, { state: 'new' }, 'the retry publishes');
  });

  await t.test('keys of any printable character, in a bucket named after the prefix', async (t) => {
    const key = 'order 42: €? no, "ascii" *>.~';
    t.same(await a.claim('app', key), { state: 'new' });
    t.same(await b.claim('app', key), { state: 'pending' });
    t.match(entryOf('app', key), /^[A-Za-z0-9_-]+$/, 'the entry name is a valid bucket key');
    const nc = await connect({ servers: nats.url });
    t.teardown(() => nc.close());
    const kv = await nc.jetstream().views.kv(bucketOf('rc.test'));
    t.equal(bucketOf('rc.test'), 'rc_test_idem');
    const e = await kv.get(entryOf('app', key));
    t.match(e && new TextDecoder().decode(e.value), /^P/, 'the pending marker is in the bucket');
  });

  await t.test(`a claim whose node died is taken over after ${PENDING_MS} ms; that node's late answer is not written over the new one`, async (t) => {
    t.same(await a.claim('app', 'k-3'), { state: 'new' });
    t.same(await b.claim('app', 'k-3'), { state: 'pending' });
    await new Promise((r) => setTimeout(r, PENDING_MS + 200));
    t.same(await b.claim('app', 'k-3'), { state: 'new' }, 'taken over');
    b.done('app', 'k-3', 200, { from: 'b' });
    a.done('app', 'k-3', 200, { from: 'a' }); // the first claim's answer, late
    let got: unknown;
    for (let i = 0; i < 50 && (got = await a.claim('app', 'k-3'), (got as { state: string }).state !== 'done'); i++) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 200));
    t.same(await a.claim('app', 'k-3'), { state: 'done', status: 200, body: { from: 'b' } }, 'the answer of the request that published last stays');
  });

  await t.test('NATS down: a claim is refused, naming NATS JetStream; back: claims go on', async (t) => {
    await nats.kill();
    const err = await a.claim('app', 'k-4').then(() => null, (e: unknown) => e);
    t.ok(isIdempotencyDown(err), 'the 503 error');
    t.match((err as Error).message, /^the idempotency window's NATS JetStream at nats:\/\/127\.0\.0\.1:\d+ did not answer \(.+\)$/);
    t.ok(counted.includes('idempotency_errors_total:claim'), 'counted');
    await nats.resume();
    let got: unknown = null;
    for (let i = 0; i < 100 && got === null; i++) {
      got = await a.claim('app', 'k-4').catch(() => null);
      if (got === null) await new Promise((r) => setTimeout(r, 100));
    }
    t.same(got, { state: 'new' }, 'claimed once NATS is back');
    // the other window's connection comes back on its own time (a claim meanwhile: 503)
    let kept: unknown = null;
    for (let i = 0; i < 100 && kept === null; i++) {
      kept = await b.claim('app', 'k-1').catch(() => null);
      if (kept === null) await new Promise((r) => setTimeout(r, 100));
    }
    t.same(kept, { state: 'done', status: 200, body: { channels: {} } }, 'what was answered before the outage is still there (the store is on disk)');
  });
});
