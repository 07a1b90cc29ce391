// client-* events against the protocol "Client events": delivered to the other
// subscribers of a private or presence channel (never echoed), user_id added on
// presence, and every refusal is pusher:error 4301 with the channel while the
// connection stays open.

import t, { type Test } from 'tap';
import { sign } from '../helpers/auth';
import { connected, pusherJs } from '../helpers/pusher-js';
import { APP, RawClient, eventually, type Frame, type TestServer } from '../helpers/server';
import { settle, settleChannel } from '../helpers/settle';
import { scope, sharedServer, type Closable } from '../helpers/shared-server';

type App = { id: string; key: string; secret: string };
const NO_CLIENT = { id: 'quiet-id', key: 'quiet-key', secret: 'quiet-secret', enable_client_messages: false };
const SMALL = { id: 'small-id', key: 'small-key', secret: 'small-secret', max_event_payload_in_kb: 1 };
const SLOW = { id: 'slow-id', key: 'slow-key', secret: 'slow-secret', max_client_events_per_second: 5 };

// One server for the file (starting one costs seconds with several shards under tap).
const shared = sharedServer(t, { apps: [{ ...APP }, NO_CLIENT, SMALL, SLOW] });

/** Connects to `app` and subscribes (signing private/presence channels). */
async function member(srv: TestServer, keep: <C extends Closable>(c: C) => C, channel: string, app: App = APP, user?: { user_id: string | number; user_info?: unknown }): Promise<RawClient> {
  const c = keep(await RawClient.connect(srv.wsUrl(app.key)));
  let extra: Record<string, unknown> = {};
  if (channel.startsWith('presence-')) {
    const cd = JSON.stringify(user ?? { user_id: c.socketId });
    extra = { auth: sign(app, c.socketId, channel, cd), channel_data: cd };
  } else if (channel.startsWith('private-')) {
    extra = { auth: sign(app, c.socketId, channel) };
  }
  const s = await c.subscribe(channel, extra);
  if (s.event !== 'pusher_internal:subscription_succeeded') throw new Error(`subscribe ${channel} failed: ${JSON.stringify(s)}`);
  return c;
}

const isClient = (f: Frame) => f.event.startsWith('client-');
const isError = (f: Frame) => f.event === 'pusher:error';

/** Sends a client event and expects pusher:error 4301 naming the channel; the connection stays usable. */
async function expectRefused(t: Test, c: RawClient, frame: Record<string, unknown>, what: string) {
  c.send(frame);
  const err = await c.event('pusher:error');
  t.equal(err.data?.code, 4301, `${what}: code 4301`);
  t.equal(err.channel, frame.channel, `${what}: error names the channel`);
  t.type(err.data?.message, 'string', `${what}: message`);
  c.send({ event: 'pusher:ping', data: {} });
  await c.event('pusher:pong');
  t.equal(c.closeCode, null, `${what}: connection stays open`);
}

t.test('private channel: client events reach the other subscribers, not the sender', async (t) => {
  const srv = await shared();
  const keep = scope(t);
  const ch = 'private-chat';
  const [a, b, c] = [await member(srv, keep, ch), await member(srv, keep, ch), await member(srv, keep, ch)];
  const outsider = keep(await RawClient.connect(srv.wsUrl()));
  await outsider.subscribe('outsider-side'); // where its marker comes
  a.send({ event: 'client-msg', channel: ch, data: { text: 'hi' } });
  for (const r of [b, c]) {
    const got = await r.event('client-msg', ch);
    t.same(got, { event: 'client-msg', channel: ch, data: { text: 'hi' } }, 'delivered as sent, no user_id on private channels');
  }
  // data given as a JSON string stays a string
  b.send({ event: 'client-raw', channel: ch, data: '{"n":1}' });
  t.equal((await a.event('client-raw', ch)).data, '{"n":1}');
  t.equal((await c.event('client-raw', ch)).data, '{"n":1}');

  // Both events were written before their peers got them; the markers come after.
  await settle(srv, [a, b, c], ch);
  await settle(srv, outsider, 'outsider-side');
  t.same(a.frames.filter((f) => f.event === 'client-msg'), [], 'the sender does not get its own event');
  t.same(b.frames.filter((f) => f.event === 'client-raw'), [], 'nor does the other sender');
  t.same(outsider.frames.filter(isClient), [], 'a non-subscriber gets nothing');
  t.same([a, b, c].flatMap((x) => x.frames.filter(isError)), [], 'no errors');
});

