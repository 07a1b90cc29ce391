// Slow consumers (websocket.max_bytes / max_messages / on_backpressure, src/ws/backpressure.ts).
// A raw TCP client does the WebSocket handshake by hand, subscribes, then stops reading,
// while a normal client on the same channel receives a stream of ~115 MB of publishes:
//  - the normal client gets every message, in order, in time;
//  - drop: the slow one misses a contiguous run of messages, each counted
//    (websocket_messages_dropped_total), and gets messages again once it reads;
//  - close: the slow one is closed with 4100 after what was queued for it;
//  - the process (which hosts the server threads) does not grow with what is sent.

import t from 'tap';
import WebSocket from 'ws';
import { APP, startServer, type TestServer } from '../helpers/server';
import { MiB, metric, publish, rssSampler } from './api';
import { TcpWs } from './raw-ws';

const MAX_BYTES = 1 * MiB;
const EVENT_BYTES = 30 * 1024;
const PER_REQUEST = 3;
// Warm-up ~45 MB: fills the slow socket's kernel buffers and its queue, and brings every
// thread's heap to its steady size (with 4 shards the heaps alone grow by up to ~100 MB
// over the first tens of MB of traffic); then ~70 MB are measured.
const WARMUP_EVENTS = 1500;
const STREAM_EVENTS = 2400;
const STREAM_MIB = (STREAM_EVENTS * EVENT_BYTES) / MiB;
const PAD = 'x'.repeat(EVENT_BYTES);

interface Tick { seq: number; t: number }

/** A `ws` client that keeps only (seq, latency) of each tick: no 60 MB kept in the heap. */
async function leanClient(srv: TestServer): Promise<{ ws: WebSocket; seqs: number[]; maxLatency(): number }> {
  const ws = new WebSocket(srv.wsUrl());
  const seqs: number[] = [];
  let maxLatency = 0;
  await new Promise<void>((resolve, reject) => {
    ws.on('error', reject);
    ws.on('message', (raw) => {
      const f = JSON.parse(raw.toString()) as { event: string; data: string };
      if (f.event === 'pusher:connection_established') ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'feed' } }));
      else if (f.event === 'pusher_internal:subscription_succeeded') resolve();
      else if (f.event === 'tick') {
        const d = JSON.parse(f.data) as Tick;
        seqs.push(d.seq);
        maxLatency = Math.max(maxLatency, Date.now() - d.t);
      }
    });
  });
  return { ws, seqs, maxLatency: () => maxLatency };
}

async function slowClient(srv: TestServer): Promise<TcpWs> {
  const c = await TcpWs.connect(srv.port, `/app/${APP.key}?protocol=7&client=js&version=8.4.0`);
  await c.frame((f) => f.event === 'pusher:connection_established');
  c.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'feed' } }));
  await c.frame((f) => f.event === 'pusher_internal:subscription_succeeded');
  return c;
}

/** Publishes ticks seq [from, to) in batches; resolves when every request was answered 200. */
async function stream(srv: TestServer, from: number, to: number, pad = PAD): Promise<void> {
  for (let seq = from; seq < to; seq += PER_REQUEST) {
    const batch = [];
    for (let s = seq; s < Math.min(to, seq + PER_REQUEST); s++) {
      batch.push({ channel: 'feed', name: 'tick', data: JSON.stringify({ seq: s, t: Date.now(), pad }) });
    }
    const r = await publish(srv.port, { batch }, { batch: true });
    if (r.status !== 200) throw new Error(`publish answered ${r.status}: ${r.text}`);
  }
}

function ticks(c: TcpWs): number[] {
  const out: number[] = [];
  for (const text of c.texts) {
    const f = JSON.parse(text) as { event: string; data: string }; // throws on a torn frame
    if (f.event === 'tick') out.push((JSON.parse(f.data) as Tick).seq);
  }
  return out;
}

const increasing = (xs: number[]) => xs.every((x, i) => i === 0 || x > xs[i - 1]);

const isProbe = (text: string) => text.startsWith('{"event":"probe"');

/**
 * Publishes a small `probe` event on the channel, again every 200 ms, until one reaches
 * `c` (at most 20 s); returns how many were published.
 */
async function probeUntilReceived(srv: TestServer, c: TcpWs): Promise<number> {
  let sent = 0;
  for (const until = Date.now() + 20_000; !c.texts.some(isProbe);) {
    if (Date.now() > until) throw new Error(`none of ${sent} probes reached the client`);
    const r = await publish(srv.port, { name: 'probe', channel: 'feed', data: String(sent++) });
    if (r.status !== 200) throw new Error(`probe answered ${r.status}: ${r.text}`);
    await c.until(() => c.texts.some(isProbe), 200).catch(() => undefined);
  }
  return sent;
}

