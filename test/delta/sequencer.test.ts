// delta/sequencer.ts and delta/settings.ts without threads: a fake bus records what the
// sequencer writes to the shards; the interest tables are real (one shard's bits set).

import t from 'tap';
import pino from 'pino';
import { allocateInterest, Interest } from '../../src/channels/interest';
import { loadConfig } from '../../src/config';
import type { ControlMsg } from '../../src/bus/messages';
import { inlineComputer } from '../../src/delta/compute';
import { createSequencer } from '../../src/delta/sequencer';
import { ChannelSettings, parseSubscriptionDelta, resolveSubscription } from '../../src/delta/settings';
import { conflationValueOf, Force } from '../../src/delta/wire';
import { compileFilter } from '../../src/filter/compile';
import { parseFilter } from '../../src/filter/parse';

const APP = { id: 'app', key: 'k', secret: 's' };

function config(delta: Record<string, unknown> = {}, patterns: Record<string, unknown> = {}) {
  return loadConfig({ env: {}, overrides: { delta_compression: delta, apps: [{ ...APP, channel_delta_compression: patterns as never }] } });
}

async function harness(cfg = config()) {
  const sabs = { fossil: allocateInterest(2), xdelta3: allocateInterest(2) };
  const mine = { fossil: new Interest(sabs.fossil, 2, 1), xdelta3: new Interest(sabs.xdelta3, 2, 1) };
  const sent: { to: number; msg: ControlMsg }[] = [];
  const replies: { to: number; body: unknown }[] = [];
  const run = await inlineComputer();
  const seq = createSequencer({
    config: cfg,
    bus: { control: (to, msg) => sent.push({ to, msg }), reply: (to, _req, body) => replies.push({ to, body }) },
    interest: { fossil: new Interest(sabs.fossil, 2, -1), xdelta3: new Interest(sabs.xdelta3, 2, -1) },
    compute: run,
    log: pino({ level: 'silent' }),
    deltaEvent: 'pusher:delta',
  });
  const publish = (channel: string, envelope: string, force: Force = Force.None, tags: string | null = null) => {
    const b = Buffer.from(envelope);
    const m = new Uint8Array(b.length + 1);
    m[0] = force;
    m.set(b, 1);
    seq.publish({ app: APP.id, channel, except: '', message: m, tags });
  };
  // shard 1's delta interest, and its unfiltered subscribers registered (sequencer rule 5)
  let req = 1000;
  const register = (algo: 'fossil' | 'xdelta3') => (app: string, channel: string) => {
    mine[algo].add(app, channel);
    seq.control({ type: 'delta_filter', req: ++req, from: 1, op: 'add', app, channel, filter: '', algo }, 1);
    replies.pop();
  };
  const shard1 = { fossil: { add: register('fossil') }, xdelta3: { add: register('xdelta3') }, interest: mine };
  const settle = async () => {
    for (let i = 0; i < 100 && seq.pending > 0; i++) await new Promise((r) => setTimeout(r, 10));
  };
  return { seq, mine: shard1, sent, replies, publish, settle };
}

const env = (ch: string, ev: string, data: string) => '{"event":' + JSON.stringify(ev) + ',"channel":' + JSON.stringify(ch) + ',"data":' + JSON.stringify(data) + '}';

