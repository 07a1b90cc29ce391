// test-modes: both
// adapter.when_down with the backend down (killed), on redis and nats: `refuse` (the
// default) answers API publishes 503 and refuses client events with pusher:error 4301,
// nothing delivered, not even to the node's own subscribers; `local` answers 200 and
// delivers to the node's own subscribers only. Once the backend is back both deliver
// everywhere again. "Nothing delivered" is checked with a positive marker: a publish after
// the backend is back, which the subscribers get after anything the refused one could
// have caused.

import t from 'tap';
import { signedPost } from '../helpers/http';
import { APP, eventually, RawClient, startServer, type Frame } from '../helpers/server';
import { startBackend } from './backends';

const CLIENT_APP = { ...APP, enable_client_messages: true };
const named = (c: RawClient, event: string): Frame[] => (c.frames as Frame[]).filter((f) => f.event === event);

for (const name of ['redis', 'nats'] as const) {
  t.test(`adapter.when_down over ${name}`, async (t) => {
    const backend = await startBackend(name);
    t.teardown(() => backend.stop());
    const refuse = await startServer({ ...backend.config(), apps: [CLIENT_APP] });
    t.teardown(() => refuse.stop());
    const local = await startServer({ ...backend.config(), apps: [CLIENT_APP], adapter: { ...backend.config().adapter, when_down: 'local' } });
    t.teardown(() => local.stop());
    const channel = `private-down-${name}`;
    const sub = async (srv: typeof refuse) => {
      const c = srv.track(await RawClient.connect(srv.wsUrl()));
      t.equal((await c.subscribeAuthed(channel)).event, 'pusher_internal:subscription_succeeded');
      return c;
    };
    const [r1, r2, l1] = [await sub(refuse), await sub(refuse), await sub(local)];

    await backend.kill();
    await eventually(() => !refuse.server.cluster!.isUp() && !local.server.cluster!.isUp(), 10_000, 'both nodes to see the backend down');

    const res = await signedPost(refuse.port, APP, 'events', { name: 'during', channel, data: '{}' });
    t.equal(res.status, 503, 'refuse: the publish is answered 503');
    t.match(res.json.error, /cluster backend is down: nothing was delivered/);
    t.equal(res.headers['retry-after'], '1');
    r1.send({ event: 'client-during', channel, data: {} });
    const err = await r1.event('pusher:error', undefined, 5000);
    t.equal((typeof err.data === 'string' ? JSON.parse(err.data) : err.data).code, 4301, 'refuse: the client event gets pusher:error 4301');
    t.match(JSON.stringify(err.data), /cluster backend is down/, 'saying why');

    const term = await signedPost(refuse.port, APP, 'users/u1/terminate_connections', {});
    t.equal(term.status, 503, 'refuse: terminating a user\'s connections is answered 503 too');
    t.match(term.json.error, /no connection was terminated/);

    const ok = await signedPost(local.port, APP, 'events', { name: 'during-local', channel, data: '{}' });
    t.equal(ok.status, 200, 'local: the publish is answered 200');
    await l1.event('during-local', channel, 5000);
    t.pass('local: delivered to the node\'s own subscriber');

    await backend.resume();
    await eventually(() => refuse.server.cluster!.isUp() && local.server.cluster!.isUp(), 20_000, 'both nodes to reconnect');
    // the marker: published after the backend is back, until it reaches the other node
    let n = 0;
    await eventually(async () => {
      await signedPost(refuse.port, APP, 'events', { name: 'after', channel, data: JSON.stringify({ n: ++n }) });
      return named(l1, 'after').length > 0;
    }, 20_000, 'a publish through the refusing node to reach the other node once the backend is back');
    await r2.event('after', channel, 5000);
    t.same(named(r2, 'during'), [], 'the refused publish reached no subscriber, not even on its own node');
    t.same(named(r2, 'client-during'), [], 'nor the refused client event');
    t.same(named(l1, 'during'), [], 'nor the other node');
  });
}
