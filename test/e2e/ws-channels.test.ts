// Subscriptions against the protocol "Subscribe", "Channels" and the subscription_error
// table: public, private, private-encrypted and presence channels, auth failures,
// channel name rules, presence member lifecycle and the presence limits.
// Signatures are made by the `pusher` server SDK (as an application would) or by
// node:crypto directly (test/helpers/auth.ts), never by the server's own helpers.

import t, { type Test } from 'tap';
import { sign } from '../helpers/auth';
import { connected, pusherJs } from '../helpers/pusher-js';
import { APP, RawClient, eventually, type Frame, type TestServer } from '../helpers/server';
import { settle } from '../helpers/settle';
import { scope, sharedServer } from '../helpers/shared-server';

type App = { id: string; key: string; secret: string };
const LIMITS = {
  id: 'limits-id', key: 'limits-key', secret: 'limits-secret',
  max_presence_members_per_channel: 2, max_presence_member_size_in_kb: 1,
};

// One server for the file (starting one costs seconds with several shards under tap);
// every test uses its own channel names.
const shared = sharedServer(t, { apps: [{ ...APP }, LIMITS] });

/** Data of a frame, parsed when it is a JSON string. */
function json(f: Frame): any {
  return typeof f.data === 'string' ? JSON.parse(f.data) : f.data;
}

/** The owner's subscription_count of a channel (it counts a leave once it has handled it). */
async function subscriptionCount(srv: TestServer, channel: string, app: App = APP): Promise<number> {
  const res = await srv.sdk(app).get({ path: `/channels/${channel}`, params: { info: 'subscription_count' } });
  return ((await res.json()) as { subscription_count: number }).subscription_count;
}

async function alive(c: RawClient): Promise<boolean> {
  c.send({ event: 'pusher:ping', data: {} });
  await c.event('pusher:pong');
  return c.closeCode === null;
}

/** Presence subscribe with auth and channel_data from the `pusher` SDK. */
function joinPresence(srv: TestServer, c: RawClient, channel: string, member: { user_id: string | number; user_info?: unknown }, app: App = APP) {
  const a = srv.sdk(app).authorizeChannel(c.socketId, channel, member as { user_id: string });
  return c.subscribe(channel, { auth: a.auth, channel_data: a.channel_data });
}

function expectSubError(t: Test, f: Frame, channel: string, type: string, status: number, what: string) {
  t.equal(f.event, 'pusher:subscription_error', `${what}: subscription_error`);
  t.equal(f.channel, channel, `${what}: channel`);
  t.equal(f.data?.type, type, `${what}: type ${type}`);
  t.equal(f.data?.status, status, `${what}: status ${status}`);
  t.type(f.data?.error, 'string', `${what}: error message`);
}

