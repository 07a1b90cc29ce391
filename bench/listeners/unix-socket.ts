// Fan-out over the Unix socket against the TCP port (docs/architecture.md, "Unix socket").
// Shard 0 alone accepts the socket's connections (listeners/unix.ts): this measures what
// that costs. `subs` raw WebSocket clients subscribe to one channel, over TCP (spread
// over the shards by SO_REUSEPORT) or over the socket (all on shard 0); the API publishes
// `events` events in batches of 10 over TCP; the figure is deliveries per second until
// every client has every event, median of `runs`.
//
//   node dist/bench/listeners/unix-socket.js [--workers 2] [--subs 200] [--events 2000] [--runs 3]

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import Pusher from 'pusher';
import WebSocket from 'ws';
import { loadConfig } from '../../src/config';
import { start } from '../../src/main';

const { values } = parseArgs({
  options: {
    workers: { type: 'string', default: '2' },
    subs: { type: 'string', default: '200' },
    events: { type: 'string', default: '2000' },
    runs: { type: 'string', default: '3' },
  },
});
const WORKERS = Number(values.workers);
const SUBS = Number(values.subs);
const EVENTS = Number(values.events);
const RUNS = Number(values.runs);
const APP = { id: 'bench', key: 'bench-key', secret: 'bench-secret' };

async function once(via: 'tcp' | 'unix'): Promise<number> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-unix-bench-'));
  const sock = path.join(dir, 's.sock');
  const config = loadConfig({
    env: {},
    overrides: {
      host: '127.0.0.1', port: 0, workers: WORKERS, log: { level: 'error' }, apps: [APP],
      unix_socket: { enabled: via === 'unix', path: sock },
    },
  });
  const server = await start(config);
  const url = via === 'unix' ? `ws+unix://${sock}:/app/${APP.key}?protocol=7` : `ws://127.0.0.1:${server.port}/app/${APP.key}?protocol=7`;
  let received = 0;
  let done: () => void = () => {};
  const all = new Promise<void>((r) => { done = r; });
  const clients = await Promise.all(Array.from({ length: SUBS }, () => new Promise<WebSocket>((resolve) => {
    const ws = new WebSocket(url);
    ws.on('message', (m: Buffer) => {
      const s = m.toString();
      if (s.includes('connection_established')) ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'fan' } }));
      else if (s.includes('subscription_succeeded')) resolve(ws);
      else if (s.includes('"tick"') && ++received === SUBS * EVENTS) done();
    });
  })));
  const sdk = new Pusher({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1', port: String(server.port) });
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < EVENTS; i += 10) {
    await sdk.triggerBatch(Array.from({ length: 10 }, (_, j) => ({ channel: 'fan', name: 'tick', data: { i: i + j } })));
  }
  await all;
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  for (const c of clients) c.close();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
  return (SUBS * EVENTS) / secs;
}

async function main(): Promise<void> {
  const out: Record<string, number[]> = { tcp: [], unix: [] };
  for (let r = 0; r < RUNS; r++) {
    for (const via of ['tcp', 'unix'] as const) out[via].push(await once(via));
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  for (const via of ['tcp', 'unix'] as const) {
    console.log(`${via}: workers ${WORKERS}, ${SUBS} subscribers, ${EVENTS} events: median ${Math.round(median(out[via]))} deliveries/s (runs: ${out[via].map(Math.round).join(', ')})`);
  }
}

void main().then(() => process.exit(0));
