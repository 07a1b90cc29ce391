// Every webhook event type against a real HTTP receiver, field by field (the protocol
// "Webhooks"), with the signature checked by the `pusher` SDK's webhook() verifier, the
// endpoint's custom headers, and each endpoint getting only its event_types.

import t from 'tap';
import { APP, RawClient, startServer, type TestServer } from '../helpers/server';
import { sdkValid, startReceiver, type Receiver } from './receiver';

let srv: TestServer;
let all: Receiver;
let onlyClient: Receiver;

t.before(async () => {
  all = await startReceiver('/all');
  onlyClient = await startReceiver('/client');
  srv = await startServer({
    apps: [{
      ...APP,
      webhooks: [
        {
          url: all.url,
          event_types: ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed', 'client_event', 'cache_miss', 'subscription_count'],
          headers: { 'X-Custom': 'custom-value' },
        },
        { url: onlyClient.url, event_types: ['client_event'] },
      ],
    }],
  });
});
t.teardown(async () => {
  await srv?.stop();
  await all?.close();
  await onlyClient?.close();
});

type Ev = Record<string, unknown>;
const named = (name: string, channel: string) => (e: Ev) => e.name === name && e.channel === channel;
async function waitEvent(r: Receiver, pred: (e: Ev) => boolean, what: string): Promise<Ev> {
  await r.until((reqs) => reqs.some((q) => q.body.events.some(pred)), 10_000, what);
  return r.events().find(pred)!;
}

t.test('channel_occupied, subscription_count, channel_vacated of a public channel', async (t) => {
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  const before = Date.now();
  t.equal((await c.subscribe('public-one')).event, 'pusher_internal:subscription_succeeded');
  const occ = await waitEvent(all, named('channel_occupied', 'public-one'), 'channel_occupied');
  t.same(occ, { name: 'channel_occupied', channel: 'public-one' }, 'occupied: name and channel only');
  const cnt = await waitEvent(all, named('subscription_count', 'public-one'), 'subscription_count');
  t.same(cnt, { name: 'subscription_count', channel: 'public-one', subscription_count: 1 });
  c.send({ event: 'pusher:unsubscribe', data: { channel: 'public-one' } });
  const vac = await waitEvent(all, named('channel_vacated', 'public-one'), 'channel_vacated');
  t.same(vac, { name: 'channel_vacated', channel: 'public-one' });
  const req = all.requests.find((r) => r.body.events.some(named('channel_occupied', 'public-one')))!;
  t.same(Object.keys(req.body).sort(), ['events', 'time_ms'], 'body: time_ms and events');
  t.ok(Number.isInteger(req.body.time_ms) && req.body.time_ms >= before - 5 && req.body.time_ms <= Date.now(), 'time_ms: integer ms, now');
  t.equal(req.path, '/all');
  t.equal(req.headers['content-type'], 'application/json');
  t.equal(req.headers['x-pusher-key'], APP.key, 'X-Pusher-Key: the app key');
  t.match(req.headers['x-pusher-signature'], /^[0-9a-f]{64}$/, 'X-Pusher-Signature: hex HMAC-SHA256');
  t.equal(req.headers['x-custom'], 'custom-value', "the endpoint's custom header");
  t.notOk(onlyClient.requests.some((r) => r.body.events.some((e) => e.name !== 'client_event')), 'the client-only endpoint got no channel events');
});

t.test('member_added / member_removed with user_id as given; occupied before the first member', async (t) => {
  const ch = 'presence-room';
  const a = srv.track(await RawClient.connect(srv.wsUrl()));
  const b = srv.track(await RawClient.connect(srv.wsUrl()));
  await a.subscribeAuthed(ch, { user_id: 'u-1', user_info: { name: 'A' } });
  await b.subscribeAuthed(ch, { user_id: 42, user_info: { name: 'B' } });
  const added1 = await waitEvent(all, (e) => e.name === 'member_added' && e.user_id === 'u-1', 'member_added u-1');
  t.same(added1, { name: 'member_added', channel: ch, user_id: 'u-1' });
  const added2 = await waitEvent(all, (e) => e.name === 'member_added' && e.user_id === 42, 'member_added 42');
  t.same(added2, { name: 'member_added', channel: ch, user_id: 42 }, 'a numeric user_id stays a number');
  const evs = all.events().filter((e) => e.channel === ch).map((e) => e.name);
  t.same(evs.slice(0, 2), ['channel_occupied', 'member_added'], 'occupied, then member_added');
  t.notOk(evs.includes('subscription_count'), 'no subscription_count webhook on a presence channel');
  await b.close();
  const removed = await waitEvent(all, (e) => e.name === 'member_removed' && e.user_id === 42, 'member_removed 42');
  t.same(removed, { name: 'member_removed', channel: ch, user_id: 42 });
  await a.close();
  await waitEvent(all, named('channel_vacated', ch), 'channel_vacated');
  const tail = all.events().filter((e) => e.channel === ch).map((e) => e.name);
  t.same(tail.slice(-2), ['member_removed', 'channel_vacated'], 'the last member leaves, then the channel is vacated');
});