t.test('presence channel: client events carry the sender\'s user_id', async (t) => {
  const srv = await shared();
  const keep = scope(t);
  const ch = 'presence-chat';
  const a = await member(srv, keep, ch, APP, { user_id: 'alice', user_info: { name: 'Alice' } });
  const b = await member(srv, keep, ch, APP, { user_id: 'bob' });
  const n = await member(srv, keep, ch, APP, { user_id: 7 });
  a.send({ event: 'client-typing', channel: ch, data: { on: true } });
  for (const r of [b, n]) {
    t.same(await r.event('client-typing', ch), { event: 'client-typing', channel: ch, data: { on: true }, user_id: 'alice' });
  }
  n.send({ event: 'client-typing', channel: ch, data: { on: false } });
  const fromN = await a.event('client-typing', ch);
  t.equal(fromN.user_id, 7, 'numeric user_id stays a number');
  t.equal((await b.event('client-typing', ch)).user_id, 7);
  await settle(srv, [a, b, n], ch);
  t.same(a.frames.filter(isClient), [], 'alice did not get her own event back');
  t.same(n.frames.filter(isClient), [], 'nor did user 7');
});

t.test('refusals: pusher:error 4301 with the channel, connection stays open', async (t) => {
  const srv = await shared();
  const keep = scope(t);

  const pub = await member(srv, keep, 'public-room');
  const pubPeer = await member(srv, keep, 'public-room');
  await expectRefused(t, pub, { event: 'client-x', channel: 'public-room', data: {} }, 'public channel');

  const ch = 'private-refusals';
  const a = await member(srv, keep, ch);
  const b = await member(srv, keep, ch);
  await expectRefused(t, a, { event: 'client-x', channel: 'private-elsewhere', data: {} }, 'not subscribed');
  await expectRefused(t, pub, { event: 'client-x', channel: ch, data: {} }, 'not subscribed (subscribed to others)');

  // Event name: at most max_event_name_length (200) characters, the client- prefix included.
  const name200 = 'client-' + 'n'.repeat(193);
  await expectRefused(t, a, { event: name200 + 'n', channel: ch, data: {} }, '201-character name');
  a.send({ event: name200, channel: ch, data: {} });
  await b.event(name200, ch);
  t.pass('a 200-character name is delivered');

  // After an unsubscribe the socket may no longer send.
  a.send({ event: 'pusher:unsubscribe', data: { channel: ch } });
  await expectRefused(t, a, { event: 'client-x', channel: ch, data: {} }, 'after unsubscribe');

  // Each refusal was answered after anything its handler might have sent on.
  await settle(srv, b, ch);
  await settle(srv, pubPeer, 'public-room');
  t.same(b.frames.filter((f) => f.event === 'client-x'), [], 'no refused event was delivered');
  t.same(pubPeer.frames.filter(isClient), [], 'nothing reached the public channel');
});

t.test('refusal: app with enable_client_messages false', async (t) => {
  const srv = await shared();
  const keep = scope(t);
  const ch = 'private-quiet';
  const a = await member(srv, keep, ch, NO_CLIENT);
  const b = await member(srv, keep, ch, NO_CLIENT);
  await expectRefused(t, a, { event: 'client-x', channel: ch, data: { a: 1 } }, 'client messages disabled');
  const p = 'presence-quiet';
  const pa = await member(srv, keep, p, NO_CLIENT, { user_id: 'pa' });
  const pb = await member(srv, keep, p, NO_CLIENT, { user_id: 'pb' });
  await expectRefused(t, pa, { event: 'client-x', channel: p, data: { a: 1 } }, 'client messages disabled (presence)');
  await settle(srv, b, ch, { app: NO_CLIENT });
  await settle(srv, pb, p, { app: NO_CLIENT });
  t.same(b.frames.filter(isClient), [], 'nothing delivered');
  t.same(pb.frames.filter(isClient), [], 'nothing delivered (presence)');
});

