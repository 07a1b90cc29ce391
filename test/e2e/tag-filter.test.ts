// test-modes: once (filters are matched by the receiving shard with the same code on every shard; across shards: e2e/tag-filter-client)
// Tag filtering end to end (spec "Tag filtering", the protocol): raw clients subscribe with
// a `filter`, events are published with `tags` through POST /events and /batch_events, and
// each client must receive exactly the events its filter matches — no more (checked after
// a positive marker, test/helpers/settle.ts), no fewer. Clients spread over the shards.
//
// The marker of a filtered client goes to a plain channel it is also on ('marks'): an
// untagged marker would not reach it on the filtered channel, by design. settle's order
// across channels holds for it (every shard delivers in stamp order).

import t from 'tap';
import { channelAuth } from '../../src/protocol/hmac';
import { signedPost } from '../helpers/http';
import { APP, RawClient, WORKERS, spreadClients, startServer, type Frame, type TestServer } from '../helpers/server';
import { settle } from '../helpers/settle';

const SUCCEEDED = 'pusher_internal:subscription_succeeded';
/** The object form of a channel_delta_compression entry, with enable_tags. */
const TAGS_ON = { enabled: true, algorithm: null, conflation_key: null, max_messages_per_key: null, max_conflation_keys: null, enable_tags: true };
/** An application event as received, with the "tags" enable_tags adds. */
type Tagged = Frame & { tags?: Record<string, string> };

/** The events published (e0 and e5 are untagged: no tags, and empty tags). */
const EVENTS: { name: string; tags?: Record<string, string> }[] = [
  { name: 'e0' },
  { name: 'e1', tags: { region: 'eu', price: '10', sym: 'BTC-USD' } },
  { name: 'e2', tags: { region: 'us', price: '20.5', sym: 'ETH-USD' } },
  { name: 'e3', tags: { region: 'eu', price: 'abc', sym: 'BTC-EUR' } },
  { name: 'e4', tags: { price: '-3' } },
  { name: 'e5', tags: {} },
];

/** Each filter with the events it must get (written out by hand, not computed). */
const CASES: [string, unknown, string[]][] = [
  ['none', undefined, ['e0', 'e1', 'e2', 'e3', 'e4', 'e5']],
  ['eq', { key: 'region', cmp: 'eq', val: 'eu' }, ['e1', 'e3']],
  ['neq (needs the key)', { key: 'region', cmp: 'neq', val: 'eu' }, ['e2']],
  ['in', { key: 'region', cmp: 'in', vals: ['us', 'asia'] }, ['e2']],
  ['nin', { key: 'region', cmp: 'nin', vals: ['us'] }, ['e1', 'e3']],
  ['ex', { key: 'region', cmp: 'ex' }, ['e1', 'e2', 'e3']],
  ['exists', { key: 'region', cmp: 'exists' }, ['e1', 'e2', 'e3']],
  ['nex (tagged events only)', { key: 'region', cmp: 'nex' }, ['e4']],
  ['notExists', { key: 'region', cmp: 'notExists' }, ['e4']],
  ['sw', { key: 'sym', cmp: 'sw', val: 'BTC' }, ['e1', 'e3']],
  ['startsWith', { key: 'sym', cmp: 'startsWith', val: 'BTC' }, ['e1', 'e3']],
  ['ew', { key: 'sym', cmp: 'ew', val: 'USD' }, ['e1', 'e2']],
  ['endsWith', { key: 'sym', cmp: 'endsWith', val: '-USD' }, ['e1', 'e2']],
  ['ct', { key: 'sym', cmp: 'ct', val: '-' }, ['e1', 'e2', 'e3']],
  ['contains (case-sensitive)', { key: 'sym', cmp: 'contains', val: 'TC-E' }, ['e3']],
  ['contains, other case', { key: 'sym', cmp: 'ct', val: 'btc' }, []],
  ['gt (number)', { key: 'price', cmp: 'gt', val: 10 }, ['e2']],
  ['gt (numeric string)', { key: 'price', cmp: 'gt', val: '10' }, ['e2']],
  ['gte', { key: 'price', cmp: 'gte', val: 10 }, ['e1', 'e2']],
  ['lt (non-numbers never match)', { key: 'price', cmp: 'lt', val: 10 }, ['e4']],
  ['lte (exponent)', { key: 'price', cmp: 'lte', val: '1e1' }, ['e1', 'e4']],
  ['and', { op: 'and', nodes: [{ key: 'region', cmp: 'eq', val: 'eu' }, { key: 'price', cmp: 'gt', val: 5 }] }, ['e1']],
  ['or', { op: 'or', nodes: [{ key: 'region', cmp: 'eq', val: 'us' }, { key: 'price', cmp: 'lt', val: 0 }] }, ['e2', 'e4']],
  ['not eq', { op: 'not', nodes: [{ key: 'region', cmp: 'eq', val: 'eu' }] }, ['e2', 'e4']],
  ['not ex', { op: 'not', nodes: [{ key: 'region', cmp: 'ex' }] }, ['e4']],
  ['or of eq over two keys', { op: 'or', nodes: [{ key: 'region', cmp: 'eq', val: 'eu' }, { key: 'sym', cmp: 'eq', val: 'BTC-EUR' }] }, ['e1', 'e3']],
];