t.test('public channel: subscribe, receive, unsubscribe stops delivery', async (t) => {
  const srv = await shared();
  const keep = scope(t);
  const a = keep(await RawClient.connect(srv.wsUrl()));
  const b = keep(await RawClient.connect(srv.wsUrl()));
  const ch = 'pub-lifecycle';
  // Where a and b get their markers once they have left ch (test/helpers/settle.ts).
  const side = 'pub-lifecycle-side';
  for (const c of [a, b]) await c.subscribe(side);
  const sa = await a.subscribe(ch);
  t.same(sa, { event: 'pusher_internal:subscription_succeeded', channel: ch, data: '{}' }, 'succeeded with data "{}"');
  // subscribe data may also be a JSON string
  b.send({ event: 'pusher:subscribe', data: JSON.stringify({ channel: ch }) });
  const sb = await b.event('pusher_internal:subscription_succeeded', ch);
  t.equal(sb.data, '{}', 'subscribe with data as a JSON string');

  await srv.sdk().trigger(ch, 'news', { n: 1 });
  for (const c of [a, b]) {
    const ev = await c.event('news', ch);
    t.same(json(ev), { n: 1 }, 'event delivered to each subscriber');
  }

  a.send({ event: 'pusher:unsubscribe', data: { channel: ch } });
  t.ok(await alive(a), 'the unsubscribe has been read (pong after it)');
  await srv.sdk().trigger(ch, 'news', { n: 2 });
  t.same(json(await b.event('news', ch)), { n: 2 }, 'the remaining subscriber still receives');
  await settle(srv, a, side);
  t.same(a.frames.filter((f) => f.event === 'news'), [], 'no event after unsubscribe');

  // unsubscribe data as a JSON string, then subscribe again
  b.send({ event: 'pusher:unsubscribe', data: JSON.stringify({ channel: ch }) });
  t.ok(await alive(b));
  await srv.sdk().trigger(ch, 'news', { n: 3 });
  await settle(srv, b, side);
  t.same(b.frames.filter((f) => f.event === 'news'), [], 'no event after unsubscribe (string data)');
  t.equal((await b.subscribe(ch)).event, 'pusher_internal:subscription_succeeded', 'subscribing again works');
  await srv.sdk().trigger(ch, 'news', { n: 4 });
  t.same(json(await b.event('news', ch)), { n: 4 }, 'delivery resumes after subscribing again');
  await settle(srv, a, side);
  t.same(a.frames.filter((f) => f.event === 'news'), [], 'the unsubscribed client got nothing');
});

t.test('private and private-encrypted: valid auth → subscription_succeeded with data "{}"', async (t) => {
  const srv = await shared();
  const keep = scope(t);
  const c = keep(await RawClient.connect(srv.wsUrl()));
  const bySdk = await c.subscribe('private-ok', { auth: srv.sdk().authorizeChannel(c.socketId, 'private-ok').auth });
  t.same(bySdk, { event: 'pusher_internal:subscription_succeeded', channel: 'private-ok', data: '{}' }, 'private: succeeded');
  // (the SDK only signs private-encrypted channels when given a master key; the signature is the same HMAC)
  const enc = await c.subscribe('private-encrypted-ok', { auth: sign(APP, c.socketId, 'private-encrypted-ok') });
  t.same(enc, { event: 'pusher_internal:subscription_succeeded', channel: 'private-encrypted-ok', data: '{}' }, 'private-encrypted: succeeded');
  const c2 = keep(await RawClient.connect(srv.wsUrl()));
  const s = await c2.subscribe('private-ok', { auth: sign(APP, c2.socketId, 'private-ok') });
  t.equal(s.event, 'pusher_internal:subscription_succeeded', 'signature made with node:crypto accepted too');
  await srv.sdk().trigger('private-ok', 'secret-news', { x: 1 });
  t.same(json(await c.event('secret-news', 'private-ok')), { x: 1 });
  t.same(json(await c2.event('secret-news', 'private-ok')), { x: 1 });
});