t.test('client_event: private (data string / object) and presence (user_id); filtered per endpoint', async (t) => {
  const a = srv.track(await RawClient.connect(srv.wsUrl()));
  const b = srv.track(await RawClient.connect(srv.wsUrl()));
  await a.subscribeAuthed('private-chat');
  await b.subscribeAuthed('private-chat');
  a.send({ event: 'client-typing', channel: 'private-chat', data: '{"who":"a"}' });
  a.send({ event: 'client-obj', channel: 'private-chat', data: { n: 1 } });
  await b.event('client-obj', 'private-chat');
  const s = await waitEvent(all, (e) => e.event === 'client-typing', 'client_event (string)');
  t.same(s, { name: 'client_event', channel: 'private-chat', event: 'client-typing', data: '{"who":"a"}', socket_id: a.socketId });
  const o = await waitEvent(all, (e) => e.event === 'client-obj', 'client_event (object)');
  t.same(o, { name: 'client_event', channel: 'private-chat', event: 'client-obj', data: '{"n":1}', socket_id: a.socketId }, 'an object is sent as its JSON string');

  await a.subscribeAuthed('presence-chat', { user_id: 'alice' });
  await b.subscribeAuthed('presence-chat', { user_id: 'bob' });
  b.send({ event: 'client-hi', channel: 'presence-chat', data: { x: true } });
  const p = await waitEvent(all, (e) => e.event === 'client-hi', 'client_event (presence)');
  t.same(p, { name: 'client_event', channel: 'presence-chat', event: 'client-hi', data: '{"x":true}', socket_id: b.socketId, user_id: 'bob' });

  await onlyClient.until((r) => r.some((q) => q.body.events.some((e) => e.event === 'client-hi')), 10_000, 'client-only endpoint');
  t.same([...new Set(onlyClient.events().map((e) => e.name))], ['client_event'], 'client-only endpoint: client_event only');
  t.same(onlyClient.events().map((e) => e.event), ['client-typing', 'client-obj', 'client-hi']);
});

t.test('cache_miss on subscribing to an empty cache channel', async (t) => {
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  await c.subscribe('cache-empty');
  await c.event('pusher:cache_miss', 'cache-empty');
  const e = await waitEvent(all, named('cache_miss', 'cache-empty'), 'cache_miss');
  t.same(e, { name: 'cache_miss', channel: 'cache-empty' });
});

t.test("every request passes the pusher SDK's webhook() verifier; a wrong secret does not", async (t) => {
  t.ok(all.requests.length > 5);
  for (const r of [...all.requests, ...onlyClient.requests]) t.ok(sdkValid(r), `valid: ${r.rawBody.slice(0, 80)}`);
  t.notOk(sdkValid(all.requests[0], { ...APP, secret: 'other' }), 'another secret: invalid');
});

t.test('header names are configurable (webhooks.key_header / signature_header)', async (t) => {
  const r = await startReceiver();
  const s = await startServer({
    webhooks: { key_header: 'X-Service-Key', signature_header: 'X-Service-Signature' },
    apps: [{ ...APP, webhooks: [{ url: r.url, event_types: ['channel_occupied'] }] }],
  });
  t.teardown(async () => { await s.stop(); await r.close(); });
  const c = s.track(await RawClient.connect(s.wsUrl()));
  await c.subscribe('named-headers');
  await r.until((q) => q.length > 0);
  const q = r.requests[0];
  t.equal(q.headers['x-service-key'], APP.key);
  t.match(q.headers['x-service-signature'], /^[0-9a-f]{64}$/);
  t.notOk('x-pusher-signature' in q.headers, 'not the default name');
  t.ok(sdkValid({ ...q, headers: { ...q.headers, 'x-pusher-key': q.headers['x-service-key'], 'x-pusher-signature': q.headers['x-service-signature'] } }), 'same signature');
});
