// History channels with delta compression (docs/history.md, "With delta compression";
// the protocol "History, rewind and recovery"): a channel matched by both channel_history and
// channel_delta_compression gives its delta subscribers pusher:delta frames; a subscription
// with `recover` gets `__serial` on full messages and `"serial"` inside each pusher:delta's
// data; rewound and replayed messages come as plain full messages, after which the next
// live message of each stream goes full, so the decoder is in step. Raw `ws` clients for
// the exact frames (decoded with client/delta-core.js), and pusher-js with the client
// plug-ins (client/delta.js + client/recovery.js) behind a proxy that cuts its TCP
// connection. Workers 1 and 4 (RINGCAST_TEST_WORKERS).
import { createRequire } from 'node:module';
import path from 'node:path';
import t, { type Test } from 'tap';
import type PusherJS from 'pusher-js';
import { APP, RawClient, WORKERS, eventually, startServer, type Frame, type TestServer } from '../helpers/server';
import { connected, pusherJs } from '../helpers/pusher-js';
import { cutProxy } from '../helpers/cut-proxy';
import { core, type Decoder } from '../delta/clients';

type ClientModule = typeof import('../../client/index.js');
const req = createRequire(__filename);
const CLIENT = path.resolve(__dirname, '..', '..', '..', 'client');
const recoveryClient = (): ClientModule => req(path.join(CLIENT, 'index.js')) as ClientModule;
interface DeltaHandle { stats: { full: number; deltas: number; syncErrors: number }; detach(): void }
const deltaClient = () => req(path.join(CLIENT, 'delta.js')) as { withDeltaCompression(p: PusherJS): Promise<DeltaHandle> };

const HISTORY = { 'hd-*': { size: 500, ttl: 120, rewind: 5 } };
const DELTA = { 'hd-*': 'Fossil' };

/** A message of about 400 bytes where only `i` changes: most go as small deltas. */
const body = (i: number) => ({ i, book: 'x'.repeat(300), bids: [[100, 1], [99, 2]], asks: [[101, 1], [102, 3]] });

async function server(t: Test, extra: Record<string, unknown> = {}): Promise<TestServer> {
  const srv = await startServer({ apps: [{ ...APP, channel_history: HISTORY as never, channel_delta_compression: DELTA as never, ...extra }] });
  t.teardown(() => srv.stop());
  return srv;
}

/** A raw client that opted into delta compression; every frame decoded with the shipped decoder. */
class Raw {
  readonly decoder: Decoder = new core.DeltaDecoder();
  /** Per channel: [i, serial | undefined, kind] of every application event, in arrival order. */
  readonly got = new Map<string, [number, number | undefined, 'plain' | 'full' | 'delta'][]>();
  constructor(readonly c: RawClient) {
    c.ws.on('message', (raw) => this.on(raw.toString()));
  }

  static async open(srv: TestServer): Promise<Raw> {
    const r = new Raw(srv.track(await RawClient.connect(srv.wsUrl())));
    r.c.send({ event: 'pusher:enable_delta_compression', data: {} });
    await r.c.event('pusher:delta_compression_enabled');
    return r;
  }

  private on(text: string): void {
    const f = JSON.parse(text) as Frame & { __serial?: number; __delta_seq?: number };
    const r = this.decoder.receive(text) as { type: string; channel: string; envelope?: string; serial?: number } | null;
    if (r?.type === 'sync_error') throw new Error(`delta not decodable: ${text}`);
    if (f.channel === undefined) return;
    const list = this.got.get(f.channel) ?? [];
    this.got.set(f.channel, list);
    if (r?.type === 'event') {
      const env = JSON.parse(r.envelope!) as { data: string };
      list.push([(JSON.parse(env.data) as { i: number }).i, r.serial, 'delta']);
    } else if (f.event === 'ev') {
      list.push([(JSON.parse(f.data as string) as { i: number }).i, f.__serial, f.__delta_seq === undefined ? 'plain' : 'full']);
    }
  }

  is(channel: string) {
    return (this.got.get(channel) ?? []).map((x) => x[0]);
  }
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, k) => from + k);

