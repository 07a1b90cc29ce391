// test-modes: once (its nodes have fixed shard counts)
// test-split: LOGIC_BACKENDS (every test is inside the loop over the backends: one process per backend)
// kill -9 of a node with presence members: the surviving node removes them (member_removed
// once to its clients) within node_timeout_ms + cleanup_interval_ms, counts the failure,
// and a node started again on the same port rejoins cleanly. The dying node is a real
// `ringcast start` child process (bin/ringcast.js; needs tsc first), for every backend.

import t from 'tap';
import { APP, eventually, RawClient, startServer, type Frame } from '../helpers/server';
import { settle } from '../helpers/settle';
import { ownerOf } from '../../src/channels/owner';
import { startReceiver } from '../webhooks/receiver';
import { LOGIC_BACKENDS as BACKENDS, startBackend } from './backends';
import { HEALTH, startChild } from './child';

const data = (f: Frame) => (typeof f.data === 'string' ? JSON.parse(f.data) : f.data) as { user_id: string };

for (const name of BACKENDS) {
  t.test(`${name}: a node killed with members is cleaned up by the survivor`, async (t) => {
    const backend = await startBackend(name);
    t.teardown(() => backend.stop());
    const r = await startReceiver();
    t.teardown(() => r.close());
    const hooks = [{ url: r.url, event_types: ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed'] }];
    const cfg = { ...backend.config(), workers: 2, apps: [{ ...APP, webhooks: hooks }] };
    const a = await startServer({ ...cfg, adapter: { ...cfg.adapter, cluster_health: HEALTH } });
    t.teardown(() => a.stop());
    const childConfig = (port: number) => ({ ...cfg, host: '127.0.0.1', port, log: { level: 'error' }, adapter: { ...cfg.adapter, cluster_health: HEALTH } });
    const { child, port } = await startChild(t, childConfig);
    await eventually(() => a.server.cluster!.nodes().length === 2, 10_000, 'node A to see the child node');

    const channel = `presence-failure-${name}`;
    const watcher = a.track(await RawClient.connect(a.wsUrl()));
    await watcher.subscribeAuthed(channel, { user_id: 'watcher', user_info: {} });
    const first = await RawClient.connect(`ws://127.0.0.1:${port}/app/${APP.key}?protocol=7`);
    t.teardown(() => first.close().catch(() => undefined));
    t.equal((await first.subscribeAuthed(channel, { user_id: 'doomed', user_info: {} })).event, 'pusher_internal:subscription_succeeded');
    await watcher.next((f) => f.event === 'pusher_internal:member_added' && data(f).user_id === 'doomed', 5000);
    // a channel only the doomed node has
    const alone = `alone-${name}`;
    await first.subscribe(alone);
    const hooked = (event: string, ch: string, user?: string) =>
      r.events().filter((e) => e.name === event && e.channel === ch && (user === undefined || e.user_id === user)).length;
    await r.until(() => hooked('channel_occupied', alone) === 1 && hooked('member_added', channel, 'doomed') === 1, 10_000, 'the child node\'s webhooks');

    const killedAt = Date.now();
    child.kill('SIGKILL');
    await watcher.next((f) => f.event === 'pusher_internal:member_removed' && data(f).user_id === 'doomed', 10_000);
    const took = Date.now() - killedAt;
    t.ok(took <= HEALTH.node_timeout_ms + HEALTH.cleanup_interval_ms + HEALTH.heartbeat_interval_ms + 1000,
      `member_removed within node_timeout + cleanup (+ a heartbeat and slack): ${took} ms`);
    t.equal(a.server.cluster!.nodes().length, 1, 'the dead node is gone from the node table');
    await settle(a, watcher, channel);
    t.equal(watcher.frames.filter((f) => f.event === 'pusher_internal:member_removed').length, 0, 'member_removed only once');
    // the survivor sends the dead node's webhooks, once (markers: a channel per owner shard of node A)
    await r.until(() => hooked('member_removed', channel, 'doomed') > 0 && hooked('channel_vacated', alone) > 0, 10_000, 'the dead node\'s webhooks');
    for (let s = 0, k = 0; s < 2; k++) {
      const marker = `marker-failure-${name}-${k}`;
      if (ownerOf(APP.id, marker, 2) !== s) continue;
      await watcher.subscribe(marker);
      await r.until(() => hooked('channel_occupied', marker) === 1, 10_000, `marker ${marker}`);
      s++;
    }
    t.equal(hooked('member_removed', channel, 'doomed'), 1, 'member_removed webhook once');
    t.equal(hooked('channel_vacated', alone), 1, 'channel_vacated webhook once');
    t.equal(hooked('channel_vacated', channel), 0, 'the watcher\'s channel is still occupied');

    // the node comes back on the same port: it rejoins, its members are seen again
    await startChild(t, childConfig, { port });
    await eventually(() => a.server.cluster!.nodes().length === 2, 10_000, 'node A to see the restarted node');
    const again = await RawClient.connect(`ws://127.0.0.1:${port}/app/${APP.key}?protocol=7`);
    t.teardown(() => again.close().catch(() => undefined));
    const snap = await again.subscribeAuthed(channel, { user_id: 'back', user_info: {} });
    t.equal(snap.event, 'pusher_internal:subscription_succeeded');
    await watcher.next((f) => f.event === 'pusher_internal:member_added' && data(f).user_id === 'back', 5000);
    t.pass('a member of the restarted node reaches node A');
  });
}
