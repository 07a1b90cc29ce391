// test-modes: once (its nodes have fixed shard counts)
// The NATS connection options of the cluster adapter against a real nats-server that
// requires credentials: `adapter.nats.user` + `adapter.nats.password`, then
// `adapter.nats.token`. With the right ones, a publish on node A reaches node B's
// subscriber; with wrong ones, startup fails naming the server and the refusal.
// `adapter.nats.prefix`: two clusters on one nats-server with different prefixes do not see
// each other's events (checked with a positive marker: a later event of the other cluster).

import t, { type Test } from 'tap';
import type { ConfigInput } from '../../src/config';
import { startNodePair } from '../helpers/cluster';
import { NatsServer } from '../helpers/nats';
import { RawClient, startServer } from '../helpers/server';

const WORKERS = 1;

async function crosses(t: Test, cfg: ConfigInput, channel: string): Promise<void> {
  const [a, b] = await startNodePair(t, { ...cfg, workers: WORKERS });
  const onB = b.track(await RawClient.connect(b.wsUrl()));
  await onB.subscribe(channel);
  await a.sdk().trigger(channel, 'hello', { from: 'a' });
  t.same(JSON.parse((await onB.event('hello', channel, 5000)).data as string), { from: 'a' }, 'node A\'s publish reached node B\'s subscriber');
}

async function refused(t: Test, cfg: ConfigInput, what: string): Promise<void> {
  const err = await startServer({ ...cfg, workers: WORKERS }).then(async (s) => { await s.stop(); return null; }, (e: Error) => e);
  t.match(err?.message, /nats adapter could not reach nats:\/\/127\.0\.0\.1:\d+.*Authorization Violation/, `${what}: startup fails naming the server and the refusal`);
}

t.test('adapter.nats.user and adapter.nats.password', async (t) => {
  const nats = await NatsServer.start({ user: 'ring', password: 'cast-secret' });
  t.teardown(() => nats.stop());
  const nodes = (user: string, password: string): ConfigInput => ({ adapter: { driver: 'nats', nats: { servers: [nats.url], user, password } } });
  await crosses(t, nodes('ring', 'cast-secret'), 'nats-userpass');
  await refused(t, nodes('ring', 'wrong'), 'a wrong password');
});

t.test('adapter.nats.token', async (t) => {
  const nats = await NatsServer.start({ token: 'ringcast-token' });
  t.teardown(() => nats.stop());
  const nodes = (token: string): ConfigInput => ({ adapter: { driver: 'nats', nats: { servers: [nats.url], token } } });
  await crosses(t, nodes('ringcast-token'), 'nats-token');
  await refused(t, nodes('another-token'), 'a wrong token');
});

t.test('adapter.nats.prefix: two clusters on one server stay apart', async (t) => {
  const nats = await NatsServer.start();
  t.teardown(() => nats.stop());
  const cluster = (prefix: string): ConfigInput => ({ workers: WORKERS, adapter: { driver: 'nats', nats: { servers: [nats.url], prefix } } });
  const [a1] = await startNodePair(t, cluster('blue'));
  const [a2, b2] = await startNodePair(t, cluster('green'));
  const onB2 = b2.track(await RawClient.connect(b2.wsUrl()));
  await onB2.subscribe('shared-name');
  await a1.sdk().trigger('shared-name', 'blue', {});
  await a2.sdk().trigger('shared-name', 'green', {});
  await onB2.event('green', 'shared-name', 5000);
  t.same(onB2.frames.filter((f) => f.channel === 'shared-name' && f.event === 'blue'), [],
    'the green node got its own cluster\'s event and not the blue cluster\'s, published before it');
});
