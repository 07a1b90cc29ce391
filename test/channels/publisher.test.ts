import t from 'tap';
import type { TemplatedApp } from 'uWebSockets.js';
import { Bus } from '../../src/bus/bus';
import { decodeControl, decodePublish, FrameType, type ControlMsg, type PublishFrame } from '../../src/bus/messages';
import { createTopology, type BusTopology } from '../../src/bus/topology';
import { createDoorbell } from '../../src/bus/doorbell';
import { createRingBuffer, RingReader } from '../../src/bus/ring';
import { CacheChannels } from '../../src/channels/cache';
import { nativeFanout } from '../../src/channels/fanout';
import { allocateInterest, Interest } from '../../src/channels/interest';
import { createPublisher, type OutboundStage, type Outgoing, type Publisher } from '../../src/channels/publisher';
import { ownerOf } from '../../src/channels/owner';
import { eventually } from '../helpers/server';

// The publish pipeline on a real bus: thread 0 is the shard under test; the rings it
// writes to threads 1 and 2 are read back here. Interest bits are set by other Interest
// views of the same table, as the other shards would.

const noLog = { error: () => undefined, warn: () => undefined, info: () => undefined, debug: () => undefined } as never;

interface Rig {
  bus: Bus;
  topo: BusTopology;
  publisher: Publisher;
  /** Interest views of shards 0..2 over one table. */
  views: Interest[];
  delivered: string[];
  /** Frames waiting in the ring from thread 0 to `to`. */
  written(to: number): { publishes: PublishFrame[]; controls: ControlMsg[] };
}

function rig(opts: { shards?: number; ringBytes?: number; spill?: number; stages?: { delta?: OutboundStage[]; adapter?: OutboundStage[] }; cache?: boolean } = {}): Rig {
  const shards = opts.shards ?? 3;
  const topo = createTopology(shards + 1, opts.ringBytes ?? 64 * 1024, opts.spill ?? 1024 * 1024, createRingBuffer, createDoorbell);
  const bus = new Bus(0, topo);
  const table = allocateInterest(shards, 1 << 10);
  const views = Array.from({ length: shards }, (_, s) => new Interest(table, shards, s));
  const delivered: string[] = [];
  const cache = opts.cache ? new CacheChannels(bus, shards, 60) : null;
  const publisher = createPublisher({
    bus, interest: views[0], shards, uws: null, sockets: new Map(), cache, log: noLog, out: (e) => e,
    stages: opts.stages,
  });
  bus.start({
    onPublish: (f) => { delivered.push(Buffer.from(f.message).toString()); publisher.deliver(f); },
    onControl: () => undefined,
    onError: (err) => { throw err; },
  });
  const readers = new Map<number, RingReader>();
  return {
    bus, topo, publisher, views, delivered,
    written(to) {
      let r = readers.get(to);
      if (!r) readers.set(to, (r = new RingReader(topo.rings[0][to]!)));
      const publishes: PublishFrame[] = [];
      const controls: ControlMsg[] = [];
      r.drain((type, payload) => {
        if (type === FrameType.Publish) publishes.push(decodePublish(payload.slice()));
        else controls.push(decodeControl(payload));
      });
      return { publishes, controls };
    },
  };
}

const api = (channel: string, data: string, except = ''): Outgoing =>
  ({ kind: 'api', app: 'app', channel, except, message: `{"event":"e","channel":"${channel}","data":"${data}"}` });

t.test('a publish goes only to the shards with interest in its channel', async (t) => {
  const r = rig();
  t.teardown(() => r.bus.stop());
  r.publisher.publishOne(api('nobody', '1'));
  t.same(r.written(1).publishes, [], 'no interest anywhere: nothing written');
  t.same(r.delivered, []);

  r.views[2].add('app', 'ch');
  r.publisher.publishOne(api('ch', '2'));
  t.equal(r.written(1).publishes.length, 0, 'shard 1 has no subscriber: skipped');
  const to2 = r.written(2).publishes;
  t.equal(to2.length, 1, 'shard 2 gets it');
  t.equal(Buffer.from(to2[0].message).toString(), api('ch', '2').message);
  t.same(r.delivered, [], 'not delivered locally (no local interest)');

  r.views[0].add('app', 'ch');
  r.publisher.publishOne(api('ch', '3', '1.2'));
  t.same(r.delivered, [api('ch', '3').message], 'local interest: delivered by a direct call');
  t.equal(r.written(2).publishes[0].except, '1.2', 'the excluded socket travels with the frame');

  r.views[2].remove('app', 'ch');
  r.publisher.publishOne(api('ch', '4'));
  t.equal(r.written(2).publishes.length, 0, 'interest gone: shard 2 skipped again');
});