t.test(`raw ws: delta frames on a history channel, serial inside data, rewind and resume (${WORKERS} workers)`, async (t) => {
  const srv = await server(t);
  const sdk = srv.sdk();
  const publish = async (channel: string, from: number, to: number) => {
    for (let i = from; i <= to; i++) await sdk.trigger(channel, 'ev', body(i));
  };

  // a subscription with positions from the start
  const a = await Raw.open(srv);
  await a.c.subscribe('hd-a', { recover: {} });
  const rec = await a.c.event('pusher_internal:recovery', 'hd-a');
  t.match(rec.data, { serial: 0, recovered: false, missed: 0 });
  const epoch = rec.data.epoch as string;
  await publish('hd-a', 1, 30);
  await eventually(() => a.is('hd-a').length >= 30, 10_000, 'the 30 messages');
  const seen = a.got.get('hd-a')!;
  t.same(a.is('hd-a'), range(1, 30), 'every message decoded, once, in order');
  t.same(seen.map((x) => x[1]), range(1, 30), 'each one with its serial (__serial on full ones, "serial" in pusher:delta data)');
  t.equal(seen[0][2], 'full', 'the first one full');
  t.ok(seen.filter((x) => x[2] === 'delta').length >= 20, `most as pusher:delta (${seen.filter((x) => x[2] === 'delta').length})`);
  const rawDelta = a.c.frames.find((f) => f.event === 'pusher:delta' && f.channel === 'hd-a')!;
  t.type(rawDelta.data.serial, 'number', '"serial" is a field of the pusher:delta data');
  t.type(rawDelta.data.seq, 'number');

  // a stock delta subscription (no recover): the rewind as plain frames, then live, full first
  const b = await Raw.open(srv);
  await b.c.subscribe('hd-a');
  await eventually(() => b.is('hd-a').length >= 5, 5000, 'the rewind');
  await publish('hd-a', 31, 40);
  await eventually(() => b.is('hd-a').length >= 15 && a.is('hd-a').length >= 40, 10_000, 'live after the rewind');
  const bs = b.got.get('hd-a')!;
  t.same(b.is('hd-a'), range(26, 40), 'rewind 26…30, then 31…40: no gap, no duplicate');
  t.same(bs.slice(0, 5).map((x) => x[2]), ['plain', 'plain', 'plain', 'plain', 'plain'], 'the rewind as plain messages');
  t.equal(bs[5][2], 'full', 'the first live one full (the client has no base)');
  t.ok(bs.slice(6).some((x) => x[2] === 'delta'), 'then deltas');
  t.ok(bs.every((x) => x[1] === undefined), 'no serial for a subscription without recover');
  t.notOk(b.c.frames.some((f) => f.event === 'pusher:delta' && f.channel === 'hd-a' && 'serial' in f.data), 'no "serial" in its deltas');

  // a resume after serial 12: the replay 13…40 with __serial (plain), then live with serials
  const c = await Raw.open(srv);
  await c.c.subscribe('hd-a', { recover: { epoch, serial: 12 } });
  const r2 = await c.c.event('pusher_internal:recovery', 'hd-a');
  t.match(r2.data, { epoch, serial: 40, recovered: true, missed: 28 });
  await eventually(() => c.is('hd-a').length >= 28, 5000, 'the replay');
  await publish('hd-a', 41, 50);
  await eventually(() => c.is('hd-a').length >= 38, 10_000, 'live after the replay');
  const cs = c.got.get('hd-a')!;
  t.same(c.is('hd-a'), range(13, 50), 'replay then live: no gap, no duplicate');
  t.same(cs.map((x) => x[1]), range(13, 50), 'every one with its serial');
  t.ok(cs.slice(0, 28).every((x) => x[2] === 'plain'), 'the replay as plain messages');
  t.equal(cs[28][2], 'full', 'the first live one full');
  t.ok(cs.slice(29).some((x) => x[2] === 'delta'), 'then deltas');
  t.equal(a.decoder.stats.syncErrors + b.decoder.stats.syncErrors + c.decoder.stats.syncErrors, 0, 'no sync error');

  // a plain (non-delta) subscriber beside them still gets every message as before
  const p = srv.track(await RawClient.connect(srv.wsUrl()));
  await p.subscribe('hd-a', { recover: { epoch, serial: 45 } });
  await p.event('pusher_internal:recovery', 'hd-a');
  await publish('hd-a', 51, 51);
  const last = await p.next((f) => f.event === 'ev' && (JSON.parse(f.data as string) as { i: number }).i === 51, 5000);
  t.equal((last as Frame & { __serial: number }).__serial, 51);
  t.notOk(p.frames.some((f) => f.event === 'pusher:delta'), 'no delta to a socket that did not opt in');
});

t.test(`raw ws: a rewind raced by a publish storm decodes every message once (${WORKERS} workers)`, async (t) => {
  const srv = await server(t);
  const sdk = srv.sdk();
  const N = 150;
  const storm = (async () => {
    for (let i = 1; i <= N; i += 5) await sdk.triggerBatch(range(i, i + 4).map((k) => ({ channel: 'hd-s', name: 'ev', data: JSON.stringify(body(k)) })));
  })();
  const clients: Raw[] = [];
  for (let k = 0; k < 6; k++) {
    const r = await Raw.open(srv);
    await r.c.subscribe('hd-s', k % 2 === 0 ? { recover: {} } : {});
    clients.push(r);
  }
  await storm;
  await sdk.trigger('hd-s', 'ev', body(N + 1));
  await eventually(() => clients.every((r) => r.is('hd-s').includes(N + 1)), 15_000, 'the marker on every client');
  for (const [k, r] of clients.entries()) {
    const is = r.is('hd-s');
    t.same(is, range(is[0], N + 1), `client ${k}: consecutive from ${is[0]}, no gap, no duplicate`);
    if (k % 2 === 0) t.ok(r.got.get('hd-s')!.every((x) => x[1] === x[0]), `client ${k}: serial = i on every message`);
    t.equal(r.decoder.stats.syncErrors, 0, `client ${k}: no sync error`);
  }
});

