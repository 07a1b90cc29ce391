// HTTP fallback next to WebSocket: N subscribers of one channel on a ringcast server
// (own process, bin/ringcast.js), then M API publishes at a steady rate; reports delivered
// messages per second, latency p50 / p99 (publish call to receipt, same clock), and the
// server's RSS per idle subscriber.
//
//   node dist/bench/fallback/fanout.js --transport xhr_streaming|ws --clients 1000 --workers 4
//     [--messages 100] [--rate 20]
//
// Bounded: at most --clients × --messages deliveries, 120 s of waiting for them.

import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import Pusher from 'pusher';
import WebSocket from 'ws';
import { readOptions } from '../harness/args';
import { APP, freePort } from '../harness/target';
import { ringcastTarget } from '../targets/ringcast';

const usage = 'fanout.js --transport xhr_streaming|ws --clients N --workers W [--messages M] [--rate R]';
const opts = readOptions(process.argv.slice(2), usage, ['transport', 'clients', 'workers', 'messages', 'rate']);
const transport = opts.get('transport') ?? 'xhr_streaming';
if (transport !== 'xhr_streaming' && transport !== 'ws') throw new Error(`--transport must be xhr_streaming or ws, got ${transport}`);
const clients = opts.num('clients', 1000, 1);
const workers = opts.num('workers', 4, 1);
const messages = opts.num('messages', 100, 1);
const rate = opts.num('rate', 20, 1);
const CHANNEL = 'bench';

const rssOf = (pid: number): number => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const latencies: number[] = [];
let delivered = 0;
let lastDelivery = 0;

function onEvent(data: string): void {
  const d = JSON.parse(data) as { t: number };
  const now = Date.now();
  latencies.push(now - d.t);
  delivered++;
  lastDelivery = now;
}

const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });

/** One streaming session, subscribed; resolves when the subscription succeeded. */
function streamingClient(port: number, i: number): Promise<() => void> {
  const id = `b${i.toString(32)}x${process.pid.toString(32)}`.slice(0, 16);
  const base = `/pusher/app/${APP.key}/1/${id}`;
  return new Promise((resolve, reject) => {
    let buf = '';
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: `${base}/xhr_streaming`, agent, headers: { 'content-length': '0' } }, (res) => {
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buf += chunk;
        let nl;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line[0] !== 'a') continue;
          for (const el of JSON.parse(line.slice(1)) as string[]) {
            const f = JSON.parse(el) as { event: string; data: string };
            if (f.event === 'pusher:connection_established') {
              const body = JSON.stringify([JSON.stringify({ event: 'pusher:subscribe', data: { channel: CHANNEL } })]);
              http.request({ host: '127.0.0.1', port, method: 'POST', path: `${base}/xhr_send`, agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (r) => r.resume()).on('error', reject).end(body);
            } else if (f.event === 'pusher_internal:subscription_succeeded') {
              resolve(() => req.destroy());
            } else if (f.event === 'ev') {
              onEvent(f.data);
            }
          }
        }
      });
    });
    req.on('error', reject);
    req.end();
  });
}

function wsClient(port: number): Promise<() => void> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/app/${APP.key}?protocol=7`);
    ws.on('message', (raw) => {
      const f = JSON.parse((raw as Buffer).toString()) as { event: string; data: string };
      if (f.event === 'pusher:connection_established') ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: CHANNEL } }));
      else if (f.event === 'pusher_internal:subscription_succeeded') resolve(() => ws.terminate());
      else if (f.event === 'ev') onEvent(f.data);
    });
    ws.on('error', reject);
  });
}

async function main(): Promise<void> {
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'fb-bench-'));
  const port = await freePort();
  const server = await ringcastTarget(workers, { yaml: ['websocket:', '  max_bytes: 16777216', 'http_fallback:', `  max_sessions: ${clients * 2}`] }).start({ port, tmpDir });
  const closers: (() => void)[] = [];
  try {
    await sleep(1000);
    const rssBefore = rssOf(server.pid);
    for (let i = 0; i < clients; i += 50) {
      const batch = [];
      for (let k = i; k < Math.min(clients, i + 50); k++) batch.push(transport === 'ws' ? wsClient(port) : streamingClient(port, k));
      closers.push(...await Promise.all(batch));
    }
    await sleep(2000);
    const rssIdle = rssOf(server.pid);
    const sdk = new Pusher({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1', port: String(port), useTLS: false });
    const start = Date.now();
    for (let i = 0; i < messages; i++) {
      const due = start + (i * 1000) / rate;
      if (due > Date.now()) await sleep(due - Date.now());
      await sdk.trigger(CHANNEL, 'ev', { t: Date.now(), i });
    }
    const until = Date.now() + 120_000;
    while (delivered < clients * messages && Date.now() < until) await sleep(50);
    latencies.sort((a, b) => a - b);
    const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))];
    const secs = (lastDelivery - start) / 1000;
    console.log(JSON.stringify({
      transport, clients, workers, messages, rate,
      delivered, expected: clients * messages,
      delivered_per_s: Math.round(delivered / secs),
      p50_ms: pct(0.5), p99_ms: pct(0.99), max_ms: latencies.at(-1),
      rss_per_idle_client_kib: Math.round((rssIdle - rssBefore) / clients / 1024 * 10) / 10,
    }));
  } finally {
    for (const c of closers) c();
    await server.stop();
    fs.rmSync(tmpDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
