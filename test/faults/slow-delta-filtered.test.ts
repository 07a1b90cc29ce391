// Slow consumers reached through the delta topics or the filter stage get the same
// treatment as plain ones (src/ws/backpressure.ts "where"; test/faults/slow-consumer.test.ts
// for plain ones). A raw TCP client subscribes with delta compression, or with a tag
// filter, then stops reading while 30 KB publishes stream to the channel until the
// server reports it full (websocket_buffer_full_total: the loopback's kernel buffers take
// from a few MB to tens of MB first), then 40 more:
//  - drop: it misses a contiguous run of messages, each counted exactly
//    (websocket_messages_dropped_total; for the filtered one only the events its filter
//    matches), and once it reads again it gets the messages that follow (a delta one
//    restarts in full: every message decodes, no sync error);
//  - close: it is closed with 4100.
// A plain client on the same channel gets everything meanwhile.

import { randomBytes } from 'node:crypto';
import t from 'tap';
import WebSocket from 'ws';
import { APP, eventually, startServer, type TestServer } from '../helpers/server';
import { core, type Decoder } from '../delta/clients';
import { metric, publish } from './api';
import { TcpWs } from './raw-ws';

const MAX_BYTES = 1024 * 1024;
const PER_REQUEST = 3;
/** Ticks published per round before the metric is read again; the most rounds (60 MB). */
const ROUND = 30;
const MAX_TICKS = 2000;
/** Every fourth tick is tagged `us`: the filtered client (region = eu) does not get it. */
const regionOf = (seq: number) => (seq % 4 === 3 ? 'us' : 'eu');

type Kind = 'delta' | 'filtered';

function tick(seq: number, pad: string) {
  return { channel: 'feed', name: 'tick', data: JSON.stringify({ seq, pad }), tags: { region: regionOf(seq) } };
}

/** Ticks seq [from, to), a random (incompressible) pad each, in batches. */
async function stream(srv: TestServer, from: number, to: number, big: boolean): Promise<void> {
  for (let seq = from; seq < to; seq += PER_REQUEST) {
    const batch = [];
    for (let s = seq; s < Math.min(to, seq + PER_REQUEST); s++) batch.push(tick(s, big ? randomBytes(22_000).toString('base64') : 'small'));
    const r = await publish(srv.port, { batch }, { batch: true });
    if (r.status !== 200) throw new Error(`publish answered ${r.status}: ${r.text}`);
  }
}

async function normalClient(srv: TestServer): Promise<{ ws: WebSocket; seqs: number[] }> {
  const ws = new WebSocket(srv.wsUrl());
  const seqs: number[] = [];
  await new Promise<void>((resolve, reject) => {
    ws.on('error', reject);
    ws.on('message', (raw) => {
      const f = JSON.parse(raw.toString()) as { event: string; data: string };
      if (f.event === 'pusher:connection_established') ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'feed' } }));
      else if (f.event === 'pusher_internal:subscription_succeeded') resolve();
      else if (f.event === 'tick') seqs.push((JSON.parse(f.data) as { seq: number }).seq);
    });
  });
  return { ws, seqs };
}

async function slowClient(srv: TestServer, kind: Kind): Promise<TcpWs> {
  const c = await TcpWs.connect(srv.port, `/app/${APP.key}?protocol=7&client=js&version=8.4.0`);
  await c.frame((f) => f.event === 'pusher:connection_established');
  const extra = kind === 'delta' ? { delta: 'fossil' } : { filter: { key: 'region', cmp: 'eq', val: 'eu' } };
  c.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'feed', ...extra } }));
  await c.frame((f) => f.event === 'pusher_internal:subscription_succeeded');
  return c;
}

/** What a client decoded: tick seqs (deltas applied), probes, sync errors. */
function decode(c: TcpWs, decoder: Decoder): { ticks: number[]; probes: number; syncErrors: number } {
  const out = { ticks: [] as number[], probes: 0, syncErrors: 0 };
  for (const text of c.texts) {
    const r = decoder.receive(text);
    if (r?.type === 'sync_error') out.syncErrors++;
    const envelope = r?.type === 'event' ? r.envelope! : text;
    const f = JSON.parse(envelope) as { event: string; data: string }; // throws on a torn frame
    if (f.event === 'tick') out.ticks.push((JSON.parse(f.data) as { seq: number }).seq);
    else if (f.event === 'probe') out.probes++;
  }
  return out;
}

const increasing = (xs: number[]) => xs.every((x, i) => i === 0 || x > xs[i - 1]);

