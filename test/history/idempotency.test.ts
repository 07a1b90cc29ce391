// Idempotent publish: a repeated idempotency_key (events and batch items) is delivered once
// and answered with the first answer, whichever shard gets the retry (fresh connections,
// workers 4); a bad key is a 400 naming the field. A key reused on the other route
// (/events then /batch_events, or the reverse) is a 422 naming the first route: nothing
// delivered, never a 500, and the batch's other keys are free (never 503 "still being
// answered"). One app's burst of keys past idempotency.max_keys forgets its own oldest
// keys, not another app's.
import t from 'tap';
import { createIdempotencyOwner, type IdemReply } from '../../src/history/idempotency';
import { APP, RawClient, startServer } from '../helpers/server';
import { signedPost } from '../helpers/http';

t.test('idempotent publish', async (t) => {
  const srv = await startServer({ apps: [{ ...APP, channel_history: { 'h-*': { size: 100, ttl: 60 } } as never }] });
  t.teardown(() => srv.stop());
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  await c.subscribe('plain');
  await c.subscribe('h-1', { recover: {} });
  const post = (path: string, body: unknown) => signedPost(srv.port, APP, path, body).then((r) => ({ status: r.status, body: r.json as unknown }));
  const count = (channel: string, event: string) => c.frames.filter((f) => f.channel === channel && f.event === event).length;

  await t.test('events: the repeats answer the first answer and deliver nothing', async (t) => {
    const body = { name: 'once', channel: 'plain', data: 'x', idempotency_key: 'k-1', info: 'subscription_count' };
    const first = await post('events', body);
    t.equal(first.status, 200);
    for (let i = 0; i < 6; i++) {
      const again = await post('events', body);
      t.equal(again.status, 200);
      t.same(again.body, first.body, 'the first answer');
    }
    await post('events', { name: 'marker', channel: 'plain', data: 'm' });
    await c.event('marker', 'plain');
    t.equal(count('plain', 'once'), 1, 'delivered once');
    // on a history channel: stored once too (one serial)
    for (let i = 0; i < 4; i++) await post('events', { name: 'h-once', channel: 'h-1', data: 'x', idempotency_key: 'k-h' });
    await post('events', { name: 'marker', channel: 'h-1', data: 'm' });
    const marker = await c.event('marker', 'h-1');
    t.equal(count('h-1', 'h-once'), 1);
    t.equal((marker as unknown as { __serial: number }).__serial, 2, 'one serial taken by the repeated publish');
  });

  await t.test('batch items: only the new ones go out; each item answers its first answer', async (t) => {
    const item = (k: string, name: string) => ({ name, channel: 'plain', data: k, idempotency_key: k });
    const a = await post('batch_events', { batch: [item('b-1', 'b'), item('b-2', 'b')] });
    t.equal(a.status, 200);
    const b = await post('batch_events', { batch: [item('b-2', 'b'), item('b-3', 'b'), { name: 'b', channel: 'plain', data: 'nokey' }] });
    t.equal(b.status, 200);
    t.equal((b.body as { batch: unknown[] }).batch.length, 3);
    await post('events', { name: 'marker2', channel: 'plain', data: 'm' });
    await c.event('marker2', 'plain');
    t.same(c.frames.filter((f) => f.event === 'b').map((f) => f.data), ['b-1', 'b-2', 'b-3', 'nokey']);
  });

  await t.test('a key on the other route: 422 naming the first route, nothing delivered, no key pending', async (t) => {
    const item = (k: string) => ({ name: 'x-route', channel: 'plain', data: k, idempotency_key: k });
    t.equal((await post('events', item('x-ev'))).status, 200);
    // /events then /batch_events (before: 500 after the other items were delivered, their keys 503 for 10 s)
    const batch = await post('batch_events', { batch: [item('x-free'), item('x-ev')] });
    t.equal(batch.status, 422);
    t.match(batch.body, { error: /^batch\[1\]: idempotency_key "x-ev" was first used on POST \/apps\/\{app_id\}\/events, not batch_events: a key belongs to one route; nothing was delivered$/ });
    const free = await post('batch_events', { batch: [item('x-free')] });
    t.equal(free.status, 200, 'the refused batch\'s other key is not pending');
    // /batch_events then /events (before: answered with the batch's {"batch":[…]})
    const ev = await post('events', item('x-free'));
    t.equal(ev.status, 422);
    t.match(ev.body, { error: /^idempotency_key "x-free" was first used on POST \/apps\/\{app_id\}\/batch_events, not events/ });
    t.same((await post('batch_events', { batch: [item('x-free')] })).body, free.body, 'the batch route still answers its first answer');
    await post('events', { name: 'marker3', channel: 'plain', data: 'm' });
    await c.event('marker3', 'plain');
    t.same(c.frames.filter((f) => f.event === 'x-route').map((f) => f.data), ['x-ev', 'x-free'], 'each delivered once, nothing of the refused requests');
  });

  await t.test('bad keys: 400 naming idempotency_key', async (t) => {
    const bad = async (body: unknown, path: string, rx: RegExp) => {
      const r = await post(path, body);
      t.equal(r.status, 400);
      t.match(r.body, { error: rx });
    };
    await bad({ name: 'e', channel: 'plain', data: 'x', idempotency_key: 12 }, 'events', /^idempotency_key must be a string/);
    await bad({ name: 'e', channel: 'plain', data: 'x', idempotency_key: 'k'.repeat(129) }, 'events', /idempotency_key must be 1 to 128 characters long \(got 129\)/);
    await bad({ name: 'e', channel: 'plain', data: 'x', idempotency_key: '' }, 'events', /idempotency_key must be 1 to 128/);
    await bad({ name: 'e', channel: 'plain', data: 'x', idempotency_key: 'tab\there' }, 'events', /idempotency_key must be printable/);
    await bad({ batch: [{ name: 'e', channel: 'plain', data: 'x' }, { name: 'e', channel: 'plain', data: 'x', idempotency_key: {} }] }, 'batch_events', /^batch\[1\]: idempotency_key must be a string/);
    await bad({ batch: [{ name: 'e', channel: 'plain', data: 'x', idempotency_key: 'same' }, { name: 'e', channel: 'plain', data: 'y', idempotency_key: 'same' }] }, 'batch_events', /batch\[1\]: idempotency_key is the same as batch\[0\]'s/);
  });
});

t.test('the idempotency memory: one app\'s burst forgets its own oldest keys, not another app\'s', async (t) => {
  const replies: IdemReply[] = [];
  const evicted: string[] = [];
  const owner = createIdempotencyOwner({ windowMs: 60_000, maxKeys: 10, reply: (_to, _req, body) => { replies.push(body); }, evicted: (app) => evicted.push(app) });
  const claim = (app: string, key: string) => { owner.handle({ type: 'idem_claim', req: 1, from: 0, app, key }, 0); return replies.at(-1)!; };
  for (let i = 0; i < 3; i++) {
    claim('quiet', `q-${i}`);
    owner.handle({ type: 'idem_done', app: 'quiet', key: `q-${i}`, status: 200, body: { i } }, 0);
  }
  for (let i = 0; i < 1000; i++) t.equal(claim('noisy', `n-${i}`).state, 'new');
  t.equal(owner.size(), 10, 'bounded');
  t.equal(owner.sizeOf('quiet'), 3, 'the quiet app keeps its keys');
  for (let i = 0; i < 3; i++) t.same(claim('quiet', `q-${i}`), { state: 'done', status: 200, body: { i } });
  t.equal(claim('noisy', 'n-0').state, 'new', 'the noisy app\'s oldest went');
  t.ok(evicted.length > 0 && evicted.every((a) => a === 'noisy'), 'evictions counted against the noisy app');
  t.same(claim('quiet', 'q-0'), { state: 'done', status: 200, body: { i: 0 } });
  // a route's key claimed on the other route
  t.same(claim('quiet', 'q-1'), { state: 'done', status: 200, body: { i: 1 } });
  owner.handle({ type: 'idem_claim', req: 1, from: 0, app: 'quiet', key: 'q-1', route: 'batch_events' }, 0);
  t.same(replies.at(-1), { state: 'conflict', route: 'events' });
  owner.handle({ type: 'idem_release', app: 'noisy', key: 'n-999' }, 0);
  owner.sweep();
  t.equal(owner.sizeOf('noisy'), 6, 'a released pending key is gone');
});