t.test('refusal: payload over max_event_payload_in_kb', async (t) => {
  const srv = await shared();
  const keep = scope(t);
  const ch = 'private-sizes';
  const a = await member(srv, keep, ch, SMALL);
  const b = await member(srv, keep, ch, SMALL);
  await expectRefused(t, a, { event: 'client-big', channel: ch, data: { blob: 'x'.repeat(2000) } }, '2 KB payload with a 1 KB limit');
  await expectRefused(t, a, { event: 'client-big', channel: ch, data: 'y'.repeat(2000) }, '2 KB string payload');
  a.send({ event: 'client-ok', channel: ch, data: { blob: 'x'.repeat(500) } });
  t.equal((await b.event('client-ok', ch)).data.blob.length, 500, 'a payload under the limit is delivered');
  t.same(b.frames.filter((f) => f.event === 'client-big'), [], 'the oversized ones were not');
});

t.test('refusal: rate over max_client_events_per_second', async (t) => {
  const srv = await shared();
  const keep = scope(t);
  const ch = 'private-rate';
  const a = await member(srv, keep, ch, SLOW);
  const b = await member(srv, keep, ch, SLOW);
  for (let i = 0; i < 10; i++) a.send({ event: 'client-burst', channel: ch, data: { i } });
  await eventually(() => a.frames.filter(isError).length + b.frames.filter((f) => f.event === 'client-burst').length >= 10, 3000, 'every burst event answered or delivered');
  const errors = a.frames.filter(isError);
  const delivered = b.frames.filter((f) => f.event === 'client-burst');
  t.ok(errors.length >= 5, `at least 5 of 10 refused (${errors.length})`);
  t.ok(delivered.length <= 5, `at most 5 delivered in that second (${delivered.length})`);
  t.equal(errors.length + delivered.length, 10);
  for (const e of errors) {
    t.equal(e.data?.code, 4301);
    t.equal(e.channel, ch);
  }
  t.same(delivered.map((f) => f.data.i), [0, 1, 2, 3, 4].slice(0, delivered.length), 'the first ones got through, in order');
  await a.sync(); // a close after the refusals would come before this round trip's answer
  t.equal(a.closeCode, null, 'the sender stays connected');

  // The allowance comes back after a second.
  await eventually(async () => {
    a.send({ event: 'client-later', channel: ch, data: {} });
    await new Promise((r) => setTimeout(r, 100));
    return b.frames.some((f) => f.event === 'client-later');
  }, 3000, 'a client event to go through again');
  t.pass('sending works again once the second has passed');
});

t.test('pusher-js: channel.trigger reaches another pusher-js client', async (t) => {
  const srv = await shared();
  const keep = scope(t);
  const one = keep(pusherJs(srv.port, { user: { user_id: 'one' } }));
  const two = keep(pusherJs(srv.port, { user: { user_id: 'two' } }));
  await Promise.all([connected(one), connected(two)]);
  const subscribed = (ch: any) => new Promise<void>((resolve, reject) => {
    ch.bind('pusher:subscription_succeeded', () => resolve());
    ch.bind('pusher:subscription_error', reject);
  });

  for (const name of ['private-pj-chat', 'presence-pj-chat']) {
    const ch1 = one.subscribe(name);
    const ch2 = two.subscribe(name);
    await Promise.all([subscribed(ch1), subscribed(ch2)]);
    const echoed: unknown[] = [];
    ch1.bind('client-hello', (d: unknown) => echoed.push(d));
    const got = new Promise<{ data: any; meta: any }>((resolve) => ch2.bind('client-hello', (data: any, meta: any) => resolve({ data, meta })));
    t.ok(ch1.trigger('client-hello', { from: 'one', on: name }), `${name}: trigger accepted by pusher-js`);
    const { data, meta } = await got;
    t.same(data, { from: 'one', on: name }, `${name}: delivered to the other client`);
    if (name.startsWith('presence-')) t.equal(meta?.user_id, 'one', 'presence: metadata carries the sender\'s user_id');
    await settleChannel(srv, ch1); // the event reached `two`: a marker published now comes after any echo
    t.same(echoed, [], `${name}: not echoed to the sender`);
  }
});
