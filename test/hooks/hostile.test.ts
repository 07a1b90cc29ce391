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