const names = (c: RawClient, channel: string) => c.frames.filter((f) => f.channel === channel && /^e\d$/.test(f.event)).map((f) => f.event);

async function publishAll(srv: TestServer, channel: string): Promise<void> {
  // e0–e3 one by one, e4–e5 in one batch
  for (const ev of EVENTS.slice(0, 4)) {
    const r = await signedPost(srv.port, srv.config.apps[0], 'events', { name: ev.name, channel, data: ev.name, ...(ev.tags ? { tags: ev.tags } : {}) });
    if (r.status !== 200) throw new Error(`publish ${ev.name}: ${r.status} ${r.text}`);
  }
  const r = await signedPost(srv.port, srv.config.apps[0], 'batch_events', { batch: EVENTS.slice(4).map((ev) => ({ name: ev.name, channel, data: ev.name, tags: ev.tags })) });
  if (r.status !== 200) throw new Error(`batch: ${r.status} ${r.text}`);
}

t.test(`every operator, single and batch publishes (${WORKERS} workers)`, async (t) => {
  const srv = await startServer({ tag_filtering: { enabled: true } });
  const clients = await spreadClients(srv, CASES.length);
  for (let i = 0; i < CASES.length; i++) {
    const [what, filter] = CASES[i];
    const c = clients[i];
    t.equal((await c.subscribe('prices', filter === undefined ? {} : { filter })).event, SUCCEEDED, `${what}: subscribed`);
    t.equal((await c.subscribe('marks')).event, SUCCEEDED);
  }
  await publishAll(srv, 'prices');
  await settle(srv, clients.slice(0, CASES.length), 'marks');
  for (let i = 0; i < CASES.length; i++) t.same(names(clients[i], 'prices'), CASES[i][2], CASES[i][0]);

  // unsubscribing a filtered subscription stops it; subscribing again takes a new filter
  const c = clients[1];
  c.send({ event: 'pusher:unsubscribe', data: { channel: 'prices' } });
  c.frames.length = 0;
  t.equal((await c.subscribe('prices', { filter: { key: 'region', cmp: 'eq', val: 'us' } })).event, SUCCEEDED, 'resubscribed with another filter');
  await publishAll(srv, 'prices');
  await settle(srv, c, 'marks');
  t.same(names(c, 'prices'), ['e2'], 'the new filter applies, the old one is gone');
  await srv.stop();
});

