// The hostile-client scenarios, written once: the in-suite test
// (test/faults/hostile.test.ts, scaled down) and the benchmark (bench/hostile/hostile.ts,
// full size, server in its own process) both run them. Each scenario reports what the
// server answered, the server's RSS growth over it (`rss` says how to read it), and how
// long new connections took to be established while it ran.

import http from 'node:http';
import { Worker } from 'node:worker_threads';
import WebSocket from 'ws';
import { signApiQuery } from '../../src/protocol/api-auth';

export interface HostileTarget {
  port: number;
  appId: string;
  appKey: string;
  /** The server's resident set size now, in bytes. */
  rss(): number;
}

export interface Measured {
  rssGrowth: number;
  /** Slowest connection_established of the probe connections opened during the scenario (ms). */
  acceptMaxMs: number;
}

const wsUrl = (t: HostileTarget) => `ws://127.0.0.1:${t.port}/app/${t.appKey}?protocol=7&client=js&version=8.4.0`;

function open(t: HostileTarget): Promise<{ ws: WebSocket; ms: number }> {
  const started = performance.now();
  const ws = new WebSocket(wsUrl(t));
  return new Promise((resolve, reject) => {
    ws.once('message', () => resolve({ ws, ms: performance.now() - started }));
    ws.once('error', reject);
    ws.once('close', (code) => reject(new Error(`closed with ${code} before connection_established`)));
  });
}

/** Runs `body` while sampling the server's RSS and opening a probe connection every 200 ms. */
async function measured<T>(t: HostileTarget, body: () => Promise<T>): Promise<T & Measured> {
  const base = t.rss();
  let peak = base;
  let acceptMaxMs = 0;
  let stop = false;
  const sampler = setInterval(() => { peak = Math.max(peak, t.rss()); }, 50);
  const prober = (async () => {
    while (!stop) {
      const { ws, ms } = await open(t);
      acceptMaxMs = Math.max(acceptMaxMs, ms);
      ws.close();
      await new Promise((r) => setTimeout(r, 200));
    }
  })();
  try {
    const r = await body();
    return { ...r, rssGrowth: Math.max(peak, t.rss()) - base, acceptMaxMs };
  } finally {
    stop = true;
    clearInterval(sampler);
    await prober.catch(() => undefined);
  }
}

/** Sends frames without letting the client's own buffer grow past 1 MiB. */
async function pump(ws: WebSocket, n: number, frame: (i: number) => string): Promise<void> {
  for (let i = 0; i < n && ws.readyState === WebSocket.OPEN;) {
    if (ws.bufferedAmount > 1 << 20) {
      await new Promise((r) => setTimeout(r, 1));
      continue;
    }
    ws.send(frame(i++));
  }
}

/** One anonymous socket subscribing to `channels` public channels. */
export function subscribeMany(t: HostileTarget, channels: number, timeoutMs: number) {
  return measured(t, async () => {
    const { ws } = await open(t);
    let succeeded = 0;
    let limitReached = 0;
    let closeCode: number | null = null;
    ws.on('message', (raw) => {
      const f = JSON.parse(raw.toString()) as { event: string; data?: { type?: string } };
      if (f.event === 'pusher_internal:subscription_succeeded') succeeded++;
      else if (f.event === 'pusher:subscription_error' && f.data?.type === 'LimitReached') limitReached++;
    });
    const closed = new Promise<void>((r) => ws.once('close', (code) => { closeCode = code; r(); }));
    await pump(ws, channels, (i) => `{"event":"pusher:subscribe","data":{"channel":"hostile-${i}"}}`);
    // Everything answered, or the server closed the socket.
    const until = Date.now() + timeoutMs;
    while (closeCode === null && succeeded + limitReached < channels && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    ws.close();
    await closed;
    return { succeeded, limitReached, closeCode: closeCode as number | null };
  });
}

/** `sockets` sockets each subscribing to `channels` channels with an `in` filter of `values` values. */
export function bigFilters(t: HostileTarget, sockets: number, channels: number, values: number, timeoutMs: number) {
  return measured(t, async () => {
    const vals = Array.from({ length: values }, (_, i) => `value-${i}`);
    const answers = { succeeded: 0, refused: 0 };
    const all = await Promise.all(Array.from({ length: sockets }, async (_, s) => {
      const { ws } = await open(t);
      let n = 0;
      const done = new Promise<void>((resolve) => ws.on('message', (raw) => {
        const f = JSON.parse(raw.toString()) as { event: string };
        if (f.event === 'pusher_internal:subscription_succeeded') answers.succeeded++;
        else if (f.event === 'pusher:subscription_error') answers.refused++;
        else return;
        if (++n === channels) resolve();
      }));
      for (let c = 0; c < channels; c++) {
        ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: `filtered-${s}-${c}`, filter: { key: 'k', cmp: 'in', vals } } }));
      }
      await Promise.race([done, new Promise((r) => setTimeout(r, timeoutMs))]);
      return ws;
    }));
    for (const ws of all) ws.close();
    return answers;
  });
}

