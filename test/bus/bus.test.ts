// Bus end to end in one thread: three Bus instances on one ring mesh (threads 0 and 1 are
// shards, 2 the primary), real rings and doorbells, no worker threads. publishTo, batches
// all or nothing, request/reply, stop and rewire.
import t, { Test } from 'tap';
import { Bus, BusFullError, BusPeerRestartedError, BusTimeoutError } from '../../src/bus/bus';
import { createDoorbell } from '../../src/bus/doorbell';
import type { ControlMsg, PublishFrame } from '../../src/bus/messages';
import { createRingBuffer } from '../../src/bus/ring';
import { createTopology, type BusTopology } from '../../src/bus/topology';

const RING = 4096; // small: a handful of frames fill it
const SPILL = 8192;

interface Node {
  bus: Bus;
  /** `channel:message` of every publish received, in order. */
  got: string[];
  controls: ControlMsg[];
}

function mesh(t: Test, opts: { start?: number[]; timeoutMs?: number; answer?: boolean } = {}) {
  const topo: BusTopology = createTopology(3, RING, SPILL, createRingBuffer, createDoorbell);
  const keepAlive = setInterval(() => {}, 1000); // a pending waitAsync keeps nothing alive
  const nodes: Node[] = [0, 1, 2].map((i) => ({ bus: new Bus(i, topo, opts.timeoutMs), got: [], controls: [] }));
  for (const i of opts.start ?? [0, 1, 2]) start(nodes, i, opts.answer ?? true);
  t.teardown(() => {
    clearInterval(keepAlive);
    for (const n of nodes) n.bus.stop();
  });
  return { topo, nodes };
}

function start(nodes: Node[], i: number, answer: boolean): void {
  const n = nodes[i];
  n.bus.start({
    onPublish: (f: PublishFrame) => { n.got.push(`${f.channel}:${Buffer.from(f.message).toString()}`); },
    onControl: (msg, from) => {
      n.controls.push(msg);
      if (answer && msg.type === 'channel_info') n.bus.reply(from, msg.req, { asked: msg.channel, by: from });
    },
    onError: (err) => { throw err; },
  });
}

const bytes = (s: string) => Buffer.from(s);
/** What the promise rejected with (tap's rejects() matches error classes by name, and ours share "Error"). */
const rejection = (p: Promise<unknown>): Promise<unknown> => p.then(() => new Error('resolved'), (err: unknown) => err);
/** What fn threw. */
function thrown(fn: () => void): unknown {
  try { fn(); } catch (err) { return err; }
  return null;
}
/** Resolves once pred() holds, checking every few ms (a positive marker, not a fixed sleep). */
async function until(pred: () => boolean, what: string, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}
/** Writes 1 KiB publishes from `from` to `to` until the ring and spill refuse one; then smaller ones. */
function fill(from: Bus, to: number): number {
  let n = 0;
  for (const size of [1024, 64, 1]) {
    try {
      for (;;) { from.publish(to, 'app', 'filler', '', new Uint8Array(size)); n++; }
    } catch (err) {
      if (!(err instanceof BusFullError)) throw err;
    }
  }
  return n;
}

t.test('publishTo: only the listed threads; this thread directly, the others over the rings', async (t) => {
  const { nodes: [a, b, c] } = mesh(t);
  a.bus.publishTo([1, 0], 'app', 'ch', '', bytes('one'));
  t.same(a.got, ['ch:one'], 'delivered to this thread before publishTo returns');
  a.bus.publishTo([2], 'app', 'marker', '', bytes('m'));
  b.bus.publish(2, 'app', 'marker', '', bytes('m'));
  await until(() => c.got.length === 2 && b.got.length === 1, 'the publishes and the markers');
  t.same(b.got, ['ch:one']);
  t.same(c.got, ['marker:m', 'marker:m'], 'thread 2 got only what was addressed to it');
  a.bus.publishTo([], 'app', 'none', '', bytes('x'));
  t.throws(() => a.bus.publishTo([1, 3], 'app', 'ch', '', bytes('x')), RangeError, 'no thread 3');
  t.throws(() => a.bus.publishTo([1.5], 'app', 'ch', '', bytes('x')), RangeError);
  t.throws(() => a.bus.publishTo([1, 2, 1], 'app', 'ch', '', bytes('x')), /listed twice/);
  t.throws(() => a.bus.publishTo([0, 0], 'app', 'ch', '', bytes('x')), /listed twice/);
  a.bus.publishTo([1, 0], 'app', 'ch', '', bytes('two')); // the marks of refused calls do not linger
  await until(() => b.got.length === 2, 'the second publish');
  t.same(a.got, ['ch:one', 'ch:two'], 'nothing of the refused calls was delivered');
  t.same(b.got, ['ch:one', 'ch:two']);
});

