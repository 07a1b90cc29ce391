// kill -9 of a node with presence members: the surviving node removes them (member_removed
// once to its clients) within node_timeout_ms + cleanup_interval_ms, counts the failure,
// and a node started again on the same port rejoins cleanly. The dying node is a real
// `ringcast start` child process (bin/ringcast.js; needs tsc first), for every backend.

import t from 'tap';
import { freePort } from '../helpers/net';
import { APP, eventually, RawClient, startServer, type Frame } from '../helpers/server';
import { settle } from '../helpers/settle';
import { BACKENDS, startBackend } from './backends';
import { HEALTH, startChild } from './child';

const data = (f: Frame) => (typeof f.data === 'string' ? JSON.parse(f.data) : f.data) as { user_id: string };

for (const name of BACKENDS) {
  t.test(`${name}: a node killed with members is cleaned up by the survivor`, async (t) => {
    const backend = await startBackend(name);
    t.teardown(() => backend.stop());
    const cfg = { ...backend.config(), workers: 2 };
    const a = await startServer({ ...cfg, adapter: { ...cfg.adapter, cluster_health: HEALTH } });
    t.teardown(() => a.stop());
    const port = await freePort();
    const childConfig = { ...cfg, host: '127.0.0.1', port, log: { level: 'error' }, apps: [{ ...APP }], adapter: { ...cfg.adapter, cluster_health: HEALTH } };
    const child = await startChild(t, childConfig, port);
    await eventually(() => a.server.cluster!.nodes().length === 2, 10_000, 'node A to see the child node');

    const channel = `presence-failure-${name}`;
    const watcher = a.track(await RawClient.connect(a.wsUrl()));
    await watcher.subscribeAuthed(channel, { user_id: 'watcher', user_info: {} });
    const first = await RawClient.connect(`ws://127.0.0.1:${port}/app/${APP.key}?protocol=7`);
    t.teardown(() => first.close().catch(() => undefined));
    t.equal((await first.subscribeAuthed(channel, { user_id: 'doomed', user_info: {} })).event, 'pusher_internal:subscription_succeeded');
    await watcher.next((f) => f.event === 'pusher_internal:member_added' && data(f).user_id === 'doomed', 5000);

    const killedAt = Date.now();
    child.kill('SIGKILL');
    await watcher.next((f) => f.event === 'pusher_internal:member_removed' && data(f).user_id === 'doomed', 10_000);
    const took = Date.now() - killedAt;
    t.ok(took <= HEALTH.node_timeout_ms + HEALTH.cleanup_interval_ms + HEALTH.heartbeat_interval_ms + 1000,
      `member_removed within node_timeout + cleanup (+ a heartbeat and slack): ${took} ms`);
    t.equal(a.server.cluster!.nodes().length, 1, 'the dead node is gone from the node table');
    await settle(a, watcher, channel);
    t.equal(watcher.frames.filter((f) => f.event === 'pusher_internal:member_removed').length, 0, 'member_removed only once');

    // the node comes back on the same port: it rejoins, its members are seen again
    await startChild(t, childConfig, port);
    await eventually(() => a.server.cluster!.nodes().length === 2, 10_000, 'node A to see the restarted node');
    const again = await RawClient.connect(`ws://127.0.0.1:${port}/app/${APP.key}?protocol=7`);
    t.teardown(() => again.close().catch(() => undefined));
    const snap = await again.subscribeAuthed(channel, { user_id: 'back', user_info: {} });
    t.equal(snap.event, 'pusher_internal:subscription_succeeded');
    await watcher.next((f) => f.event === 'pusher_internal:member_added' && data(f).user_id === 'back', 5000);
    t.pass('a member of the restarted node reaches node A');
  });
}