t.test('private, private-encrypted and presence: bad or missing auth → AuthError 401, connection stays', async (t) => {
  const srv = await shared();
  const keep = scope(t);
  const c = keep(await RawClient.connect(srv.wsUrl()));
  const other = keep(await RawClient.connect(srv.wsUrl()));
  const wrongApp = { ...APP, secret: 'not-the-secret' };
  for (const ch of ['private-denied', 'private-encrypted-denied']) {
    const cases: [string, Record<string, unknown>][] = [
      ['missing auth', {}],
      ['empty auth', { auth: '' }],
      ['auth not a string', { auth: 12345 }],
      ['zero signature', { auth: `${APP.key}:${'0'.repeat(64)}` }],
      ['signed for another socket', { auth: sign(APP, other.socketId, ch) }],
      ['signed for another channel', { auth: sign(APP, c.socketId, `${ch}-other`) }],
      ['signed with another secret', { auth: sign(wrongApp, c.socketId, ch) }],
      ['right signature, wrong key', { auth: `wrong-key:${sign(APP, c.socketId, ch).split(':')[1]}` }],
      ['signature without key', { auth: sign(APP, c.socketId, ch).split(':')[1] }],
      ['uppercase hex', { auth: `${APP.key}:${sign(APP, c.socketId, ch).split(':')[1].toUpperCase()}` }],
    ];
    for (const [what, extra] of cases) {
      expectSubError(t, await c.subscribe(ch, extra), ch, 'AuthError', 401, `${ch} ${what}`);
    }
  }
  const pch = 'presence-denied';
  const cd = JSON.stringify({ user_id: 'u1' });
  const presenceCases: [string, Record<string, unknown>][] = [
    ['missing auth', { channel_data: cd }],
    ['missing channel_data', { auth: sign(APP, c.socketId, pch) }],
    ['channel_data not JSON', { auth: sign(APP, c.socketId, pch, 'nope{'), channel_data: 'nope{' }],
    ['channel_data without user_id', { auth: sign(APP, c.socketId, pch, '{"user_info":{}}'), channel_data: '{"user_info":{}}' }],
    ['user_id null', { auth: sign(APP, c.socketId, pch, '{"user_id":null}'), channel_data: '{"user_id":null}' }],
    ['user_id an object', { auth: sign(APP, c.socketId, pch, '{"user_id":{"a":1}}'), channel_data: '{"user_id":{"a":1}}' }],
    ['channel_data not what was signed', { auth: sign(APP, c.socketId, pch, cd), channel_data: JSON.stringify({ user_id: 'admin' }) }],
    ['signature without channel_data', { auth: sign(APP, c.socketId, pch), channel_data: cd }],
  ];
  for (const [what, extra] of presenceCases) {
    expectSubError(t, await c.subscribe(pch, extra), pch, 'AuthError', 401, `${pch} ${what}`);
  }

  t.equal(c.closeCode, null, 'connection still open');
  t.ok(await alive(c));
  // Nothing of a refused subscription remains: no delivery, and a correct subscribe works.
  // (The marker comes on a channel c does have.)
  await c.subscribe('denied-side');
  await srv.sdk().trigger(['private-denied', 'presence-denied'], 'leak', { x: 1 });
  await settle(srv, c, 'denied-side');
  t.same(c.frames.filter((f) => f.event === 'leak'), [], 'no events on channels whose subscription failed');
  const ok = await c.subscribe('private-denied', { auth: sign(APP, c.socketId, 'private-denied') });
  t.equal(ok.event, 'pusher_internal:subscription_succeeded', 'a correct subscribe afterwards succeeds');
  const okp = await joinPresence(srv, c, pch, { user_id: 'u1' });
  t.equal(okp.event, 'pusher_internal:subscription_succeeded', 'a correct presence subscribe afterwards succeeds');
});

t.test('channel names: invalid characters → InvalidChannel 4009, too long → LimitReached 4009', async (t) => {
  const srv = await shared();
  const c = scope(t)(await RawClient.connect(srv.wsUrl()));
  const invalid = ['has space', 'bad*char', 'bad:colon', 'slash/name', 'bad#hash', 'ünïcode', 'tab\tname', 'quote"name', 'private-bad name', ''];
  for (const ch of invalid) {
    expectSubError(t, await c.subscribe(ch), ch, 'InvalidChannel', 4009, JSON.stringify(ch));
  }
  // Names are checked before auth: an invalid private name with a valid signature is still invalid.
  const bad = 'private-bad name';
  expectSubError(t, await c.subscribe(bad, { auth: sign(APP, c.socketId, bad) }), bad, 'InvalidChannel', 4009, 'invalid private name with auth');

  const tooLong = 'x'.repeat(201);
  expectSubError(t, await c.subscribe(tooLong), tooLong, 'LimitReached', 4009, '201 characters');
  const longest = 'y'.repeat(200);
  t.equal((await c.subscribe(longest)).event, 'pusher_internal:subscription_succeeded', '200 characters is allowed');
  const allChars = 'AZaz09_-=@,.;';
  t.equal((await c.subscribe(allChars)).event, 'pusher_internal:subscription_succeeded', 'every allowed character');

  t.equal(c.closeCode, null, 'connection still open');
  t.ok(await alive(c));
  await srv.sdk().trigger(allChars, 'ev', {});
  await c.event('ev', allChars);
  t.pass('events reach a channel subscribed after the refusals');
});

