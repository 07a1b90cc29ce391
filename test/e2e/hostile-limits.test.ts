// Per-client and per-process bounds (config `limits`, README "Limits and hostile
// clients"): subscriptions per connection, tag-filter values, the frame budget and the
// process-wide connection cap, each with the error a client gets and the connection
// (or the other sockets) going on afterwards.

import t from 'tap';
import WebSocket from 'ws';
import { loadConfig } from '../../src/config';
import { defaultConfig } from '../../src/config/defaults';
import { signedPost } from '../helpers/http';
import { RawClient, WORKERS, eventually, startServer } from '../helpers/server';
import { settle } from '../helpers/settle';

const SUCCEEDED = 'pusher_internal:subscription_succeeded';

t.test('the defaults are far above a real app', async (t) => {
  const l = defaultConfig().limits;
  t.equal(l.max_subscriptions_per_connection, 1000);
  t.equal(l.max_filter_values, 1000);
  t.equal(l.max_filter_values_per_connection, 10_000);
  t.equal(l.frames_per_second, 1000);
  t.equal(l.frame_burst, 4000);
  t.ok(l.max_connections >= 1024, `max_connections ${l.max_connections}`);
  t.equal(l.http_body_bytes_in_flight, 64 * 1024 * 1024);
});

t.test('limits are validated, each message naming the key', async (t) => {
  const load = (limits: Record<string, unknown>, more: Record<string, unknown> = {}) =>
    () => loadConfig({ env: {}, overrides: { apps: [{ id: 'a', key: 'k', secret: 's' }], limits, ...more } });
  t.throws(load({ max_subscriptions_per_connection: 0 }), /limits\.max_subscriptions_per_connection must be an integer between 1 and 10000000/);
  t.throws(load({ frames_per_second: 1.5 }), /limits\.frames_per_second must be an integer between 1 and 1000000/);
  t.throws(load({ max_connections: null }), /limits\.max_connections must be an integer/);
  t.throws(load({ http_body_bytes_in_flight: 1024 * 1024 }, { http: { request_limit_in_mb: 2 } }),
    /limits\.http_body_bytes_in_flight must be ≥ http\.request_limit_in_mb MiB \(2097152\)/);
  t.throws(load({ max_subscriptions: 5 }), /max_subscriptions/, 'an unknown key');
});

t.test(`subscriptions per connection, workers: ${WORKERS}`, async (t) => {
  const srv = await startServer({ limits: { max_subscriptions_per_connection: 5 } });
  t.teardown(() => srv.stop());
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  for (let i = 0; i < 5; i++) t.equal((await c.subscribe(`ch-${i}`)).event, SUCCEEDED, `ch-${i} accepted`);
  const f = await c.subscribe('ch-5');
  t.equal(f.event, 'pusher:subscription_error', 'the sixth is refused');
  t.match(f.data, { type: 'LimitReached', status: 4100, error: /subscribed to 5 channels.*limits\.max_subscriptions_per_connection/ });
  t.equal((await c.subscribe('ch-0')).event, SUCCEEDED, 'a repeated subscribe of a channel it holds is still answered');
  c.send({ event: 'pusher:unsubscribe', data: { channel: 'ch-0' } });
  t.equal((await c.subscribe('ch-5')).event, SUCCEEDED, 'the connection stayed open: after an unsubscribe, a new one is accepted');
  // The refused channel really is not subscribed: an event on it does not arrive, the one after it on ch-5 does.
  const other = srv.track(await RawClient.connect(srv.wsUrl()));
  t.equal((await other.subscribe('ch-6')).event, SUCCEEDED, 'another connection has its own count');
  t.equal(c.closeCode, null);
});