t.test('publishAll: every shard (not the primary, the last thread)', async (t) => {
  const { nodes: [a, b, c] } = mesh(t);
  b.bus.publishAll('app', 'all', '', bytes('x'));
  b.bus.publish(2, 'app', 'marker', '', bytes('m'));
  await until(() => a.got.length === 1 && c.got.length === 1, 'the publish and the marker');
  t.same(a.got, ['all:x']);
  t.same(b.got, ['all:x']);
  t.same(c.got, ['marker:m']);
});

t.test('publishTo is all or nothing: one full ring → BusFullError, nothing written anywhere', async (t) => {
  const { nodes: [a, , c] } = mesh(t, { start: [0, 2] }); // thread 1 reads nothing
  const n = fill(a.bus, 1);
  t.ok(n > 4, `${n} publishes filled the ring and spill to thread 1`);
  const spilled = a.bus.spilledBytes();
  const err = thrown(() => a.bus.publishTo([0, 2, 1], 'app', 'ch', '', new Uint8Array(1024)));
  t.ok(err instanceof BusFullError && /thread 1/.test(err.message), 'BusFullError for thread 1');
  t.equal(a.bus.spilledBytes(), spilled, 'nothing queued');
  t.same(a.got, [], 'not delivered to this thread either');
  a.bus.publishTo([2], 'app', 'marker', '', bytes('m'));
  await until(() => c.got.length === 1, 'the marker');
  t.same(c.got, ['marker:m'], 'thread 2 never got the refused publish');
});

t.test('batch: the frames of every ring are checked together before any is written', async (t) => {
  const { nodes: [a, b, c] } = mesh(t, { start: [0, 2] }); // thread 1 reads nothing
  const frame = new Uint8Array(1500);
  // Fill the ring and spill to thread 1 until a single 1500-byte publish still fits but two do not.
  let batch = a.bus.batch();
  for (;;) {
    const two = a.bus.batch().publish([1], 'app', 'f', '', frame).publish([1], 'app', 'f', '', frame);
    try {
      two.commit();
    } catch (err) {
      if (!(err instanceof BusFullError)) throw err;
      break;
    }
  }
  const before = a.bus.spilledBytes();
  batch.publish([0, 2], 'app', 'x', '', bytes('1'))
    .control(2, { type: 'terminate_user', app: 'app', userId: 'u' })
    .publish([0, 1, 2], 'app', 'y', '', frame)
    .publish([1], 'app', 'z', '', frame);
  t.equal(batch.size, 7);
  t.ok(thrown(() => batch.commit()) instanceof BusFullError, 'thread 1 can take one of its two frames, not both');
  t.equal(a.bus.spilledBytes(), before, 'nothing queued');
  t.same(a.got, [], 'nothing delivered here');
  t.throws(() => batch.commit(), /already committed/, 'a batch commits once');
  t.doesNotThrow(() => a.bus.publishTo([1], 'app', 'f', '', frame), 'one of the two alone would have gone');
  a.bus.publishTo([2], 'app', 'marker', '', bytes('m'));
  await until(() => c.got.length === 1, 'the marker');
  t.same(c.got, ['marker:m'], 'thread 2 got no part of the refused batch');
  t.same(c.controls, []);

  // Once thread 1 reads again, the same batch goes through whole, in order.
  start([a, b, c], 1, true);
  await until(() => a.bus.spilledBytes() === 0, 'the spill to thread 1 to empty');
  batch = a.bus.batch()
    .publish([0, 2], 'app', 'x', '', bytes('1'))
    .control(2, { type: 'terminate_user', app: 'app', userId: 'u' })
    .publish([2, 1, 0], 'app', 'y', '', bytes('2'))
    .publish([1], 'app', 'z', '', bytes('3'));
  const scratch = bytes('4');
  batch.publish([0], 'app', 'w', '', scratch);
  scratch[0] = 0x39; // the batch copied the bytes when they were added
  batch.commit();
  t.same(a.got, ['x:1', 'y:2', 'w:4'], 'this thread: its frames, in order, at commit');
  await until(() => c.got.length === 3 && b.got.at(-1) === 'z:3', 'the batch');
  t.same(c.got, ['marker:m', 'x:1', 'y:2']);
  t.same(c.controls, [{ type: 'terminate_user', app: 'app', userId: 'u' }]);
  t.same(b.got.filter((s) => !s.startsWith('f:')), ['y:2', 'z:3']);
  t.throws(() => a.bus.batch().publish([0, 0], 'app', 'x', '', bytes('1')), /listed twice/);
  t.throws(() => a.bus.batch().control(7, { type: 'terminate_user', app: 'app', userId: 'u' }), RangeError);
});