/** `count` unauthenticated POSTs of `bytes` each, at once; the answers' statuses and the slowest (ms). */
export function bigPosts(t: HostileTarget, count: number, bytes: number, timeoutMs: number) {
  return measured(t, async () => {
    const chunk = Buffer.alloc(Math.min(bytes, 1 << 20), 0x61);
    const path = `/apps/${t.appId}/events`;
    // signed with a wrong secret: the right app, a wrong signature
    const query = signApiQuery(t.appKey, 'not-the-secret', 'POST', path, {}, 'x', Math.floor(Date.now() / 1000));
    let slowestMs = 0;
    const statuses = await Promise.all(Array.from({ length: count }, () => new Promise<number>((resolve) => {
      const started = performance.now();
      const req = http.request({ host: '127.0.0.1', port: t.port, method: 'POST', path: `${path}?${query}`, agent: false, headers: { 'content-length': String(bytes) } }, (res) => {
        res.resume();
        slowestMs = Math.max(slowestMs, performance.now() - started);
        resolve(res.statusCode ?? 0);
        req.destroy();
      });
      req.on('error', () => resolve(0));
      req.setTimeout(timeoutMs, () => req.destroy());
      // The whole body, as fast as the socket takes it, until the answer comes.
      let sent = 0;
      const more = () => {
        while (sent < bytes && !req.destroyed) {
          const n = Math.min(chunk.length, bytes - sent);
          sent += n;
          if (!req.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return void req.once('drain', more);
        }
        if (!req.destroyed) req.end();
      };
      more();
    })));
    return { statuses, slowestMs };
  });
}

/**
 * A socket sending pings as fast as it can for `seconds` (reconnecting when closed, as a
 * hostile client would), while another pings every 20 ms: the pinger's round trips.
 */
export function flood(t: HostileTarget, seconds: number) {
  return measured(t, async () => {
    const pinger = (await open(t)).ws;
    const rtts: number[] = [];
    let sentAt = 0;
    pinger.on('message', (raw) => {
      if (raw.toString().includes('pusher:pong') && sentAt > 0) {
        rtts.push(performance.now() - sentAt);
        sentAt = 0;
      }
    });
    const pingTimer = setInterval(() => {
      if (sentAt !== 0) return; // one in flight at a time; a late one counts when it comes
      sentAt = performance.now();
      pinger.send('{"event":"pusher:ping","data":{}}');
    }, 20);
    // The flooder runs in a thread of its own: in this one it would delay the pinger's
    // own reading of its pongs, and the measure would be the client's, not the server's.
    const { sent, closes } = await new Promise<{ sent: number; closes: number[] }>((resolve, reject) => {
      const w = new Worker(FLOODER, { eval: true, workerData: { url: wsUrl(t), ms: seconds * 1000, wsPath: require.resolve('ws') } });
      w.once('message', resolve);
      w.once('error', reject);
    });
    clearInterval(pingTimer);
    pinger.close();
    rtts.sort((a, b) => a - b);
    const p99 = rtts.length === 0 ? Infinity : rtts[Math.min(rtts.length - 1, Math.floor(rtts.length * 0.99))];
    return { sent, closes, pings: rtts.length, p99 };
  });
}

/** The flooding client of `flood`, run in a worker thread: pings as fast as it can, reconnecting when closed. */
const FLOODER = `
const { parentPort, workerData } = require('node:worker_threads');
const WebSocket = require(workerData.wsPath);
(async () => {
  const until = Date.now() + workerData.ms;
  let sent = 0;
  const closes = [];
  while (Date.now() < until) {
    const ws = new WebSocket(workerData.url);
    await new Promise((r) => { ws.once('message', r); ws.once('close', r); ws.once('error', r); });
    const closed = new Promise((r) => ws.once('close', (code) => { closes.push(code); r(); }));
    while (ws.readyState === WebSocket.OPEN && Date.now() < until) {
      if (ws.bufferedAmount > 1 << 20) { await new Promise((r) => setTimeout(r, 1)); continue; }
      for (let i = 0; i < 500; i++) ws.send('{"event":"pusher:ping","data":{}}');
      sent += 500;
      await new Promise((r) => setImmediate(r));
    }
    if (ws.readyState === WebSocket.OPEN) ws.close();
    await closed;
  }
  parentPort.postMessage({ sent, closes });
})();
`;