for (const kind of ['delta', 'filtered'] as const) {
  for (const mode of ['drop', 'close'] as const) {
    t.test(`a ${kind} subscriber that stops reading, on_backpressure: ${mode}`, async (t) => {
      const srv = await startServer({
        websocket: { max_bytes: MAX_BYTES, max_messages: 100_000, on_backpressure: mode, auto_ping: false },
        metrics: { enabled: true, port: 0, host: '127.0.0.1' },
        event_limits: { max_payload_in_kb: 100 },
        tag_filtering: { enabled: true },
        ...(kind === 'delta' ? { delta_compression: { enabled: true } } : {}),
      });
      t.teardown(() => srv.stop());
      const port = srv.server.metricsPort!;
      const normal = await normalClient(srv);
      srv.track(normal.ws);
      const slow = await slowClient(srv, kind);
      t.teardown(() => slow.destroy());
      slow.pause();

      let N = 0;
      for (let full = 0; full === 0;) {
        if (N >= MAX_TICKS) throw new Error(`the slow client was not reported full after ${N} ticks`);
        await stream(srv, N, N + ROUND, true);
        N += ROUND;
        full = await metric(port, 'websocket_buffer_full_total', { action: mode });
      }
      // close: uWS gives a socket the server ended (ws.end) only its ping margin to take
      // what was queued before the 4100 close frame, then cuts it; so the slow client reads
      // again as soon as the server has decided to close it, not after the rest of the
      // stream and the plain client's check, which outlast the margin on a loaded machine.
      if (mode === 'close') slow.resume();
      await stream(srv, N, N + 40, true);
      N += 40;
      t.comment(`${N} ticks (${(N * 30 / 1024).toFixed(0)} MB) published`);
      const until = Date.now() + 20_000;
      while (normal.seqs.length < N && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      t.equal(normal.seqs.length, N, 'the plain client got every message meanwhile');
      // the ticks the slow client was meant to get
      const meant = Array.from({ length: N }, (_, s) => s).filter((s) => kind === 'delta' || regionOf(s) === 'eu');

      if (mode === 'close') {
        await slow.until(() => slow.ended, 20_000, 'the slow client to be closed');
        t.equal(slow.closeCode, 4100, 'closed with 4100 (back off, then reconnect)');
        t.equal(slow.partialAtEnd, 0, 'no frame cut short');
        const got = decode(slow, new core.DeltaDecoder()).ticks;
        t.ok(got.length < meant.length && increasing(got), `it got ${got.length} of ${meant.length}, in order, before the close`);
        t.equal(await metric(port, 'websocket_buffer_full_total', { action: 'close' }), 1, 'buffer_full{action="close"} counted once');
        return;
      }

      slow.resume();
      // Probes (eu, so the filtered client wants them too) until one arrives: the socket
      // is unmuted then, and what was queued before it has arrived; probes published while
      // it is still muted are dropped, and counted.
      let probes = 0;
      // a probe is its own stream: the first to reach the socket is a full message
      const probed = () => slow.texts.some((x) => x.startsWith('{"event":"probe"'));
      for (const end = Date.now() + 20_000; !probed();) {
        if (Date.now() > end) throw new Error(`none of ${probes} probes reached the client`);
        const r = await publish(srv.port, { name: 'probe', channel: 'feed', data: String(probes++), tags: { region: 'eu' } });
        t.equal(r.status, 200);
        await slow.until(probed, 200).catch(() => undefined);
      }
      const decoder = new core.DeltaDecoder();
      const before = decode(slow, decoder);
      const got = before.ticks;
      if (process.env.SLOW_DEBUG) t.comment(`got ${got.filter((s, i) => i === 0 || s !== got[i - 1] + 1 || i === got.length - 1 || got[i + 1] !== s + 1).join(',')} probes ${before.probes}/${probes} syncErrors ${before.syncErrors} deltas ${slow.texts.filter((x) => x.startsWith('{"event":"pusher:delta"')).length}`);
      t.ok(got.length > 0 && got.length < meant.length, `the slow client got ${got.length} of ${meant.length} (the rest was dropped)`);
      t.ok(increasing(got) && got.every((s) => meant.includes(s)), 'in order, no duplicate, only what it was meant to get');
      t.same(got.slice(0, 5), meant.slice(0, 5), 'what was queued before it filled up');
      const gaps = got.filter((s, i) => i > 0 && meant.indexOf(s) !== meant.indexOf(got[i - 1]) + 1).length;
      t.ok(gaps <= 2, `dropped as contiguous runs (${gaps} gap(s))`);
      const probesDropped = probes - before.probes;
      const missed = meant.length - got.length + probesDropped;
      // A shard adds a socket's drops to the counter when it unmutes the socket or at its
      // 1 s sweep: a probe dropped in a last short mute may still be pending. Read until the
      // count reaches what the client missed (an over-count fails at once).
      // A probe still on its way when an earlier one arrived was not dropped: it arrives
      // later, so what the client missed is read again from everything it got by then.
      let dropped = 0;
      let missedNow = missed;
      let probesMissed = probesDropped;
      await eventually(async () => {
        dropped = await metric(port, 'websocket_messages_dropped_total');
        probesMissed = probes - decode(slow, new core.DeltaDecoder()).probes;
        missedNow = meant.length - got.length + probesMissed;
        return dropped >= missedNow;
      }, 5000).catch(() => undefined);
      t.equal(dropped, missedNow, `every message it missed counted, no other (${dropped}, ${probesMissed} of them probes)`);
      t.ok(await metric(port, 'websocket_buffer_full_total', { action: 'drop' }) >= 1, 'buffer_full{action="drop"} counted');

      // reads again: the messages that follow arrive (decoded: a delta socket restarts in full)
      await stream(srv, N, N + 12, false);
      const after = () => decode(slow, new core.DeltaDecoder()).ticks.filter((s) => s >= N);
      const want = Array.from({ length: 12 }, (_, i) => N + i).filter((s) => kind === 'delta' || regionOf(s) === 'eu');
      await slow.until(() => after().length === want.length, 10_000, 'the messages after recovery');
      t.same(after(), want, 'every message after recovery');
      const all = decode(slow, new core.DeltaDecoder());
      t.equal(all.syncErrors, 0, 'every frame decodes, no sync error');
      t.equal(slow.closeCode, null, 'still connected');
      t.equal(await metric(port, 'websocket_messages_dropped_total'), dropped, 'nothing dropped since');
    });
  }
}
