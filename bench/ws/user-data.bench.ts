// How many properties a uWS user data object may have before uWS hands it back in
// dictionary mode (slow properties: a hash lookup per field read, and several hundred
// bytes more per connection). ws/connection.ts keeps SocketData within that
// (USER_DATA_FIELDS, checked by test/ws/user-data.test.ts).
//   npx tsc -p . && node --allow-natives-syntax dist/bench/ws/user-data.bench.js [connections=2000]
// For each field count: a uWS server whose upgrade passes a literal of that many fields
// (like newSocketData), `connections` ws clients; reports whether getUserData() has fast
// properties and the server heap per connection after a full GC (the clients' heap is
// measured alone first and subtracted). Found on uWS.js 20.30 / Node 20: fast up to 15
// fields, dictionary from 16 (+~0.6 KiB per connection; make bench's idle scenario:
// 19,000 connections 0.89 → 1.56 KiB of RSS each).
import uWS from 'uWebSockets.js';
import WebSocket from 'ws';

type Maker = (id: string, now: number) => Record<string, unknown>;

function maker(fields: number): Maker {
  const extra = Array.from({ length: fields - 3 }, (_, i) => `f${i}: ${['null', '0', 'false'][i % 3]}`);
  // a literal of N fields, as newSocketData writes one (generated: the field count varies)
  // eslint-disable-next-line @typescript-eslint/no-implied-eval
  return new Function('id', 'now', `return { id, lastSeen: now, channels: new Map(), ${extra.join(', ')} };`) as Maker;
}

// V8's natives syntax is not TypeScript: compiled at run time (--allow-natives-syntax)
// eslint-disable-next-line @typescript-eslint/no-implied-eval
const hasFast = new Function('o', 'return %HasFastProperties(o)') as (o: object) => boolean;
const gc = (): void => (globalThis as { gc?: () => void }).gc?.();

async function run(fields: number, conns: number): Promise<{ fast: boolean; bytes: number }> {
  const make = maker(fields);
  const kept: object[] = [];
  let fast = true;
  let seq = 0;
  let listen: uWS.us_listen_socket | null = null;
  const app = uWS.App().ws('/*', {
    upgrade: (res, req, ctx) => res.upgrade(make(`s${seq++}`, Date.now()), req.getHeader('sec-websocket-key'),
      req.getHeader('sec-websocket-protocol'), req.getHeader('sec-websocket-extensions'), ctx),
    open: (ws) => {
      const d = ws.getUserData() as object;
      fast &&= hasFast(d);
      kept.push(d);
    },
  });
  const port = await new Promise<number>((resolve) => app.listen('127.0.0.1', 0, (ls) => {
    listen = ls;
    resolve(uWS.us_socket_local_port(ls));
  }));
  gc();
  const before = process.memoryUsage().heapUsed;
  const clients: WebSocket[] = [];
  for (let i = 0; i < conns; i += 100) {
    await Promise.all(Array.from({ length: Math.min(100, conns - i) }, () => new Promise<void>((resolve, reject) => {
      const c = new WebSocket(`ws://127.0.0.1:${port}/`);
      clients.push(c);
      c.once('open', () => resolve());
      c.once('error', reject);
    })));
  }
  gc();
  const bytes = (process.memoryUsage().heapUsed - before) / conns;
  for (const c of clients) c.terminate();
  if (listen) uWS.us_listen_socket_close(listen);
  await new Promise((r) => setTimeout(r, 200));
  return { fast, bytes };
}

async function main(): Promise<void> {
  if (!process.execArgv.includes('--allow-natives-syntax')) throw new Error('run with node --allow-natives-syntax --expose-gc');
  const conns = Number(process.argv[2] ?? 2000);
  const rows: string[] = [];
  for (const fields of [14, 15, 16, 17]) {
    const { fast, bytes } = await run(fields, conns);
    rows.push(`${fields} fields: ${fast ? 'fast' : 'DICTIONARY'} properties, heap ${(bytes / 1024).toFixed(2)} KiB per connection (server + client)`);
  }
  console.log(rows.join('\n'));
  process.exit(0);
}

void main();