t.test('interest counts subscriptions: the bit stays until the last one goes', async (t) => {
  const table = allocateInterest(40, 1 << 4);
  const a = new Interest(table, 40, 35); // a second word of bits
  const reader = new Interest(table, 40, -1);
  a.add('app', 'x');
  a.add('app', 'x');
  t.same(reader.targets('app', 'x', []), [35]);
  a.remove('app', 'x');
  t.same(reader.targets('app', 'x', []), [35], 'one subscription left');
  a.remove('app', 'x');
  t.same(reader.targets('app', 'x', []), []);
  a.remove('app', 'x');
  a.add('app', 'x');
  t.same(reader.targets('app', 'x', []), [35], 'an extra remove never drives the count below zero');
  reader.clearShard(35);
  t.same(reader.targets('app', 'x', []), [], 'clearShard drops every bit of a dead shard');
  t.throws(() => new Interest(new SharedArrayBuffer(12), 1, 0), RangeError, 'slots must be a power of two');
});

t.test('a multi-channel publish is all or nothing when a queue is full', async (t) => {
  // a 4 KiB ring with 8 KiB of spill: the second shard's queue fills first
  const r = rig({ ringBytes: 4096, spill: 8192 });
  t.teardown(() => r.bus.stop());
  r.views[1].add('app', 'a');
  r.views[2].add('app', 'b');
  const big = 'x'.repeat(3000);
  // fill shard 2's ring and most of its spill
  r.publisher.publishOne(api('b', big));
  r.publisher.publishOne(api('b', big));
  r.publisher.publishOne(api('b', big));
  const before1 = r.written(1).publishes.length;
  t.equal(before1, 0);
  t.throws(() => r.publisher.publish([api('a', 'first'), api('b', big), api('b', big)]), { code: 'RC_ERR_BUS_FULL' }, '503: queue of shard 2 full');
  t.equal(r.written(1).publishes.length, 0, 'the first channel (shard 1, room to spare) got nothing');
  r.publisher.publish([api('a', 'first')]);
  t.equal(r.written(1).publishes.length, 1, 'the same publish alone goes through');
});

t.test('a cache channel: the owner hears of it before the frames, and not at all on a 503', async (t) => {
  const r = rig({ cache: true, ringBytes: 4096, spill: 8192 });
  t.teardown(() => r.bus.stop());
  const channel = ['cache-a', 'cache-b', 'cache-c', 'cache-d'].find((c) => ownerOf('app', c, 3) === 1)!;
  r.views[1].add('app', channel);
  r.publisher.publishOne(api(channel, 'v1'));
  const got = r.written(1);
  t.same(got.controls.map((c) => c.type), ['cache_set'], 'cache_set to the owner');
  t.equal(got.publishes.length, 1, 'and the publish');
  // no subscribers at all: the entry is still stored
  r.views[1].remove('app', channel);
  r.publisher.publishOne(api(channel, 'v2'));
  t.same(r.written(1).controls.map((c) => c.type), ['cache_set'], 'stored without subscribers');
});

