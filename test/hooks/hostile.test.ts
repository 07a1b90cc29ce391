// test-modes: once (the checks run on the shard holding the socket, the same code on every shard)
// Hooks under a hostile client: client-event data nested past limits.max_client_event_depth
// is refused once, before any hook is called, and never takes the shard down; hook calls
// have per-connection and per-app budgets, so one client driving hooks at full speed
// leaves other apps' and other connections' calls alone.

import t from 'tap';
import { loadConfig } from '../../src/config';
import { createShardHooks } from '../../src/hooks';
import { PromMetrics } from '../../src/metrics/registry';
import { startHookBackend } from '../helpers/hook-backend';
import { APP, RawClient, startServer } from '../helpers/server';

const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);

t.test('a ~16,500-deep client event with a client_event hook: the sender gets 4301, the shard and its sockets live on', async (t) => {
  const backend = await startHookBackend();
  const srv = await startServer({ apps: [{ ...APP, hooks: { url: backend.url, client_event: { enabled: true } } }] });
  t.teardown(async () => {
    await srv.stop();
    await backend.close();
  });
  const a = srv.track(await RawClient.connect(srv.wsUrl()));
  const b = srv.track(await RawClient.connect(srv.wsUrl()));
  await a.subscribeAuthed('private-x');
  await b.subscribeAuthed('private-x');
  for (const depth of [16_500, 65]) {
    a.send(`{"event":"client-deep","channel":"private-x","data":${deep(depth)}}`);
    t.match(await a.event('pusher:error'), { channel: 'private-x', data: { code: 4301, message: 'Client event data is nested more than 64 levels deep' } }, `${depth} levels refused`);
  }
  t.equal(backend.calls.length, 0, 'no hook was called for them');
  a.send(`{"event":"client-ok","channel":"private-x","data":${deep(64)}}`);
  t.match(await b.event('client-ok', 'private-x'), { event: 'client-ok' }, '64 levels go through the hook to the other subscriber');
  t.equal(backend.calls.length, 1);
  await a.sync();
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  await c.sync();
  t.equal(a.closeCode, null, 'the sender is still connected');
  t.equal(b.closeCode, null, 'the other subscriber is still connected');
});

t.test('a hook call whose body cannot be serialised resolves with on_failure (never rejects)', async (t) => {
  const backend = await startHookBackend();
  t.teardown(() => backend.close());
  const config = loadConfig({ env: {}, overrides: { apps: [{ ...APP, hooks: { url: backend.url, on_failure: 'deny', publish: { enabled: true } } }] } });
  const metrics = new PromMetrics('x_');
  const hooks = createShardHooks({ config, metrics, out: (c) => c });
  t.teardown(() => hooks.close());
  const app = config.apps[0];
  // deeper than any stack: only a caller that catches the RangeError answers at all
  let data: unknown = null;
  for (let i = 0; i < 200_000; i++) data = [data];
  const v = await hooks.caller.call(app, { ...app.hooks!.publish, kind: 'publish', channel: () => true, event: () => true },
    { hook: 'publish', app_id: app.id, time_ms: Date.now(), channel: 'c', event: 'e', data });
  t.match(v, { allow: false, failed: true, reason: /publish hook failed \(the request body could not be serialised\)/ });
  t.equal(backend.calls.length, 0, 'nothing was sent');
});

const OTHER = { id: 'other-app', key: 'other-key', secret: 'other-secret' };

t.test('hook budgets: one app\'s flood neither fills another app\'s in-flight slots nor opens its breaker', async (t) => {
  const backend = await startHookBackend();
  // the flood's calls never answer (time out: failures); everything else is allowed at once
  backend.answer = (c) => (c.body.channel?.startsWith('flood-') ? 'hang' : { allow: true });
  const hooks = { url: backend.url, timeout_ms: 400, on_failure: 'deny', subscribe: { enabled: true } };
  const srv = await startServer({
    apps: [{ ...APP, hooks }, { ...OTHER, hooks }],
    hook_client: { max_in_flight: 16, max_in_flight_per_app: 8, breaker: { failures: 3, open_ms: 60_000 } },
  });
  t.teardown(async () => {
    await srv.stop();
    await backend.close();
  });
  const other = srv.track(await RawClient.connect(srv.wsUrl(OTHER.key)));
  const flood = await Promise.all(Array.from({ length: 20 }, async () => srv.track(await RawClient.connect(srv.wsUrl()))));
  flood.forEach((c, i) => c.send({ event: 'pusher:subscribe', data: { channel: `flood-${i}` } }));
  await backend.until((calls) => calls.filter((c) => c.body.channel?.startsWith('flood-')).length >= 8, 5000, 'the flood in flight');
  t.equal((await other.subscribe('calm-1')).event, 'pusher_internal:subscription_succeeded', 'the other app is called while the flood fills its own slots');
  t.equal(backend.calls.filter((c) => c.body.channel?.startsWith('flood-')).length, 8, 'the flooding app has max_in_flight_per_app calls out');
  const refused = await Promise.all(flood.map((c, i) => c.event('pusher:subscription_error', `flood-${i}`, 5000)));
  t.ok(refused.every((f) => f.event === 'pusher:subscription_error'), 'every flood subscribe ends under on_failure deny');
  // the flood's timeouts opened its app's breaker, not the other app's
  const again = srv.track(await RawClient.connect(srv.wsUrl()));
  t.match((await again.subscribe('calm-2')).data, { type: 'AuthError', error: /circuit breaker open/ }, 'the flooding app\'s breaker is open');
  t.equal((await other.subscribe('calm-3')).event, 'pusher_internal:subscription_succeeded', 'the other app\'s is not');
});

t.test('hook budgets: one connection subscribing at full speed is held to calls_per_second_per_connection; another connection is not', async (t) => {
  const backend = await startHookBackend();
  const srv = await startServer({ apps: [{ ...APP, hooks: { url: backend.url, subscribe: { enabled: true } } }], hook_client: { calls_per_second_per_connection: 5 } });
  t.teardown(async () => {
    await srv.stop();
    await backend.close();
  });
  const fast = srv.track(await RawClient.connect(srv.wsUrl()));
  const answers = [];
  for (let i = 0; i < 30; i++) answers.push(await fast.subscribe(`rate-${i}`));
  const refused = answers.filter((f) => f.event === 'pusher:subscription_error');
  t.ok(refused.length >= 20, `${refused.length} of 30 refused without a call`);
  t.match(refused[0].data, { type: 'AuthError', status: 403, error: /Too many backend hook calls from this connection \(hook_client.calls_per_second_per_connection: 5\/s\)/ });
  t.ok(backend.calls.length <= 10, `${backend.calls.length} calls reached the backend`);
  const calm = srv.track(await RawClient.connect(srv.wsUrl()));
  t.equal((await calm.subscribe('calm')).event, 'pusher_internal:subscription_succeeded', 'another connection is called as usual');
});
