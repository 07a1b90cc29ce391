// test-modes: once (the options act in the delta sequencer, one thread whatever the shard count; delta across shards: delta/client, history/delta)
// Every delta option and request shape, through a real server: the global options
// (full_message_interval, min_message_size, omit_delta_algorithm, pool_size,
// max_channel_states_per_socket, max_state_age_secs, enabled), app channel patterns,
// per-subscription and per-publish `delta`, private-encrypted channels.

import t from 'tap';
import type { ChannelDeltaSetting } from '../../src/config/types';
import { signedPost } from '../helpers/http';
import { APP, startServer, type TestServer } from '../helpers/server';
import { Books, core, DeltaClient, rng } from './clients';

const app = (patterns: Record<string, unknown>) => [{ ...APP, channel_delta_compression: patterns as Record<string, ChannelDeltaSetting> }];

async function publish(srv: TestServer, channel: string, event: string, data: string, extra: Record<string, unknown> = {}): Promise<void> {
  const r = await signedPost(srv.port, APP, 'events', { name: event, channel, data, ...extra });
  if (r.status !== 200) throw new Error(`publish answered ${r.status}: ${r.text}`);
}

let ends = 0;

/** n updates on one channel; returns after every given client got the end marker. */
async function stream(srv: TestServer, channel: string, n: number, clients: DeltaClient[], extra: (i: number) => Record<string, unknown> = () => ({}), size = 1000): Promise<void> {
  const books = new Books(rng(7), size);
  for (let i = 0; i < n; i++) await publish(srv, channel, 'price', books.update('A'), extra(i));
  // a marker of its own: a channel may carry several streams one after the other
  const marker = `{"end":${++ends}}`;
  await publish(srv, channel, 'end', marker);
  await Promise.all(clients.map((c) => c.until(() => c.events(channel).some((e) => e.includes(JSON.stringify(marker))), 'end')));
}

const deltas = (c: DeltaClient, channel: string) => c.texts.filter((x) => x.startsWith('{"event":"pusher:delta"') && x.includes(`"channel":${JSON.stringify(channel)}`));
const fulls = (c: DeltaClient, channel: string) => c.texts.filter((x) => x.includes('"__delta_seq":') && x.includes(`"channel":${JSON.stringify(channel)}`));

t.test('full_message_interval, min_message_size, omit_delta_algorithm, "delta" on a publish; pool_size 0', async (t) => {
  const srv = await startServer({ delta_compression: { full_message_interval: 4, min_message_size: 300, omit_delta_algorithm: true, pool_size: 0 } });
  t.teardown(() => srv.stop());
  const plain = await DeltaClient.open(srv, null);
  const c = await DeltaClient.open(srv, new core.DeltaDecoder());
  await plain.subscribe('a');
  await c.enable();
  t.ok(c.has((x) => x === '{"event":"pusher:delta_compression_enabled","data":{"enabled":true,"algorithm":"fossil"}}'), 'enable is answered with the algorithm');
  await c.subscribe('a');
  await stream(srv, 'a', 11, [plain, c]);
  // seq 0 full, 1-4 deltas, 5 full, 6-9 deltas, 10 full (the end marker is below min size)
  const seqs = fulls(c, 'a').map((x) => Number(/"__delta_seq":(\d+)/.exec(x)![1]));
  t.same(seqs.slice(0, 3), [0, 5, 10], 'a full message after every 4 deltas');
  t.equal(deltas(c, 'a').length, 8, '8 deltas');
  t.ok(deltas(c, 'a').every((x) => !x.includes('"algorithm"')), 'omit_delta_algorithm: no algorithm field');
  t.ok(fulls(c, 'a').some((x) => x.startsWith('{"event":"end"')), 'a message below min_message_size goes full');
  t.same(c.events('a'), plain.events('a'), 'reconstructed byte for byte');

  // "delta": false forces full; "delta": true forces a delta below min_message_size
  await c.subscribe('b');
  await plain.subscribe('b');
  await stream(srv, 'b', 4, [plain, c], (i) => (i === 2 ? { delta: false } : {}));
  t.equal(deltas(c, 'b').length, 2, '"delta": false: that message went full');
  await stream(srv, 'b', 3, [plain, c], () => ({ delta: true }), 150);
  t.ok(deltas(c, 'b').length >= 4, '"delta": true: small messages go as deltas');
  t.same(c.events('b'), plain.events('b'), 'reconstructed byte for byte');
  const bad = await signedPost(srv.port, APP, 'events', { name: 'x', channel: 'b', data: '1', delta: 'yes' });
  t.equal(bad.status, 400, 'a non-boolean delta is refused');
  t.match(bad.text, /delta must be a boolean/);
});