t.test('outbound stages see every message and may take it over', async (t) => {
  const seen: string[] = [];
  const taker: OutboundStage = { out: (m) => { seen.push('delta:' + m.channel); return m.channel === 'taken'; } };
  const copier: OutboundStage = { out: (m) => { seen.push('adapter:' + m.channel); return false; } };
  const r = rig({ stages: { delta: [taker], adapter: [copier] } });
  t.teardown(() => r.bus.stop());
  r.views[1].add('app', 'taken');
  r.views[1].add('app', 'plain');
  r.publisher.publishOne(api('taken', '1'));
  r.publisher.publishOne(api('plain', '2'));
  t.same(seen, ['delta:taken', 'delta:plain', 'adapter:plain'], 'delta route first, then adapter out');
  const w = r.written(1).publishes.map((f) => f.channel);
  t.same(w, ['plain'], 'the message a stage took over does not go on to the bus');
});

t.test('member events go to the shards with interest', async (t) => {
  const r = rig();
  t.teardown(() => r.bus.stop());
  r.views[2].add('app', 'presence-x');
  r.publisher.member({ type: 'member', op: 'added', app: 'app', channel: 'presence-x', userId: 'u1', userInfo: { a: 1 }, except: '1.1' });
  t.equal(r.written(1).controls.length, 0);
  const c = r.written(2).controls;
  t.equal(c.length, 1);
  t.match(c[0], { type: 'member', op: 'added', userId: 'u1', except: '1.1' });
});

// The reused encoding buffer (moved here from shard/fanout.ts).

t.test('frames held back by the bus keep their own bytes', async (t) => {
  const r = rig();
  t.teardown(() => r.bus.stop());
  r.views[0].add('app', 'ch');
  r.bus.pauseDraining(50); // every local publish is now held until the pause ends
  const frames = ['{"event":"a","data":"first"}', '{"event":"b","data":"é second, longer"}', '{"event":"c","data":"3"}'];
  for (const m of frames) r.publisher.publishOne({ kind: 'api', app: 'app', channel: 'ch', except: '', message: m });
  t.same(r.delivered, [], 'nothing delivered while paused');
  await eventually(() => r.delivered.length >= frames.length, 5000, 'the held frames to be delivered');
  t.same(r.delivered, frames, 'each held frame delivered as it was published');
});

t.test('a publish during a delivery does not overwrite the frame being delivered', async (t) => {
  const topo = createTopology(2, 64 * 1024, 1024 * 1024, createRingBuffer, createDoorbell);
  const bus = new Bus(0, topo);
  const interest = new Interest(allocateInterest(1, 1 << 4), 1, 0);
  interest.add('app', 'ch');
  interest.add('app', 'other');
  const publisher = createPublisher({ bus, interest, shards: 1, uws: nativeFanout({} as TemplatedApp), sockets: new Map(), log: noLog, out: (e) => e });
  const seen: string[] = [];
  let nested = false;
  bus.start({
    onPublish: (f) => {
      const before = Buffer.from(f.message).toString();
      if (!nested) {
        nested = true;
        publisher.publishOne({ kind: 'api', app: 'app', channel: 'other', except: '', message: '{"event":"nested","data":"' + 'x'.repeat(40) + '"}' });
      }
      seen.push(before + ' | ' + Buffer.from(f.message).toString());
    },
    onControl: () => undefined,
    onError: (err) => { throw err; },
  });
  t.teardown(() => bus.stop());
  publisher.publishOne({ kind: 'api', app: 'app', channel: 'ch', except: '', message: '{"event":"outer","data":"y"}' });
  t.equal(seen.length, 2);
  t.equal(seen[1], '{"event":"outer","data":"y"} | {"event":"outer","data":"y"}', 'outer frame unchanged after the nested publish');
});

t.test('frames of every size are encoded whole', async (t) => {
  const r = rig();
  t.teardown(() => r.bus.stop());
  r.views[0].add('app', 'ch');
  const sizes = [0, 1, 1000, 16 * 1024, 100 * 1024, 2 * 1024 * 1024];
  const frames = sizes.map((n, i) => `{"event":"e${i}","data":"${'ü'.repeat(n >> 1)}"}`);
  for (const m of frames) r.publisher.publishOne({ kind: 'api', app: 'app', channel: 'ch', except: '', message: m });
  t.equal(r.delivered.length, frames.length);
  for (let i = 0; i < frames.length; i++) t.ok(r.delivered[i] === frames[i], `${Buffer.byteLength(frames[i])} bytes`);
});
