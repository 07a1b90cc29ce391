// Attacks 1 and 2 of bench/hostile/features.ts: history metadata for names never published
// on, and replay amplification with `recover` from serial 0.

import fs from 'node:fs';
import { Worker } from 'node:worker_threads';
import Pusher from 'pusher';
import { APP, rssKb, type RunningTarget } from '../harness/target';
import { api, MiB, p99, sleep, Sock } from './features-util';

export interface Result { attack: string; ok: boolean; bound: string; measured: string; figures: Record<string, unknown> }

/** 8 sockets subscribing to (and leaving) random history-* names for `seconds`. */
export async function historyMetadata(server: RunningTarget, seconds: number, driver: string, dbsize?: () => Promise<number>): Promise<Result> {
  const base = rssKb(server.pid) * 1024;
  let peak = base;
  const sampler = setInterval(() => { peak = Math.max(peak, rssKb(server.pid) * 1024); }, 100);
  let tried = 0;
  let closes = 0;
  const until = Date.now() + seconds * 1000;
  await Promise.all(Array.from({ length: 8 }, async (_, s) => {
    while (Date.now() < until) {
      const c = await Sock.open(server.port);
      while (c.closeCode === null && Date.now() < until) {
        // 4 subscribe + unsubscribe pairs every 10 ms: 800 frames/s, under limits.frames_per_second
        for (let i = 0; i < 4; i++) {
          const channel = `history-${s}-${Math.random().toString(36).slice(2)}`;
          c.send({ event: 'pusher:subscribe', data: { channel } });
          c.send({ event: 'pusher:unsubscribe', data: { channel } });
          tried++;
        }
        await sleep(10);
      }
      if (c.closeCode !== null) closes++;
      c.close();
    }
  }));
  // every socket is closed; let the server see it
  await sleep(3000);
  clearInterval(sampler);
  const kept = rssKb(server.pid) * 1024 - base;
  const keys = dbsize ? await dbsize() : null;
  const ok = kept <= 64 * MiB && (keys === null || keys === 0);
  return {
    attack: `1. history metadata (${driver})`, ok,
    bound: `RSS kept ≤ 64 MiB${keys !== null ? ', redis DBSIZE 0' : ''}`,
    measured: `${tried.toLocaleString('en-US')} channels in ${seconds} s, RSS kept ${kept >= 0 ? '+' : ''}${(kept / MiB).toFixed(1)} MiB (peak +${((peak - base) / MiB).toFixed(1)})${keys !== null ? `, DBSIZE ${keys}` : ''}`,
    figures: { driver, seconds, channels: tried, rssKeptMiB: +(kept / MiB).toFixed(1), rssPeakMiB: +((peak - base) / MiB).toFixed(1), socketsClosedByServer: closes, dbsize: keys },
  };
}

const lines = (file: string) => {
  try { return fs.readFileSync(file, 'utf8').split('\n').length - 1; } catch { return 0; }
};

/**
 * A channel holding `messages` × 50 KiB; 4 sockets subscribing and unsubscribing with
 * `recover` from serial 0 for `seconds` (two at once, two after the answer and 200 ms of replay), while an idle socket on every shard pings and
 * the API publishes to another channel.
 */