t.test('order across rings: a frame written after another was is delivered after it', async (t) => {
  const { nodes: [a, b, c] } = mesh(t);
  for (let i = 0; i < 50; i++) {
    a.bus.publish(2, 'app', 'o', '', bytes(`a${i}`));
    b.bus.publish(2, 'app', 'o', '', bytes(`b${i}`));
  }
  await until(() => c.got.length === 100, 'every frame');
  t.same(c.got, Array.from({ length: 100 }, (_, k) => `o:${k % 2 ? 'b' : 'a'}${k >> 1}`));
});

t.test('request/reply: the answer settles the request; a request to this thread too', async (t) => {
  const { nodes: [a] } = mesh(t);
  const [x, y] = await Promise.all([
    a.bus.request<{ asked: string; by: number }>(1, { type: 'channel_info', app: 'app', channel: 'c1' }),
    a.bus.request<{ asked: string; by: number }>(2, { type: 'channel_info', app: 'app', channel: 'c2' }),
  ]);
  t.same(x, { asked: 'c1', by: 0 });
  t.same(y, { asked: 'c2', by: 0 });
  t.same(await a.bus.request(0, { type: 'channel_info', app: 'app', channel: 'self' }), { asked: 'self', by: 0 });
});

t.test('request: no answer → BusTimeoutError; a full ring → BusFullError', async (t) => {
  const { nodes: [a] } = mesh(t, { timeoutMs: 30, start: [0, 2], answer: false });
  await t.rejects(a.bus.request(2, { type: 'channel_info', app: 'app', channel: 'c' }), { code: 'RC_ERR_BUS_TIMEOUT', message: /did not answer channel_info/ });
  fill(a.bus, 1);
  t.ok(await rejection(a.bus.request(1, { type: 'members', app: 'app', channel: 'presence-c' })) instanceof BusFullError);
});

t.test('rewire: requests to the restarted peer fail at once with BusPeerRestartedError', async (t) => {
  const { topo, nodes: [a] } = mesh(t, { start: [0, 2], answer: false });
  const waiting = a.bus.request(1, { type: 'members', app: 'app', channel: 'presence-c' });
  const other = a.bus.request(2, { type: 'members', app: 'app', channel: 'presence-c' });
  a.bus.rewire(1, createRingBuffer(RING), createRingBuffer(RING), createDoorbell());
  t.ok(await rejection(waiting) instanceof BusPeerRestartedError);
  t.equal(topo.rings[0][1]!.byteLength, 128 + RING, 'the topology holds the new rings');
  a.bus.stop();
  const err = await rejection(other);
  t.ok(err instanceof BusTimeoutError && !(err instanceof BusPeerRestartedError), 'stop() rejects what still waits');
});

t.test('stop(): pending requests rejected, writes refused', async (t) => {
  const { nodes: [a] } = mesh(t, { answer: false });
  const pending = [
    a.bus.request(1, { type: 'channel_info', app: 'app', channel: 'c' }),
    a.bus.request(2, { type: 'channels_list', app: 'app', prefix: '' }),
  ];
  a.bus.stop();
  for (const p of pending) {
    const err = await rejection(p);
    t.ok(err instanceof BusTimeoutError && !(err instanceof BusPeerRestartedError), 'BusTimeoutError');
  }
  t.ok(thrown(() => a.bus.publish(1, 'app', 'c', '', bytes('x'))) instanceof BusFullError);
  t.ok(thrown(() => a.bus.publishTo([0, 1], 'app', 'c', '', bytes('x'))) instanceof BusFullError);
  t.ok(thrown(() => a.bus.control(1, { type: 'terminate_user', app: 'app', userId: 'u' })) instanceof BusFullError);
  t.ok(thrown(() => a.bus.batch().publish([1], 'app', 'c', '', bytes('x')).commit()) instanceof BusFullError);
  t.ok(await rejection(a.bus.request(1, { type: 'members', app: 'app', channel: 'presence-c' })) instanceof BusFullError);
});