t.test(`tag-filter values, workers: ${WORKERS}`, async (t) => {
  const srv = await startServer({ tag_filtering: { enabled: true }, limits: { max_filter_values: 100, max_filter_values_per_connection: 250 } });
  t.teardown(() => srv.stop());
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  const vals = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `v${from + i}`);
  const tooMany = await c.subscribe('f-0', { filter: { op: 'or', nodes: [{ key: 'k', cmp: 'in', vals: vals(60) }, { key: 'j', cmp: 'nin', vals: vals(41) }] } });
  t.equal(tooMany.event, 'pusher:subscription_error', '101 values over two nodes of one filter: refused');
  t.match(tooMany.data, { type: 'InvalidFilter', status: 4000, error: /more than 100 "in" \/ "nin" values \(limits\.max_filter_values\)/ });
  t.equal((await c.subscribe('f-1', { filter: { key: 'k', cmp: 'in', vals: vals(100) } })).event, SUCCEEDED, '100 values: accepted');
  t.equal((await c.subscribe('f-2', { filter: { key: 'k', cmp: 'in', vals: vals(100, 100) } })).event, SUCCEEDED, '200 on the connection');
  const over = await c.subscribe('f-3', { filter: { key: 'k', cmp: 'nin', vals: vals(51) } });
  t.equal(over.event, 'pusher:subscription_error', '251 on the connection: refused');
  t.match(over.data, { type: 'LimitReached', status: 4100, error: /hold 200 .*51 more.*250 allowed \(limits\.max_filter_values_per_connection\)/ });
  t.equal((await c.subscribe('f-3', { filter: { key: 'k', cmp: 'nin', vals: vals(50) } })).event, SUCCEEDED, '250: accepted');
  c.send({ event: 'pusher:unsubscribe', data: { channel: 'f-1' } });
  t.equal((await c.subscribe('f-4', { filter: { key: 'k', cmp: 'in', vals: vals(100, 500) } })).event, SUCCEEDED, 'an unsubscribe gives its values back');

  // A long `in` list (past the 64 native pair topics of channels/filtered.ts) is matched
  // through the filter's shared topic: the events it names arrive, the others do not.
  t.equal((await c.subscribe('marks')).event, SUCCEEDED);
  const pub = (tag: string, name: string) => signedPost(srv.port, srv.config.apps[0], 'events', { name, channel: 'f-2', data: '{}', tags: { k: tag } });
  t.equal((await pub('v150', 'hit')).status, 200);
  t.equal((await pub('v50', 'miss')).status, 200);
  t.equal((await pub('v199', 'hit-last')).status, 200);
  await settle(srv, c, 'marks'); // an untagged marker would not reach the filtered channel
  t.same(c.frames.filter((f) => f.channel === 'f-2').map((f) => f.event), ['hit', 'hit-last'], 'a 100-value filter gets exactly its events');
});

t.test(`frame budget, workers: ${WORKERS}`, async (t) => {
  const srv = await startServer({ limits: { frames_per_second: 50, frame_burst: 200 } });
  t.teardown(() => srv.stop());
  const honest = srv.track(await RawClient.connect(srv.wsUrl()));
  // A burst the size of frame_burst (say, subscribes at connect) is fine.
  for (let i = 0; i < 150; i++) honest.send({ event: 'pusher:subscribe', data: { channel: `b-${i}` } });
  await eventually(() => honest.frames.filter((f) => f.event === SUCCEEDED).length === 150, 5000, '150 subscribes answered');
  t.notOk(honest.frames.some((f) => f.event === 'pusher:error'), 'no error for a burst within frame_burst');

  const flooder = srv.track(await RawClient.connect(srv.wsUrl()));
  for (let i = 0; i < 300; i++) flooder.send({ event: 'pusher:ping', data: {} });
  const err = await flooder.event('pusher:error');
  t.match(err.data, { code: 4301, message: /Too many frames: at most 50 per second .*limits\.frames_per_second.*closed \(4100\)/ }, 'first drop: 4301, stays open');
  const pongs = flooder.frames.filter((f) => f.event === 'pusher:pong').length;
  t.ok(pongs <= 230 && pongs >= 150, `frames past the burst were dropped (${pongs} pongs for 300 pings)`);
  t.equal(flooder.closeCode, null, 'not closed yet');
  for (let i = 0; i < 300; i++) if (flooder.closeCode === null) flooder.send({ event: 'pusher:ping', data: {} });
  t.equal(await flooder.closed(5000), 4100, 'still flooding: closed with 4100 (back off, then reconnect)');
  const last = flooder.frames.filter((f) => f.event === 'pusher:error').pop();
  t.match(last?.data, { code: 4100, message: /Over capacity: frames kept coming past the frame budget/ });
  // The honest socket was not touched.
  honest.send({ event: 'pusher:ping', data: {} });
  await honest.event('pusher:pong');
  t.equal(honest.closeCode, null);
});

t.test(`process connection cap, workers: ${WORKERS}`, async (t) => {
  const srv = await startServer({ limits: { max_connections: 3 } });
  t.teardown(() => srv.stop());
  const open: RawClient[] = [];
  for (let i = 0; i < 3; i++) open.push(srv.track(await RawClient.connect(srv.wsUrl())));
  t.ok(open.every((c) => c.socketId !== ''), 'three connections established');
  const fourth = srv.track(new RawClient(new WebSocket(srv.wsUrl())));
  t.match((await fourth.event('pusher:error')).data, { code: 4100, message: /at most 3 connections \(limits\.max_connections\)/ }, 'the fourth: pusher:error 4100');
  t.notOk(fourth.frames.some((f) => f.event === 'pusher:connection_established'), 'the fourth is not established');
  t.equal(await fourth.closed(), 4100, 'closed with 4100 (over capacity)');
  await open[0].close();
  await eventually(async () => {
    const c = srv.track(await RawClient.connect(srv.wsUrl()));
    if (c.socketId !== '') return true;
    await c.closed();
    return false;
  }, 5000, 'a slot given back is taken again');
});