const CHANNELS = ['hd-1', 'hd-2', 'hd-3'];

t.test(`pusher-js + client/delta.js + withRecovery: a dropped TCP connection misses nothing, every delta decodes (${WORKERS} workers)`, async (t) => {
  const srv = await server(t);
  const px = await cutProxy(srv.port);
  t.teardown(() => px.close());
  const pusher: PusherJS = srv.track(pusherJs(px.port));
  const failed: unknown[] = [];
  const recovery = recoveryClient().withRecovery(pusher, { onFailed: (c, info) => failed.push([c, info]) });
  const delta = await deltaClient().withDeltaCompression(pusher);
  await connected(pusher);
  const got = new Map(CHANNELS.map((c) => [c, [] as number[]]));
  const bad: unknown[] = [];
  await Promise.all(CHANNELS.map((name) => new Promise<void>((resolve) => {
    const ch = pusher.subscribe(name);
    ch.bind('ev', (d: ReturnType<typeof body>) => {
      // the decoded data, whole: a delta applied to a wrong base would not give this
      if (JSON.stringify(d) !== JSON.stringify(body(d.i))) bad.push(d);
      got.get(name)!.push(d.i);
    });
    ch.bind('pusher:subscription_succeeded', () => resolve());
  })));
  await eventually(() => CHANNELS.every((c) => recovery.positions.has(c)), 5000, 'positions');
  const sdk = srv.sdk();
  const publish = async (from: number, to: number) => {
    for (let i = from; i <= to; i++) await sdk.triggerBatch(CHANNELS.map((channel) => ({ channel, name: 'ev', data: JSON.stringify(body(i)) })));
  };
  await publish(1, 20);
  await eventually(() => CHANNELS.every((c) => got.get(c)!.length === 20), 10_000, 'the first messages');
  t.ok(delta.stats.deltas > 0, `deltas before the cut (${delta.stats.deltas})`);
  t.equal(recovery.positions.get('hd-1')!.serial, 20, 'the position moved with the deltas');

  px.cut();
  await publish(21, 220);
  const before = px.accepted();
  px.allow();
  await eventually(() => px.accepted() > before && pusher.connection.state === 'connected', 30_000, 'the reconnect');
  await eventually(() => CHANNELS.every((c) => got.get(c)!.length >= 220), 15_000, 'the missed messages');
  const deltasBefore = delta.stats.deltas;
  await publish(221, 240);
  await eventually(() => CHANNELS.every((c) => got.get(c)!.includes(240)), 10_000, 'live after the resume');
  for (const c of CHANNELS) t.same(got.get(c), range(1, 240), `${c}: every message once, in order`);
  t.same(bad, [], 'every decoded message is the published one');
  t.ok(delta.stats.deltas > deltasBefore, `live deltas after the resume (${delta.stats.deltas - deltasBefore})`);
  t.equal(delta.stats.syncErrors, 0, 'no sync error');
  t.equal(recovery.positions.get('hd-2')!.serial, 240, 'the position follows the last delta');
  t.same(failed, [], 'no recovery failed');
  pusher.disconnect();
});

t.test(`stock pusher-js with client/delta.js on a history channel with rewind: the rewind, then deltas that decode (${WORKERS} workers)`, async (t) => {
  const srv = await server(t);
  const sdk = srv.sdk();
  for (let i = 1; i <= 12; i++) await sdk.trigger('hd-r', 'ev', body(i));
  const pusher: PusherJS = srv.track(pusherJs(srv.port));
  const delta = await deltaClient().withDeltaCompression(pusher);
  await connected(pusher);
  const got: number[] = [];
  const bad: unknown[] = [];
  await new Promise<void>((resolve) => {
    const ch = pusher.subscribe('hd-r');
    ch.bind('ev', (d: ReturnType<typeof body>) => {
      if (JSON.stringify(d) !== JSON.stringify(body(d.i))) bad.push(d);
      got.push(d.i);
    });
    ch.bind('pusher:subscription_succeeded', () => resolve());
  });
  await eventually(() => got.length >= 5, 5000, 'the rewind');
  for (let i = 13; i <= 40; i++) await sdk.trigger('hd-r', 'ev', body(i));
  await eventually(() => got.includes(40), 10_000, 'live');
  t.same(got, range(8, 40), 'rewind 8…12, then live, no gap, no duplicate');
  t.same(bad, []);
  t.ok(delta.stats.deltas >= 20, `live messages as deltas (${delta.stats.deltas})`);
  t.equal(delta.stats.syncErrors, 0, 'no sync error');
  pusher.disconnect();
});