t.test('resolution: patterns, per-subscription delta, encrypted channels, standard clients, max_channel_states_per_socket', async (t) => {
  const srv = await startServer({
    apps: app({ 'plain-*': 'disabled', '*-x': 'Xdelta3', 'exact': { enabled: true, algorithm: 'Fossil', conflation_key: null, max_messages_per_key: null, max_conflation_keys: null, enable_tags: false }, '*': 'inherit' }),
    delta_compression: { max_channel_states_per_socket: 3 },
  });
  t.teardown(() => srv.stop());
  const std = await DeltaClient.open(srv, null); // never opts in
  const c = await DeltaClient.open(srv, await core.createDeltaDecoder({ xdelta3: true }));
  await c.enable();
  for (const ch of ['plain-1', 'q-x', 'exact']) {
    await std.subscribe(ch);
    await c.subscribe(ch);
  }
  await c.subscribe('plain-2', { delta: true }); // per-subscription beats the pattern
  await c.subscribe('other', {}); // over max_channel_states_per_socket (3): plain
  const enc = 'private-encrypted-z';
  await c.subscribe(enc, { delta: 'fossil' });
  for (const ch of ['plain-1', 'q-x', 'exact', 'plain-2', 'other', enc]) await stream(srv, ch, 3, [c]);
  t.equal(deltas(c, 'plain-1').length + fulls(c, 'plain-1').length, 0, "pattern 'disabled': plain messages");
  t.ok(deltas(c, 'q-x').every((x) => x.includes('"algorithm":"xdelta3"')) && deltas(c, 'q-x').length === 2, "pattern '*-x': Xdelta3");
  t.equal(deltas(c, 'exact').length, 2, 'exact pattern: deltas');
  t.equal(deltas(c, 'plain-2').length, 2, 'per-subscription delta: true beats the pattern');
  t.equal(fulls(c, 'other').length, 0, 'max_channel_states_per_socket: further channels stay plain');
  t.equal(fulls(c, enc).length + deltas(c, enc).length, 0, 'private-encrypted-: never deltas, even when asked');
  t.ok(!std.has((x) => x.includes('pusher:delta') || x.includes('__delta_seq')), 'a client that never opted in gets plain messages whatever the patterns');
  c.send('pusher:subscribe', { channel: 'bad', delta: 'zip' });
  await c.until(() => c.has((x) => x.includes('subscription_error') && x.includes('InvalidDelta')), 'InvalidDelta');
  t.pass('a bad per-subscription delta is a subscription_error InvalidDelta');
});

t.test('presence member events reach delta subscribers; unsubscribe stops deltas', async (t) => {
  const srv = await startServer({ delta_compression: { enabled: true } });
  t.teardown(() => srv.stop());
  const c = await DeltaClient.open(srv, new core.DeltaDecoder());
  const other = await DeltaClient.open(srv, null);
  await c.enable();
  const ch = 'presence-room';
  const { sign } = await import('../helpers/auth');
  const join = (cl: DeltaClient, id: string) => {
    const cd = JSON.stringify({ user_id: id });
    cl.send('pusher:subscribe', { channel: ch, auth: sign(APP, cl.socketId, ch, cd), channel_data: cd });
    return cl.until(() => cl.has((x) => x.includes('subscription_succeeded')), 'presence joined');
  };
  await join(c, 'u1');
  await join(other, 'u2');
  await c.until(() => c.has((x) => x.includes('member_added') && x.includes('u2')), 'member_added');
  t.pass('member_added reached the delta subscriber');
  await stream(srv, ch, 3, [c, other]);
  t.equal(deltas(c, ch).length, 2, 'deltas on a presence channel');
  c.send('pusher:unsubscribe', { channel: ch });
  await c.subscribe('marker'); // answered after the unsubscribe (one socket, in order)
  await stream(srv, ch, 2, [other]);
  await publish(srv, 'marker', 'x', '1');
  await c.until(() => c.events('marker').length === 1, 'marker');
  t.equal(c.events(ch).length, 4, 'no message after unsubscribe (the marker came after them)');
});