for (const mode of ['drop', 'close'] as const) {
  t.test(`on_backpressure: ${mode}`, async (t) => {
    const srv = await startServer({
      // auto_ping off: the paused client answers no WebSocket ping, and on a loaded machine
      // the stream can outlast ping_interval + margin (46 s), when uWS would drop it (1006).
      websocket: { max_bytes: MAX_BYTES, max_messages: 100_000, on_backpressure: mode, auto_ping: false },
      metrics: { enabled: true, port: 0, host: '127.0.0.1' },
      event_limits: { max_payload_in_kb: 100 },
    });
    t.teardown(() => srv.stop());
    const normal = await leanClient(srv);
    srv.track(normal.ws);
    const slow = await slowClient(srv);
    t.teardown(() => slow.destroy());
    slow.pause();
    // close: uWS gives a socket the server ended (ws.end) only its ping margin (16 s here)
    // to take what was queued before the 4100 close frame, then cuts it (a frame cut short,
    // no close frame). So the slow client reads again once the server has decided to
    // close it, not after the whole stream, which takes longer than that on a loaded
    // machine (before, the case failed whenever the stream outlasted the margin).
    let streaming = true;
    const resumeOnClose = mode === 'close' ? (async () => {
      while (streaming) {
        if (await metric(srv.server.metricsPort!, 'websocket_buffer_full_total', { action: 'close' }) >= 1) return slow.resume();
        await new Promise((r) => setTimeout(r, 100));
      }
    })() : Promise.resolve();

    await stream(srv, 0, WARMUP_EVENTS);
    const base = process.memoryUsage().rss;
    const rss = rssSampler();
    const t0 = Date.now();
    await stream(srv, WARMUP_EVENTS, WARMUP_EVENTS + STREAM_EVENTS);
    const N = WARMUP_EVENTS + STREAM_EVENTS;
    const took = Date.now() - t0;
    streaming = false;
    await resumeOnClose;

    // the normal client: everything, in order, in time
    const until = Date.now() + 10_000;
    while (normal.seqs.length < N && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    const maxRss = rss.stop();
    t.equal(normal.seqs.length, N, 'the normal client got every message');
    t.ok(increasing(normal.seqs), 'in order');
    t.ok(normal.maxLatency() < 2000, `each within 2 s of its publish (max ${normal.maxLatency()} ms)`);
    const grew = (maxRss - base) / MiB;
    t.comment(`streamed ${STREAM_MIB.toFixed(0)} MiB in ${took} ms; RSS ${(base / MiB).toFixed(0)} MiB → max ${(maxRss / MiB).toFixed(0)} MiB`);
    // kept for the slow client, it would be +70 MiB; its queue is bounded by 2 × max_bytes
    t.ok(grew < STREAM_MIB / 2, `RSS grew ${grew.toFixed(1)} MiB while ${STREAM_MIB.toFixed(0)} MiB went to a client that does not read`);

    // the slow client reads again
    slow.resume();
    if (mode === 'drop') {
      // Probes on the channel until one arrives: the socket is unmuted then (uWS's drain),
      // and everything queued for it before that probe has arrived (per-channel order).
      // A probe published while it is still muted is dropped (and counted).
      const probes = await probeUntilReceived(srv, slow);
      const before = ticks(slow);
      t.ok(before.length > 0 && before.length < N, `the slow client got ${before.length} of ${N} (the rest was dropped)`);
      t.ok(increasing(before), 'in order, no duplicate');
      t.same(before.slice(0, 10), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 'what was queued before it filled up');
      const gaps = before.filter((s, i) => i > 0 && s !== before[i - 1] + 1).length;
      t.ok(gaps <= 2, `dropped as contiguous runs (${gaps} gap(s))`);
      // messages after it caught up arrive again
      await stream(srv, N, N + 10, 'small');
      await slow.until(() => ticks(slow).slice(-1)[0] === N + 9, 5000, 'the messages after recovery');
      const after = ticks(slow).filter((s) => s >= N);
      t.same(after, [N, N + 1, N + 2, N + 3, N + 4, N + 5, N + 6, N + 7, N + 8, N + 9], 'every message after recovery');
      t.equal(slow.closeCode, null, 'still connected');
      // Every probe sent before the last tick has arrived by now, or was dropped.
      const probesDropped = probes - slow.texts.filter(isProbe).length;
      const dropped = await metric(srv.server.metricsPort!, 'websocket_messages_dropped_total');
      t.equal(dropped, N - before.length + probesDropped, `every skipped message counted (${dropped}, ${probesDropped} of them probes)`);
      t.ok(await metric(srv.server.metricsPort!, 'websocket_buffer_full_total', { action: 'drop' }) >= 1, 'buffer_full{action="drop"} counted');
    } else {
      await slow.until(() => slow.ended, 20_000, 'the slow client to be closed');
      t.equal(slow.closeCode, 4100, 'closed with 4100 (back off, then reconnect)');
      t.equal(slow.partialAtEnd, 0, 'no frame cut short');
      const got = ticks(slow);
      t.ok(got.length < N && increasing(got), `it got ${got.length} of ${N}, in order, before the close`);
      t.equal(await metric(srv.server.metricsPort!, 'websocket_buffer_full_total', { action: 'close' }), 1, 'buffer_full{action="close"} counted once');
    }
    // and the server still serves
    const r = await publish(srv.port, { name: 'tick', channel: 'feed', data: JSON.stringify({ seq: 1e9, t: Date.now() }) });
    t.equal(r.status, 200);
  });
}