t.test('invalid filters are refused at subscribe with InvalidFilter 4000', async (t) => {
  const srv = await startServer({ tag_filtering: { enabled: true, max_nodes: 5 } });
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  const bad: [unknown, RegExp][] = [
    ['region=eu', /filter must be an object/],
    [[], /filter must be an object/],
    [{}, /needs either "op"/],
    [{ op: 'xor', nodes: [] }, /op must be "and", "or" or "not"/],
    [{ op: 'and', nodes: [] }, /needs at least one node/],
    [{ op: 'not', nodes: [{ key: 'a', cmp: 'ex' }, { key: 'b', cmp: 'ex' }] }, /exactly one node/],
    [{ op: 'and', nodes: 'x' }, /nodes must be an array/],
    [{ key: 'a', cmp: 'regex', val: '.*' }, /cmp must be one of .*not "regex"/],
    [{ key: 'a', cmp: 'eq' }, /val must be a string/],
    [{ key: 'a', cmp: 'eq', val: 1 }, /val must be a string/],
    [{ key: '', cmp: 'eq', val: 'x' }, /key must be a non-empty string/],
    [{ key: 'a', cmp: 'in', val: 'x' }, /takes "vals"/],
    [{ key: 'a', cmp: 'in', vals: [] }, /non-empty array/],
    [{ key: 'a', cmp: 'nin', vals: ['x', 2] }, /vals\[1\] must be a string/],
    [{ key: 'a', cmp: 'gt', val: 'ten' }, /must be a number/],
    [{ key: 'a', cmp: 'ex', val: 'x' }, /takes no value/],
    [{ key: 'a', cmp: 'eq', val: 'x', extra: 1 }, /unknown field "extra"/],
    [{ op: 'or', nodes: Array.from({ length: 5 }, () => ({ key: 'a', cmp: 'ex' })) }, /more than 5 nodes/],
  ];
  for (const [filter, re] of bad) {
    const f = await c.subscribe('prices', { filter });
    t.equal(f.event, 'pusher:subscription_error', `${JSON.stringify(filter)}: refused`);
    t.equal(f.data?.type, 'InvalidFilter');
    t.equal(f.data?.status, 4000);
    t.match(f.data?.error, re, `${JSON.stringify(filter)}: ${f.data?.error}`);
  }
  t.equal((await c.subscribe('prices', { filter: { op: 'or', nodes: Array.from({ length: 4 }, () => ({ key: 'a', cmp: 'ex' })) } })).event, SUCCEEDED,
    'the connection stays open; 5 nodes are allowed');
  await srv.stop();
});

t.test('a filter is refused while tag filtering is disabled; tags are validated and dropped', async (t) => {
  const srv = await startServer();
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  const f = await c.subscribe('prices', { filter: { key: 'a', cmp: 'eq', val: 'b' } });
  t.equal(f.event, 'pusher:subscription_error');
  t.match(f.data, { type: 'InvalidFilter', status: 4000, error: /tag_filtering\.enabled/ });
  t.equal((await c.subscribe('prices')).event, SUCCEEDED);
  const r = await signedPost(srv.port, srv.config.apps[0], 'events', { name: 'x', channel: 'prices', data: 'd', tags: { a: 'b' } });
  t.equal(r.status, 200, 'tags accepted');
  const got: Tagged = await c.event('x', 'prices', 5000);
  t.equal(got.tags, undefined, 'not delivered with the message');
  t.equal((await signedPost(srv.port, srv.config.apps[0], 'events', { name: 'x', channel: 'prices', data: 'd', tags: { a: 1 } })).status, 400, 'still validated');
  await srv.stop();
});

t.test('tags are validated on single and batch publishes', async (t) => {
  const srv = await startServer({ tag_filtering: { enabled: true } });
  const app = srv.config.apps[0];
  const bad: [unknown, RegExp][] = [
    ['eu', /tags must be an object/],
    [['eu'], /tags must be an object/],
    [{ region: 1 }, /tags\.region must be a string .*not number/],
    [{ region: null }, /tags\.region must be a string .*not null/],
    [{ '': 'x' }, /tag name must not be empty/],
  ];
  for (const [tags, re] of bad) {
    const r = await signedPost(srv.port, app, 'events', { name: 'x', channel: 'c', data: 'd', tags });
    t.equal(r.status, 400, `${JSON.stringify(tags)}: 400`);
    t.match(r.json?.error, re);
    const b = await signedPost(srv.port, app, 'batch_events', { batch: [{ name: 'x', channel: 'c', data: 'd' }, { name: 'x', channel: 'c', data: 'd', tags }] });
    t.equal(b.status, 400, `batch ${JSON.stringify(tags)}: 400`);
    t.match(b.json?.error, /^batch\[1\]: /);
  }
  const big = { k: 'x'.repeat(70_000) };
  t.match((await signedPost(srv.port, app, 'events', { name: 'x', channel: 'c', data: 'd', tags: big })).json?.error, /more than the 65534 allowed/);
  await srv.stop();
});