t.test('only to shards with delta interest; full, then a delta; not smaller → full', async (t) => {
  const h = await harness();
  h.publish('c', env('c', 'e', 'x'.repeat(300)));
  t.equal(h.sent.length, 0, 'nobody has delta interest: nothing is sent');
  h.mine.fossil.add(APP.id, 'c');
  const big = 'abcdefghij'.repeat(40);
  h.publish('c', env('c', 'e', big));
  h.publish('c', env('c', 'e', big.replace('abc', 'ABC')));
  // random bytes: the delta is bigger than the message
  let noise = '';
  for (let i = 0; i < 300; i++) noise += String.fromCharCode(33 + Math.floor(Math.random() * 90));
  h.publish('c', env('c', 'e', noise));
  await h.settle();
  const msgs = h.sent.map((s) => s.msg as Extract<ControlMsg, { type: 'delta' }>);
  t.same(h.sent.map((s) => s.to), [1, 1, 1], 'to shard 1 only');
  t.equal(msgs[0].deltas, null, 'first: full');
  t.match(msgs[0].full, /,"__delta_seq":0}$/);
  t.ok(msgs[1].deltas?.[0]?.startsWith('{"event":"pusher:delta","channel":"c","data":{"event":"e","delta":"'), 'second: a fossil delta');
  t.equal(msgs[1].deltas?.[1], null, 'no xdelta3 subscriber: not computed');
  t.match(msgs[1].deltas![0]!, /"seq":1,"base_index":0,"algorithm":"fossil"}}$/);
  t.equal(msgs[2].deltas, null, 'a delta not smaller than the message: full');
});

t.test('conflation key: dotted path, groups, __conflation_key, states for the cache sync', async (t) => {
  const h = await harness(config({}, { 'fx-*': { enabled: true, conflation_key: 'q.sym' } }));
  h.mine.xdelta3.add(APP.id, 'fx-1');
  const d = (sym: string, n: number) => env('fx-1', 'p', JSON.stringify({ q: { sym }, pad: 'y'.repeat(200), n }));
  h.publish('fx-1', d('EUR', 1));
  h.publish('fx-1', d('USD', 1));
  h.publish('fx-1', d('EUR', 2));
  h.seq.control({ type: 'delta_states', req: 7, from: 1, app: APP.id, channel: 'fx-1' }, 1);
  await h.settle();
  const msgs = h.sent.map((s) => s.msg as Extract<ControlMsg, { type: 'delta' }>);
  t.match(msgs[0].full, /"__delta_seq":0,"__conflation_key":"EUR"}$/);
  t.match(msgs[1].full, /"__delta_seq":0,"__conflation_key":"USD"}$/, 'another value: its own stream');
  t.match(msgs[2].deltas![1]!, /"seq":1,"base_index":0,"algorithm":"xdelta3","conflation_key":"EUR"}}$/);
  const body = h.replies[0].body as { conflation_key: string; states: Record<string, { seq: number }[]>; streams: number[] };
  t.equal(body.conflation_key, 'q.sym');
  t.same(Object.keys(body.states).sort(), ['EUR', 'USD']);
  t.same(body.states.EUR.map((e) => e.seq), [1], 'the latest message of the stream');
  t.equal(body.streams.length, 2);
});

t.test('conflationValueOf', async (t) => {
  t.equal(conflationValueOf('{"a":{"b":"x"}}', ['a', 'b']), 'x', 'a JSON string is parsed');
  t.equal(conflationValueOf({ a: { b: 3 } }, ['a', 'b']), '3', 'numbers as text');
  t.equal(conflationValueOf({ a: true }, ['a']), 'true');
  t.equal(conflationValueOf({ a: {} }, ['a', 'b']), '', 'missing: the empty group');
  t.equal(conflationValueOf({ a: [1] }, ['a']), '', 'not a scalar: the empty group');
  t.equal(conflationValueOf('not json', ['a']), '');
});