t.test('#server-to-user-<id> cannot be subscribed to without signing in as that user', async (t) => {
  const srv = await shared();
  const c = scope(t)(await RawClient.connect(srv.wsUrl()));
  const ch = '#server-to-user-bob';
  const s = await c.subscribe(ch);
  t.equal(s.event, 'pusher:subscription_error', 'refused');
  t.equal(s.data?.type, 'AuthError');
  t.equal(s.data?.status, 401);
  // What the application sends to user bob must not reach an anonymous socket (the marker
  // comes on a channel it does have).
  await c.subscribe('anon-side');
  await srv.sdk().sendToUser('bob', 'for-bob', { secret: 1 });
  await settle(srv, c, 'anon-side');
  t.same(c.frames.filter((f) => f.event === 'for-bob'), [], 'user events are not delivered to it');
  t.ok(await alive(c), 'connection stays open');
});

t.test('presence: snapshot, member_added once per user, member_removed when the last connection leaves', async (t) => {
  const srv = await shared();
  const keep = scope(t);
  const ch = 'presence-life';
  const isMember = (f: Frame) => f.event === 'pusher_internal:member_added' || f.event === 'pusher_internal:member_removed';

  const a = keep(await RawClient.connect(srv.wsUrl()));
  const sa = await joinPresence(srv, a, ch, { user_id: 'u1', user_info: { name: 'A' } });
  t.equal(sa.event, 'pusher_internal:subscription_succeeded');
  t.type(sa.data, 'string', 'presence data is a JSON string');
  t.same(JSON.parse(sa.data), { presence: { ids: ['u1'], hash: { u1: { name: 'A' } }, count: 1 } }, 'snapshot includes the joining user');

  const b = keep(await RawClient.connect(srv.wsUrl()));
  const sb = await joinPresence(srv, b, ch, { user_id: 'u2', user_info: { name: 'B' } });
  const pb = JSON.parse(sb.data).presence;
  t.equal(pb.count, 2);
  t.same([...pb.ids].sort(), ['u1', 'u2']);
  t.same(pb.hash, { u1: { name: 'A' }, u2: { name: 'B' } });
  const added = await a.event('pusher_internal:member_added', ch);
  t.same(json(added), { user_id: 'u2', user_info: { name: 'B' } }, 'existing member told about the new one');

  // Same user, second connection: no member_added anywhere.
  const b2 = keep(await RawClient.connect(srv.wsUrl()));
  const sb2 = await joinPresence(srv, b2, ch, { user_id: 'u2', user_info: { name: 'B' } });
  t.equal(JSON.parse(sb2.data).presence.count, 2, 'a second connection of a user does not add a member');
  // The owner writes a join's member events before its answer (b2's subscription_succeeded).
  await settle(srv, [a, b, b2], ch);
  t.same(a.frames.filter(isMember), [], 'no member_added for a second connection of the same user');
  t.same(b.frames.filter(isMember), [], 'the joining user is never told about itself');
  t.same(b2.frames.filter(isMember), [], 'nor is its second connection');

  // Closing one of the user's two connections: no member_removed. Once the owner counts
  // the leave, any member event of it has been written.
  await b2.close();
  await eventually(async () => (await subscriptionCount(srv, ch)) === 2, 3000, 'the owner to count the leave');
  await settle(srv, [a, b], ch);
  t.same(a.frames.filter(isMember), [], 'no member_removed while another connection of the user remains');
  // Closing the last one: member_removed.
  await b.close();
  const removed = await a.event('pusher_internal:member_removed', ch);
  t.same(json(removed), { user_id: 'u2' }, 'member_removed when the last connection disconnects');
  await settle(srv, a, ch);
  t.same(a.frames.filter(isMember), [], 'exactly one member_removed');

  // member_removed on unsubscribe as well.
  const c = keep(await RawClient.connect(srv.wsUrl()));
  const sc = await joinPresence(srv, c, ch, { user_id: 'u3' });
  t.same([...JSON.parse(sc.data).presence.ids].sort(), ['u1', 'u3'], 'u2 is gone from the snapshot');
  t.equal(JSON.parse(sc.data).presence.count, 2);
  t.equal(json(await a.event('pusher_internal:member_added', ch)).user_id, 'u3');
  c.send({ event: 'pusher:unsubscribe', data: { channel: ch } });
  t.same(json(await a.event('pusher_internal:member_removed', ch)), { user_id: 'u3' }, 'member_removed on unsubscribe');
  t.ok(await alive(c), 'the unsubscribed client stays connected');
  // c has left ch: its marker comes on a channel it has.
  await c.subscribe('pub-life-side');
  await settle(srv, c, 'pub-life-side');
  t.same(c.frames.filter(isMember), [], 'the leaving client is not told about itself');

  // The member list seen by a newcomer is current.
  const d = keep(await RawClient.connect(srv.wsUrl()));
  const sd = await joinPresence(srv, d, ch, { user_id: 'u4' });
  t.same([...JSON.parse(sd.data).presence.ids].sort(), ['u1', 'u4']);
});

