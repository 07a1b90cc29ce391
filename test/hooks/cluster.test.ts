// test-modes: once (its nodes have fixed shard counts)
// The publish hook on a 2-node cluster (redis adapter): the node that takes the API request
// asks the backend once, before anything goes to the other node; a denied event reaches no
// node, a replaced one reaches both nodes replaced.

import t from 'tap';
import { startHookBackend } from '../helpers/hook-backend';
import { APP, RawClient, type Frame } from '../helpers/server';
import { startNodePair } from '../helpers/cluster';
import { startBackend } from '../adapter/backends';

const dataOf = (f: Frame) => (typeof f.data === 'string' ? JSON.parse(f.data) : f.data);

t.test('publish hook across two nodes: denied nowhere, replaced everywhere, called once', async (t) => {
  const redis = await startBackend('redis');
  t.teardown(() => redis.stop());
  const hooks = await startHookBackend();
  t.teardown(() => hooks.close());
  hooks.answer = (c) => {
    const d = c.body.data as string;
    if (d.includes('spam')) return { allow: false, reason: 'spam' };
    if (d.includes('darn')) return { allow: true, data: '{"text":"****"}' };
    return { allow: true };
  };
  const cfg = { ...redis.config(), workers: 2, apps: [{ ...APP, hooks: { url: hooks.url, publish: { enabled: true } } }] };
  const [a, b] = await startNodePair(t, cfg);
  const ca = a.track(await RawClient.connect(a.wsUrl()));
  const cb = b.track(await RawClient.connect(b.wsUrl()));
  await ca.subscribe('room');
  await cb.subscribe('room');

  const sdk = a.sdk();
  const denied = await sdk.trigger('room', 'msg', { text: 'spam' }).then(() => null, (e: { status: number; body: string }) => e);
  t.equal(denied?.status, 403);
  t.same(JSON.parse(denied!.body), { error: 'spam' });
  await sdk.trigger('room', 'msg', { text: 'darn' });
  for (const c of [ca, cb]) t.same(dataOf(await c.event('msg', 'room', 5000)), { text: '****' }, 'replaced on both nodes');
  await sdk.trigger('room', 'marker', {});
  for (const c of [ca, cb]) await c.event('marker', 'room', 5000);
  t.notOk([...ca.frames, ...cb.frames].some((f) => f.event === 'msg'), 'the denied event reached no node');
  t.equal(hooks.calls.length, 3, 'one call per publish, by the node that took it');
});