t.test('enable_tags adds the sorted tags to delivered messages, per channel pattern', async (t) => {
  const srv = await startServer({
    tag_filtering: { enabled: true },
    apps: [{ id: 'app-id', key: 'app-key', secret: 'app-secret', channel_delta_compression: { 'tagged-*': TAGS_ON, 'plain-x': 'Fossil' } }],
  });
  const clients = await spreadClients(srv, 2);
  const raws: string[][] = clients.map((c) => {
    const out: string[] = [];
    c.ws.on('message', (m) => out.push(m.toString()));
    return out;
  });
  for (const c of clients) for (const ch of ['tagged-a', 'plain-x']) await c.subscribe(ch);
  await c2(clients[1].subscribe('tagged-b', { filter: { key: 'z', cmp: 'eq', val: '1' } }));
  for (const channel of ['tagged-a', 'plain-x', 'tagged-b']) {
    const r = await signedPost(srv.port, srv.config.apps[0], 'events', { name: 'ev', channel, data: 'd', tags: { z: '1', a: '2' } });
    t.equal(r.status, 200);
  }
  await settle(srv, clients, 'plain-x');
  for (const [i, c] of clients.entries()) {
    const tagged: Tagged = c.frames.find((f) => f.event === 'ev' && f.channel === 'tagged-a')!;
    t.same(tagged.tags, { a: '2', z: '1' }, `client ${i}: tags on tagged-a`);
    t.ok(raws[i].some((s) => s.includes('"channel":"tagged-a","data":"d","tags":{"a":"2","z":"1"}}')), 'sorted keys, after data');
    const plain: Tagged = c.frames.find((f) => f.event === 'ev' && f.channel === 'plain-x')!;
    t.equal(plain.tags, undefined, `client ${i}: none on plain-x (string setting)`);
  }
  t.same((clients[1].frames.find((f: Frame) => f.event === 'ev' && f.channel === 'tagged-b') as Tagged | undefined)?.tags, { a: '2', z: '1' }, 'filtered subscriber gets them too');
  await srv.stop();

  async function c2(p: Promise<Frame>) {
    t.equal((await p).event, SUCCEEDED);
  }
});

t.test('filtered subscribers of presence channels get member events and client events rules', async (t) => {
  const srv = await startServer({ tag_filtering: { enabled: true } });
  const [a, b] = await spreadClients(srv, 2);
  const filter = { key: 'room', cmp: 'eq', val: '1' };
  const fa = await a.subscribe('presence-r', { filter, ...authFor(a, 'presence-r', 'ua') });
  t.equal(fa.event, SUCCEEDED, 'filtered presence subscribe');
  t.equal((await b.subscribeAuthed('presence-r', { user_id: 'ub' })).event, SUCCEEDED);
  const added = await a.event('pusher_internal:member_added', 'presence-r', 5000);
  t.same(JSON.parse(added.data), { user_id: 'ub' }, 'member_added reaches the filtered subscriber');
  await signedPost(srv.port, srv.config.apps[0], 'events', { name: 'e1', channel: 'presence-r', data: 'x', tags: { room: '1' } });
  await signedPost(srv.port, srv.config.apps[0], 'events', { name: 'e2', channel: 'presence-r', data: 'x', tags: { room: '2' } });
  // a client event from b: untagged, so not for a's filtered subscription
  b.send({ event: 'client-hi', channel: 'presence-r', data: {} });
  await b.sync();
  await a.subscribe('marks');
  await settle(srv, a, 'marks');
  t.same(a.frames.filter((f) => f.channel === 'presence-r' && f.event !== 'pusher_internal:member_added').map((f) => f.event), ['e1'], 'only the matching event');
  await b.close();
  const removed = await a.event('pusher_internal:member_removed', 'presence-r', 5000);
  t.same(JSON.parse(removed.data), { user_id: 'ub' }, 'member_removed too');
  await srv.stop();
});