t.test('presence: a numeric user_id is echoed as a number', async (t) => {
  const srv = await shared();
  const keep = scope(t);
  const ch = 'presence-numeric';
  const a = keep(await RawClient.connect(srv.wsUrl()));
  await joinPresence(srv, a, ch, { user_id: 'u1' });
  const n = keep(await RawClient.connect(srv.wsUrl()));
  const sn = await joinPresence(srv, n, ch, { user_id: 42, user_info: { n: true } });
  const p = JSON.parse(sn.data).presence;
  t.ok(p.ids.includes(42), 'ids holds the number 42');
  t.notOk(p.ids.includes('42'), 'not the string "42"');
  t.same(p.hash['42'], { n: true }, 'hash keyed by the id');
  const added = json(await a.event('pusher_internal:member_added', ch));
  t.equal(added.user_id, 42, 'member_added user_id is a number');
  await n.close();
  const removed = json(await a.event('pusher_internal:member_removed', ch));
  t.equal(removed.user_id, 42, 'member_removed user_id is a number');
});

t.test('presence limits: max_presence_members_per_channel → LimitReached 4100; an existing user may add connections', async (t) => {
  const srv = await shared();
  const keep = scope(t);
  const url = srv.wsUrl(LIMITS.key);
  const ch = 'presence-full';
  const a = keep(await RawClient.connect(url));
  const b = keep(await RawClient.connect(url));
  const c = keep(await RawClient.connect(url));
  const a2 = keep(await RawClient.connect(url));
  t.equal((await joinPresence(srv, a, ch, { user_id: 'u1' }, LIMITS)).event, 'pusher_internal:subscription_succeeded');
  t.equal((await joinPresence(srv, b, ch, { user_id: 'u2' }, LIMITS)).event, 'pusher_internal:subscription_succeeded');
  await a.next((f) => f.event === 'pusher_internal:member_added' && json(f).user_id === 'u2');
  expectSubError(t, await joinPresence(srv, c, ch, { user_id: 'u3' }, LIMITS), ch, 'LimitReached', 4100, 'third distinct user');
  t.ok(await alive(c), 'the refused client stays connected');
  const extra = await joinPresence(srv, a2, ch, { user_id: 'u1' }, LIMITS);
  t.equal(extra.event, 'pusher_internal:subscription_succeeded', 'another connection of an existing user is allowed');
  t.equal(JSON.parse(extra.data).presence.count, 2);
  // Both joins were answered after the owner wrote any member event of them.
  await settle(srv, a, ch, { app: LIMITS });
  t.same(a.frames.filter((f) => f.event === 'pusher_internal:member_added'), [],
    'no member_added for the refused u3 nor for u1\'s extra connection');

  // A place frees up when a member leaves.
  b.send({ event: 'pusher:unsubscribe', data: { channel: ch } });
  await a.next((f) => f.event === 'pusher_internal:member_removed' && json(f).user_id === 'u2');
  t.equal((await joinPresence(srv, c, ch, { user_id: 'u3' }, LIMITS)).event, 'pusher_internal:subscription_succeeded', 'u3 admitted once u2 left');
  // The limit is per channel.
  t.equal((await joinPresence(srv, b, 'presence-other', { user_id: 'u2' }, LIMITS)).event, 'pusher_internal:subscription_succeeded');
});