t.test('settings: patterns and the resolution order', async (t) => {
  const cfg = config({}, { exact: 'Xdelta3', 'pre-*': 'disabled', '*-suf': { enabled: true, algorithm: 'Xdelta3' }, '*': 'Fossil' });
  const s = new ChannelSettings(cfg.apps);
  t.equal(s.of(APP.id, 'exact').algorithm, 'xdelta3', 'exact');
  t.equal(s.of(APP.id, 'pre-x').enabled, false, 'prefix');
  t.equal(s.of(APP.id, 'x-suf').algorithm, 'xdelta3', 'suffix');
  t.equal(s.of(APP.id, 'other').algorithm, 'fossil', '*');
  t.equal(s.of('no-app', 'exact').enabled, null, 'unknown app: inherit');
  const unset = parseSubscriptionDelta(undefined);
  const on = parseSubscriptionDelta(true);
  const off = parseSubscriptionDelta('disabled');
  if (typeof unset === 'string' || typeof on === 'string' || typeof off === 'string') throw new Error('parse');
  t.equal(resolveSubscription(cfg, s.of(APP.id, 'private-encrypted-x'), 'private-encrypted-x', on, 'fossil'), null, '1: encrypted');
  t.equal(resolveSubscription(cfg, s.of(APP.id, 'pre-x'), 'pre-x', on, null), 'fossil', '2: the subscription beats the pattern');
  t.equal(resolveSubscription(cfg, s.of(APP.id, 'other'), 'other', off, 'fossil'), null, '2: disabled by the subscription');
  t.equal(resolveSubscription(cfg, s.of(APP.id, 'pre-x'), 'pre-x', unset, 'fossil'), null, '3: the pattern beats the socket');
  t.equal(resolveSubscription(cfg, s.of(APP.id, 'exact'), 'exact', unset, 'fossil'), 'xdelta3', '3: the pattern picks the algorithm');
  t.equal(resolveSubscription(cfg, s.of(APP.id, 'other'), 'other', unset, null), null, 'a socket that asked for nothing: plain');
  t.equal(resolveSubscription(config({ algorithm: 'Xdelta3' }), s.of('none', 'c'), 'c', on, null), 'xdelta3', '5: the server default');
  t.equal(resolveSubscription(config({ enabled: false }), s.of(APP.id, 'c'), 'c', on, 'fossil'), null, 'enabled: false');
  t.same(parseSubscriptionDelta({ enabled: true, algorithm: 'XDELTA3' }), { kind: 'on', algorithm: 'xdelta3' });
  t.type(parseSubscriptionDelta('zip'), 'string', 'a bad name is an error message');
  t.type(parseSubscriptionDelta({ enabled: 'yes' }), 'string');
  t.type(parseSubscriptionDelta(5), 'string');
});

/** A filter's key (CompiledFilter.key), as a shard registers it. */
function filterKey(raw: unknown): string {
  const p = parseFilter(raw, 50);
  if (!p.ok) throw new Error(p.error);
  return compileFilter(p.filter).key;
}