t.test('equal filters share a topic; socket_id excludes a filtered subscriber; unsubscribe of one leaves the other', async (t) => {
  const srv = await startServer({ tag_filtering: { enabled: true } });
  const app = srv.config.apps[0];
  const [a, b, c, d] = await spreadClients(srv, 4);
  const and = { op: 'and', nodes: [{ key: 'region', cmp: 'eq', val: 'eu' }, { key: 'tier', cmp: 'ex' }] };
  // the same filter, once with the long spelling: one shared entry
  const andLong = { op: 'and', nodes: [{ key: 'region', cmp: 'eq', val: 'eu' }, { key: 'tier', cmp: 'exists' }] };
  const eq = { key: 'region', cmp: 'eq', val: 'eu' };
  for (const [cl, filter] of [[a, and], [b, andLong], [c, eq], [d, eq]] as const) {
    t.equal((await cl.subscribe('room', { filter })).event, SUCCEEDED);
    t.equal((await cl.subscribe('marks')).event, SUCCEEDED);
  }
  const pub = async (name: string, tags: Record<string, string>, socketId?: string) => {
    const r = await signedPost(srv.port, app, 'events', { name, channel: 'room', data: name, tags, ...(socketId ? { socket_id: socketId } : {}) });
    t.equal(r.status, 200);
  };
  await pub('e1', { region: 'eu', tier: 'gold' });
  await pub('e2', { region: 'eu', tier: 'gold' }, a.socketId);
  await pub('e3', { region: 'eu' }, c.socketId);
  a.send({ event: 'pusher:unsubscribe', data: { channel: 'room' } });
  await a.sync();
  await pub('e4', { region: 'eu', tier: 'x' });
  await settle(srv, [a, b, c, d], 'marks');
  t.same(names(a, 'room'), ['e1'], 'a: e1; excluded from e2; unsubscribed before e4');
  t.same(names(b, 'room'), ['e1', 'e2', 'e4'], 'b: same filter as a, still subscribed');
  t.same(names(c, 'room'), ['e1', 'e2', 'e4'], 'c: excluded from e3');
  t.same(names(d, 'room'), ['e1', 'e2', 'e3', 'e4'], 'd: everything for eu');
  await srv.stop();
});

t.test('cache channels: a filtered subscriber gets the cached event only when it matches', async (t) => {
  const srv = await startServer({ tag_filtering: { enabled: true } });
  const app = srv.config.apps[0];
  const r = await signedPost(srv.port, app, 'events', { name: 'last', channel: 'cache-prices', data: 'd', tags: { region: 'eu' } });
  t.equal(r.status, 200);
  const untagged = await signedPost(srv.port, app, 'events', { name: 'last', channel: 'cache-plain', data: 'd' });
  t.equal(untagged.status, 200);
  const clients = await spreadClients(srv, 4);
  const cases: [RawClient, string, unknown, string][] = [
    [clients[0], 'cache-prices', { key: 'region', cmp: 'eq', val: 'eu' }, 'last'],
    [clients[1], 'cache-prices', { key: 'region', cmp: 'eq', val: 'us' }, 'pusher:cache_miss'],
    [clients[2], 'cache-prices', { op: 'not', nodes: [{ key: 'region', cmp: 'eq', val: 'us' }] }, 'last'],
    [clients[3], 'cache-plain', { key: 'region', cmp: 'nex' }, 'pusher:cache_miss'],
  ];
  for (const [c, channel, filter, want] of cases) {
    t.equal((await c.subscribe(channel, { filter })).event, SUCCEEDED);
    const f = await c.next((x) => x.channel === channel && (x.event === 'last' || x.event === 'pusher:cache_miss'), 5000);
    t.equal(f.event, want, `${JSON.stringify(filter)} on ${channel}: ${want}`);
  }
  await srv.stop();
});

function authFor(c: RawClient, channel: string, user: string): Record<string, string> {
  const cd = JSON.stringify({ user_id: user });
  return { auth: channelAuth(APP.key, APP.secret, c.socketId, channel, cd), channel_data: cd };
}