t.test('max_state_age_secs: a stream idle longer restarts in full at seq 0; pool_size 2', async (t) => {
  const srv = await startServer({ delta_compression: { max_state_age_secs: 1, pool_size: 2 } });
  t.teardown(() => srv.stop());
  const c = await DeltaClient.open(srv, new core.DeltaDecoder());
  await c.enable();
  await c.subscribe('s');
  await stream(srv, 's', 3, [c]);
  t.equal(deltas(c, 's').length, 2, 'deltas while active');
  await new Promise((r) => setTimeout(r, 2500)); // the state must be older than 1 s and swept (1 s sweep)
  await stream(srv, 's', 2, [c]);
  const seqs = fulls(c, 's').filter((x) => x.startsWith('{"event":"price"')).map((x) => Number(/"__delta_seq":(\d+)/.exec(x)![1]));
  t.same(seqs, [0, 0], 'after the idle time the stream starts again at 0, in full');
});

t.test('delta_compression.enabled false: enable answers enabled false, no sequencer', async (t) => {
  const srv = await startServer({ delta_compression: { enabled: false } });
  t.teardown(() => srv.stop());
  const c = await DeltaClient.open(srv, new core.DeltaDecoder());
  c.send('pusher:enable_delta_compression', {});
  await c.until(() => c.has((x) => x.includes('delta_compression_enabled')), 'answer');
  t.ok(c.has((x) => x === '{"event":"pusher:delta_compression_enabled","data":{"enabled":false}}'), 'enabled: false');
  await c.subscribe('a', { delta: true });
  await stream(srv, 'a', 3, [c]);
  t.equal(deltas(c, 'a').length + fulls(c, 'a').length, 0, 'plain messages');
});

t.test('client events: the sender is excluded and steps out; the others decode them', async (t) => {
  const srv = await startServer({ delta_compression: { enabled: true } });
  t.teardown(() => srv.stop());
  const ch = 'private-chat';
  const sender = await DeltaClient.open(srv, new core.DeltaDecoder());
  const other = await DeltaClient.open(srv, new core.DeltaDecoder());
  const plain = await DeltaClient.open(srv, null);
  for (const c of [sender, other]) await c.enable();
  for (const c of [sender, other, plain]) await c.subscribe(ch);
  const books = new Books(rng(9));
  for (let i = 0; i < 5; i++) sender.send('client-quote', books.update('A'), ch);
  await Promise.all([other, plain].map((c) => c.until(() => c.events(ch).length === 5, 'the sender\'s client events')));
  // the sender missed its own five (excluded): the next one of the stream reaches it in full
  for (let i = 0; i < 5; i++) other.send('client-quote', books.update('A'), ch);
  await Promise.all([sender, plain].map((c) => c.until(() => c.events(ch).length === (c === plain ? 10 : 5), 'the other\'s client events')));
  const all = plain.events(ch);
  t.same(other.events(ch), all.slice(0, 5), 'the other delta client: identical envelopes');
  t.same(sender.events(ch), all.slice(5), 'the sender: identical envelopes of the other\'s events');
  t.ok(deltas(other, ch).length >= 3 && deltas(sender, ch).length >= 3, 'client events go as deltas');
  t.ok(fulls(sender, ch).length >= 1, 'the sender stepped back in with a full message');
  t.equal(sender.decoder!.stats.syncErrors + other.decoder!.stats.syncErrors, 0, 'no sync error');
});
