// test-modes: once (its nodes have fixed shard counts)
// The adapter and cluster metrics on /metrics, each where it moves (docs/operations.md,
// "Metrics"), on a real backend (redis-server, nats-server) with node A in this process
// (metrics on, a prefix of its own) and node B a `ringcast start` child process:
//  - adapter_subscribe_total: the node's three subjects (pub, ctl, its own) once joined;
//  - adapter_publish_total: an API publish and a client event on A cross the backend (+1
//    each, B's subscriber gets them); a publish on B reaching A's subscriber does not count
//    on A;
//  - cluster_nodes_active: 1 alone, 2 with B, 1 after B is killed (-9);
//  - cluster_nodes_failed_total: +1 when the killed node is declared failed;
//  - cluster_heartbeat_failures_total: 0 while the backend is up, moves once it is killed;
// and message_send_errors_total on one node: a client that stops reading and keeps sending
// pusher:ping gets its pongs dropped by uWS once its queue is past the cap (each counted).

import t from 'tap';
import { startNode } from '../helpers/cluster';
import { APP, eventually, RawClient, startServer, type TestServer } from '../helpers/server';
import { metric, publish } from '../faults/api';
import { TcpWs } from '../faults/raw-ws';
import { startBackend, type Backend } from './backends';
import { startChild } from './child';

/** A prefix of its own: the names follow metrics.prefix. */
const PREFIX = 'rc_cluster_';
/** A dead node is declared failed within ~2.3 s; a live one on a loaded machine is not. */
const HEALTH = { enabled: true, heartbeat_interval_ms: 300, node_timeout_ms: 2000, cleanup_interval_ms: 300 };

/** Polls node A's /metrics until `name` (with the test's prefix) satisfies `ok`; returns the value. */
async function until(a: TestServer, name: string, ok: (v: number) => boolean, what: string, ms = 10_000): Promise<number> {
  let v = NaN;
  await eventually(async () => ok(v = await metric(a.server.metricsPort!, name, {}, PREFIX)), ms, `${name} ${what} (last seen: ${v})`);
  return v;
}

for (const name of ['redis', 'nats'] as const) {
  t.test(`${name}: adapter and cluster metrics`, async (t) => {
    const backend: Backend = await startBackend(name);
    t.teardown(() => backend.stop());
    const base = backend.config();
    const cfg = { ...base, workers: 2, apps: [{ ...APP }], adapter: { ...base.adapter!, cluster_health: HEALTH } };
    const a = await startNode(t, { ...cfg, metrics: { enabled: true, port: 0, host: '127.0.0.1', prefix: PREFIX } });
    const m = (metricName: string) => metric(a.server.metricsPort!, metricName, {}, PREFIX);

    t.equal(await m('adapter_subscribe_total'), 3, 'adapter_subscribe_total: the node\'s three subjects');
    t.equal(await m('cluster_nodes_active'), 1, 'cluster_nodes_active: 1 alone');
    t.equal(await m('adapter_publish_total'), 0, 'adapter_publish_total: nothing published yet');

    const { child, port: portB } = await startChild(t, (port) => ({ ...cfg, host: '127.0.0.1', port, log: { level: 'error' } }));
    await until(a, 'cluster_nodes_active', (v) => v === 2, 'to be 2 with node B');
    t.pass('cluster_nodes_active: 2 with node B');

    // a publish crossing the adapter: API and client event on A reach B's subscriber
    const onA = a.track(await RawClient.connect(a.wsUrl()));
    const onB = await RawClient.connect(`ws://127.0.0.1:${portB}/app/${APP.key}?protocol=7`);
    t.teardown(() => onB.close().catch(() => undefined));
    for (const c of [onA, onB]) t.equal((await c.subscribeAuthed('private-m')).event, 'pusher_internal:subscription_succeeded', 'subscribed');
    await a.sdk().trigger('private-m', 'from-a', {});
    await onB.event('from-a', 'private-m', 5000);
    t.equal(await m('adapter_publish_total'), 1, 'adapter_publish_total: +1 for the API publish on A');
    onA.send({ event: 'client-typing', channel: 'private-m', data: {} });
    await onB.event('client-typing', 'private-m', 5000);
    t.equal(await m('adapter_publish_total'), 2, 'adapter_publish_total: +1 for the client event on A');
    const r = await publish(portB, { name: 'from-b', channel: 'private-m', data: '{}' });
    t.equal(r.status, 200, 'publish on B');
    await onA.event('from-b', 'private-m', 5000);
    t.equal(await m('adapter_publish_total'), 2, 'adapter_publish_total: a publish of B that reached A is not A\'s');

    // node B dies without a word: declared failed
    t.equal(await m('cluster_nodes_failed_total'), 0, 'cluster_nodes_failed_total: 0 while B lives');
    child.kill('SIGKILL');
    await until(a, 'cluster_nodes_failed_total', (v) => v === 1, 'to be 1 after node B was killed');
    t.equal(await m('cluster_nodes_active'), 1, 'cluster_nodes_active: back to 1');
    t.pass('cluster_nodes_failed_total: 1 after node B was killed');

    // the backend goes away: the heartbeats cannot be sent
    t.equal(await m('cluster_heartbeat_failures_total'), 0, 'cluster_heartbeat_failures_total: 0 while the backend is up');
    await backend.kill();
    await until(a, 'cluster_heartbeat_failures_total', (v) => v >= 1, 'to move while the backend is down');
    t.pass('cluster_heartbeat_failures_total moves while the backend is down');
    await backend.resume();
    await eventually(() => a.server.cluster!.isUp(), 15_000, 'node A to reach the backend again');
  });
}

