// Kernel memory per idle WebSocket connection (docs/operations.md): what RSS does not
// show. Opens `conns` idle subscribed connections to a ringcast on 127.0.0.1 and reads
// /proc/net/sockstat (TCP `mem`, in pages) and /proc/meminfo (Slab) before and after.
// Both ends are on this host, so the TCP figure counts two sockets per connection: it is
// halved. Also prints the server process's RSS per connection for comparison.
//
//   node dist/bench/listeners/kernel-memory.js [--conns 5000] [--workers 1]

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { loadConfig } from '../../src/config';
import { start } from '../../src/main';

const { values } = parseArgs({ options: { conns: { type: 'string', default: '5000' }, workers: { type: 'string', default: '1' } } });
const CONNS = Number(values.conns);
const PAGE = 4096;

function tcpMemPages(): number {
  return Number(/TCP: .* mem (\d+)/.exec(readFileSync('/proc/net/sockstat', 'utf8'))?.[1] ?? NaN);
}
function slabKiB(): number {
  return Number(/Slab:\s+(\d+) kB/.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1] ?? NaN);
}
function rssKiB(): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? NaN);
}

async function main(): Promise<void> {
  const app = { id: 'm', key: 'm-key', secret: 'm-secret' };
  const server = await start(loadConfig({ env: {}, overrides: { host: '127.0.0.1', port: 0, workers: Number(values.workers), log: { level: 'error' }, limits: { max_connections_per_ip: 2 ** 31 - 1 }, apps: [app] } }));
  const tcp0 = tcpMemPages();
  const slab0 = slabKiB();
  const clients: WebSocket[] = [];
  for (let i = 0; i < CONNS; i += 200) {
    await Promise.all(Array.from({ length: Math.min(200, CONNS - i) }, () => new Promise<void>((resolve, reject) => {
      const ws = new WebSocket(`ws://127.0.0.1:${server.port}/app/${app.key}?protocol=7`);
      ws.on('error', reject);
      ws.on('message', (m: Buffer) => {
        const s = m.toString();
        if (s.includes('connection_established')) ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: `c${i % 100}` } }));
        else if (s.includes('subscription_succeeded')) resolve();
      });
      clients.push(ws);
    })));
  }
  await new Promise((r) => setTimeout(r, 1000));
  const tcp = (tcpMemPages() - tcp0) * PAGE / 1024 / CONNS / 2;
  const slab = (slabKiB() - slab0) / CONNS / 2;
  console.log(`${CONNS} idle connections: kernel TCP buffer memory ${tcp.toFixed(2)} KiB per socket, slab ${slab.toFixed(2)} KiB per socket (both ends on this host, halved); this process (server and clients) RSS ${rssKiB()} KiB`);
  for (const c of clients) c.terminate();
  await server.stop();
}

void main().then(() => process.exit(0));