export async function replayAmplification(server: RunningTarget, workers: number, seconds: number, messages = 1000): Promise<Result> {
  const sdk = new Pusher({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1', port: String(server.port), useTLS: false });
  const channel = 'replay-big';
  const data = 'x'.repeat(50 * 1024);
  for (let i = 0; i < messages; i += 10) {
    await Promise.all(Array.from({ length: 10 }, (_, j) => sdk.trigger(channel, 'big', { i: i + j, data })));
  }
  const probe = await Sock.open(server.port);
  probe.send({ event: 'pusher:subscribe', data: { channel, recover: {} } });
  const rec = await probe.next((f) => f.event === 'pusher_internal:recovery', 10_000, 'the channel\'s epoch');
  const epoch = (rec.data as { epoch: string; serial: number }).epoch;
  const serial = (rec.data as { serial: number }).serial;
  probe.close();

  // an idle socket on every shard
  const idle = new Map<string, Sock>();
  for (let i = 0; i < 60 && idle.size < workers; i++) {
    const c = await Sock.open(server.port);
    if (idle.has(c.shard)) c.close();
    else idle.set(c.shard, c);
  }
  const logBefore = lines(server.logFile);
  const rtts: number[] = [];
  const publishes: { status: number; ms: number }[] = [];
  let stop = false;
  const pingers = [...idle.values()].map(async (c) => {
    while (!stop) {
      rtts.push(await c.ping(30_000).catch(() => 30_000));
      await sleep(100);
    }
  });
  const publisher = (async () => {
    let n = 0;
    while (!stop) {
      const r = await api(server.port, 'events', { name: 'elsewhere', channel: 'plain-elsewhere', data: String(n++) });
      publishes.push({ status: r.status, ms: r.ms });
      await sleep(100);
    }
  })();
  const attack = await new Promise<{ questions: number; bytes: number; closes: number[]; events: Record<string, number>; reasons: Record<string, number>; errorSample: unknown }>((resolve, reject) => {
    const w = new Worker(ATTACKER, { eval: true, workerData: { port: server.port, key: APP.key, channel, epoch, ms: seconds * 1000, wsPath: require.resolve('ws') } });
    w.once('message', resolve);
    w.once('error', reject);
  });
  stop = true;
  await Promise.all([...pingers, publisher]);
  const logGrowth = lines(server.logFile) - logBefore;
  const log = fs.readFileSync(server.logFile, 'utf8');
  const logSample = [...new Set(log.split('\n').slice(logBefore).filter(Boolean).map((l) => l.replace(/\d+/g, 'N').slice(0, 200)))].slice(0, 4);
  const queueFull = (log.match(/queue to thread \d+ is full/g) ?? []).length;
  for (const c of idle.values()) c.close();
  const pingP99 = p99(rtts);
  const pubP99 = p99(publishes.map((p) => p.ms));
  const non200 = publishes.filter((p) => p.status !== 200).length;
  const ok = idle.size === workers && pingP99 <= 200 && pubP99 <= 200 && non200 === 0 && logGrowth <= 3000 && server.alive();
  return {
    attack: '2. replay amplification', ok,
    bound: 'idle pings on every shard p99 ≤ 200 ms; API publishes elsewhere all 200, p99 ≤ 200 ms; log ≤ 3,000 lines',
    measured: `${attack.questions.toLocaleString('en-US')} recoveries asked, ${(attack.bytes / MiB).toFixed(0)} MiB replayed; pings p99 ${pingP99.toFixed(1)} ms on ${idle.size} shard(s); publishes p99 ${pubP99.toFixed(1)} ms, ${non200} not 200 of ${publishes.length}; log +${logGrowth} lines`,
    figures: { seconds, messages, storedSerial: serial, questions: attack.questions, replayedMiB: +(attack.bytes / MiB).toFixed(1), attackerCloses: attack.closes, attackerReceived: attack.events, recoveryAnswers: attack.reasons, subscriptionErrorSample: attack.errorSample,
      shardsPinged: idle.size, pings: rtts.length, pingP99Ms: +pingP99.toFixed(1), pingMaxMs: +Math.max(...rtts).toFixed(1),
      publishes: publishes.length, publishNon200: non200, publishP99Ms: +pubP99.toFixed(1), logLines: logGrowth, queueFullLines: queueFull, logSample },
  };
}

/**
 * The 4 attacking sockets, in a thread of their own (the replayed bytes are read there,
 * not in the thread that measures pings): subscribe with recover from 0, unsubscribe,
 * again, 100 pairs a second each; reconnecting when closed.
 */
const ATTACKER = `
const { parentPort, workerData } = require('node:worker_threads');
const WebSocket = require(workerData.wsPath);
const { port, key, channel, epoch, ms } = workerData;
const until = Date.now() + ms;
let questions = 0, bytes = 0;
const closes = [];
const events = {};
const reasons = {};
let errorSample = null;
// fast: unsubscribe at once (the answers are for a subscription already gone); patient:
// wait for the recovery answer and up to 200 ms of its replay first
async function one(patient) {
  while (Date.now() < until) {
    const ws = new WebSocket('ws://127.0.0.1:' + port + '/app/' + key + '?protocol=7&client=js&version=8.4.0');
    let answered = null;
    ws.on('error', () => {});
    ws.on('message', (m) => {
      bytes += m.length;
      const head = m.subarray(0, 300).toString();
      const e = /"event":"([^"]+)"/.exec(head);
      const k = e ? e[1] : '?';
      events[k] = (events[k] || 0) + 1;
      if (k === 'pusher_internal:recovery' || k === 'pusher:subscription_error') {
        let why = 'subscription_error';
        if (k === 'pusher:subscription_error' && !errorSample) errorSample = JSON.parse(m.toString()).data;
        if (k === 'pusher_internal:recovery') {
          const f = JSON.parse(m.toString());
          const d = typeof f.data === 'string' ? JSON.parse(f.data) : f.data;
          why = d.recovered ? 'recovered' : String(d.reason);
        }
        reasons[why] = (reasons[why] || 0) + 1;
        if (answered) answered();
      }
    });
    await new Promise((r) => { ws.once('message', r); ws.once('close', r); });
    const closed = new Promise((r) => ws.once('close', (code) => { closes.push(code); if (answered) answered(); r(); }));
    while (ws.readyState === WebSocket.OPEN && Date.now() < until) {
      ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel, recover: { epoch, serial: 0 } } }));
      questions++;
      if (patient) {
        await new Promise((r) => { answered = r; const t = setTimeout(r, 2000); if (ws.readyState !== WebSocket.OPEN) r(); answered = () => { clearTimeout(t); r(); }; });
        answered = null;
        await new Promise((r) => setTimeout(r, 200));
      }
      ws.send(JSON.stringify({ event: 'pusher:unsubscribe', data: { channel } }));
      await new Promise((r) => setTimeout(r, 10));
    }
    if (ws.readyState === WebSocket.OPEN) ws.close();
    await closed;
  }
}
Promise.all([one(false), one(false), one(true), one(true)]).then(() => parentPort.postMessage({ questions, bytes, closes, events, reasons, errorSample }));
`;