t.test('presence limits: user_info over max_presence_member_size_in_kb → LimitReached 4301', async (t) => {
  const srv = await shared();
  const keep = scope(t);
  const url = srv.wsUrl(LIMITS.key);
  const ch = 'presence-size';
  const a = keep(await RawClient.connect(url));
  const big = await joinPresence(srv, a, ch, { user_id: 'big', user_info: { blob: 'x'.repeat(2000) } }, LIMITS);
  expectSubError(t, big, ch, 'LimitReached', 4301, 'user_info of 2 KB with a 1 KB limit');
  t.ok(await alive(a), 'connection stays open');
  const small = await joinPresence(srv, a, ch, { user_id: 'small', user_info: { blob: 'x'.repeat(500) } }, LIMITS);
  t.equal(small.event, 'pusher_internal:subscription_succeeded', 'user_info under the limit accepted');
  t.same(JSON.parse(small.data).presence.ids, ['small'], 'the refused member was not added');
});

t.test('pusher-js: presence members, me, member_added and member_removed', async (t) => {
  const srv = await shared();
  const keep = scope(t);
  const ada = keep(pusherJs(srv.port, { user: { user_id: 'ada', user_info: { name: 'Ada' } } }));
  const bob = keep(pusherJs(srv.port, { user: { user_id: 'bob', user_info: { name: 'Bob' } } }));
  await Promise.all([connected(ada), connected(bob)]);

  const subscribed = (ch: any) => new Promise<any>((resolve, reject) => {
    ch.bind('pusher:subscription_succeeded', resolve);
    ch.bind('pusher:subscription_error', reject);
  });
  const adaCh = ada.subscribe('presence-pj');
  const adaAdded: any[] = [];
  const adaRemoved: any[] = [];
  adaCh.bind('pusher:member_added', (m: any) => adaAdded.push(m));
  adaCh.bind('pusher:member_removed', (m: any) => adaRemoved.push(m));
  const adaMembers = await subscribed(adaCh);
  t.equal(adaMembers.count, 1);
  t.same(adaMembers.me, { id: 'ada', info: { name: 'Ada' } });

  const bobCh = bob.subscribe('presence-pj');
  const bobMembers = await subscribed(bobCh);
  t.equal(bobMembers.count, 2, 'bob sees both members');
  t.same(bobMembers.me, { id: 'bob', info: { name: 'Bob' } });
  t.same(bobMembers.get('ada'), { id: 'ada', info: { name: 'Ada' } });

  const waitFor = async (list: any[], n: number) => {
    const until = Date.now() + 3000;
    while (list.length < n && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    return list;
  };
  t.same(await waitFor(adaAdded, 1), [{ id: 'bob', info: { name: 'Bob' } }], 'ada: member_added for bob');
  t.equal(adaMembers.count, 2);

  bob.disconnect();
  t.same(await waitFor(adaRemoved, 1), [{ id: 'bob', info: { name: 'Bob' } }], 'ada: member_removed for bob');
  t.equal(adaMembers.count, 1);

  // Private channel via pusher-js.
  const priv = ada.subscribe('private-pj');
  await subscribed(priv);
  t.pass('pusher-js private channel subscribed');
});