t.test('tag filters: each registered filter has its own streams, numbered over the messages it matches (rule 4)', async (t) => {
  const h = await harness();
  h.mine.fossil.add(APP.id, 'c');
  const eu = filterKey({ key: 'region', cmp: 'eq', val: 'eu' });
  const notUs = filterKey({ op: 'not', nodes: [{ key: 'region', cmp: 'eq', val: 'us' }] });
  let req = 0;
  const register = (op: 'add' | 'remove', filter: string, from = 1) =>
    h.seq.control({ type: 'delta_filter', req: ++req, from, op, app: APP.id, channel: 'c', filter, algo: 'fossil' }, from);
  register('add', eu);
  register('add', notUs);
  t.same(h.replies.map((r) => r.to), [1, 1], 'each registration answered');
  const big = 'abcdefghij'.repeat(40);
  const regions = ['eu', 'us', 'eu', 'apac', null, 'eu'];
  regions.forEach((r, i) => h.publish('c', env('c', 'e', big + i), Force.None, r === null ? null : JSON.stringify({ region: r })));
  await h.settle();
  const msgs = h.sent.map((s) => s.msg as Extract<ControlMsg, { type: 'delta' }>);
  t.equal(msgs.length, 6, 'one frame per message');
  t.same(msgs.map((m) => m.tags), regions.map((r) => (r === null ? null : JSON.stringify({ region: r }))), 'with the event\'s tags');
  const partsOf = (key: string) => msgs.map((m) => m.filtered?.find((p) => p.key === key) ?? null);
  const euParts = partsOf(eu);
  t.same(euParts.map((p) => p !== null), [true, false, true, false, false, true], 'eu: the eu messages only');
  t.same(partsOf(notUs).map((p) => p !== null), [true, false, true, true, false, true], 'not us: the tagged messages but us');
  const e = euParts.filter((p) => p !== null);
  t.match(e[0]!.full, /,"__delta_seq":0}$/, 'eu stream: seq 0 first, full');
  t.equal(e[0]!.deltas, null);
  t.match(e[1]!.deltas![0]!, /"seq":1,"base_index":0,"algorithm":"fossil"}}$/, 'its second message is a delta against its first');
  t.match(e[2]!.deltas![0]!, /"seq":2,"base_index":1,/, 'and so on, whatever the channel published between');
  t.match(msgs[5].full, /,"__delta_seq":5}$/, 'the unfiltered stream numbers every message');
  t.not(e[0]!.stream, msgs[0].stream, 'a stream of its own');

  // a filter registered by shard 0 only is not sent to shard 1; shard 1 unregisters eu
  h.mine.fossil.add(APP.id, 'c'); // (shard 1's bit, already set)
  register('remove', eu);
  h.sent.length = 0;
  h.publish('c', env('c', 'e', big + 'x'), Force.None, JSON.stringify({ region: 'eu' }));
  await h.settle();
  const after = h.sent.map((s) => s.msg as Extract<ControlMsg, { type: 'delta' }>);
  t.same(after[0].filtered?.map((p) => p.key), [notUs], 'an unregistered filter is no longer computed');
  register('remove', notUs);
  h.sent.length = 0;
  h.publish('c', env('c', 'e', big + 'y'), Force.None, JSON.stringify({ region: 'eu' }));
  await h.settle();
  t.equal((h.sent[0].msg as Extract<ControlMsg, { type: 'delta' }>).filtered, undefined, 'no filter left: no parts');

  // a filter that only shard 0 registered: shard 1's frame has no part of it; a replaced shard's go
  register('add', eu, 0);
  h.sent.length = 0;
  h.publish('c', env('c', 'e', big + 'z'), Force.None, JSON.stringify({ region: 'eu' }));
  await h.settle();
  t.same(h.sent.map((s) => s.to), [1], 'only shard 1 has delta interest');
  t.equal((h.sent[0].msg as Extract<ControlMsg, { type: 'delta' }>).filtered, undefined, 'and gets no part of shard 0\'s filter');
  h.seq.forgetShard(0);
  const states = (filter: string) => {
    h.seq.control({ type: 'delta_states', req: ++req, from: 1, app: APP.id, channel: 'c', filter }, 1);
    return h.replies[h.replies.length - 1].body as { streams: number[] };
  };
  t.same(states(eu).streams, [], 'a replaced shard\'s filter is forgotten with its streams');
});

t.test('rule 5: no unfiltered delta while no shard registered an unfiltered subscriber', async (t) => {
  const h = await harness();
  h.mine.interest.fossil.add(APP.id, 'c'); // delta interest: a filtered subscriber only
  const eu = filterKey({ key: 'region', cmp: 'eq', val: 'eu' });
  h.seq.control({ type: 'delta_filter', req: 1, from: 1, op: 'add', app: APP.id, channel: 'c', filter: eu, algo: 'fossil' }, 1);
  const big = 'abcdefghij'.repeat(40);
  const tags = JSON.stringify({ region: 'eu' });
  h.publish('c', env('c', 'e', big + 1), Force.None, tags);
  h.publish('c', env('c', 'e', big + 2), Force.None, tags);
  await h.settle();
  const msgs = h.sent.map((s) => s.msg as Extract<ControlMsg, { type: 'delta' }>);
  t.equal(msgs[1].deltas, null, 'the unfiltered stream: not computed, full');
  t.ok(msgs[1].filtered?.[0].deltas?.[0], 'the filter\'s stream: a delta');
  h.mine.fossil.add(APP.id, 'c'); // now an unfiltered subscriber registers
  h.publish('c', env('c', 'e', big + 3), Force.None, tags);
  await h.settle();
  t.ok((h.sent[2].msg as Extract<ControlMsg, { type: 'delta' }>).deltas?.[0], 'then the unfiltered stream gets its delta');
});