/** `n` pusher:ping frames as one client write (masked with a zero key, as RFC 6455 allows). */
function pings(n: number): Buffer {
  const payload = Buffer.from(JSON.stringify({ event: 'pusher:ping', data: {} }));
  const frame = Buffer.concat([Buffer.from([0x81, 0x80 | payload.length, 0, 0, 0, 0]), payload]);
  return Buffer.concat(Array.from({ length: n }, () => frame));
}

t.test('message_send_errors_total: replies uWS dropped for a socket over its cap', async (t) => {
  const srv = await startServer({
    // a small cap (uWS: 2 × max_bytes); drop: the socket stays open; no WebSocket pings to
    // a client that reads nothing; a frame budget that lets the pings through
    websocket: { max_bytes: 4096, on_backpressure: 'drop', auto_ping: false },
    limits: { frames_per_second: 1_000_000, frame_burst: 100_000_000 },
    metrics: { enabled: true, port: 0, host: '127.0.0.1' },
  });
  t.teardown(() => srv.stop());
  const port = srv.server.metricsPort!;
  const c = await TcpWs.connect(srv.port, `/app/${APP.key}?protocol=7&client=js&version=8.4.0`);
  t.teardown(() => c.destroy());
  await c.frame((f) => f.event === 'pusher:connection_established');
  c.send(JSON.stringify({ event: 'pusher:ping', data: {} }));
  await c.frame((f) => f.event === 'pusher:pong');
  t.equal(await metric(port, 'message_send_errors_total'), 0, '0 while the client reads');

  // the client stops reading and keeps pinging: the kernel buffers fill, then uWS's queue,
  // then each further pong is dropped (bounded: at most 200 × 5,000 pings, 20 s)
  c.pause();
  const batch = pings(5000);
  let sent = 0;
  for (const until = Date.now() + 20_000; ;) {
    if (await metric(port, 'message_send_errors_total') > 0) break;
    if (Date.now() > until || sent >= 200 * 5000) throw new Error(`no dropped reply counted after ${sent} pings`);
    await new Promise<void>((resolve) => c.socket.write(batch, () => resolve()));
    sent += 5000;
  }
  const errors = await metric(port, 'message_send_errors_total');
  t.ok(errors > 0 && errors < sent, `message_send_errors_total: ${errors} of ${sent} pongs dropped`);
  t.ok(await metric(port, 'websocket_messages_dropped_total') >= errors, 'each also counts as a dropped message');
  t.notOk(c.ended, 'the socket stays open (on_backpressure: drop)');
});
