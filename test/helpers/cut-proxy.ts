// A TCP proxy in front of a server that can cut every connection (RST, no close frame: what
// a dropped network does to a WebSocket), refuse new ones meanwhile, and send the next ones
// to another port (a client that reconnects to another node of a cluster), and hold what the
// client sends for a while (a slow link to the server).

import net from 'node:net';

export interface CutProxy {
  port: number;
  /** Connections let through so far. */
  accepted(): number;
  /** Resets every open connection and refuses new ones until allow(). */
  cut(): void;
  allow(): void;
  /** New connections go to `port` from now on. */
  retarget(port: number): void;
  /** Bytes from the client reach the server `ms` later from now on (in order; 0: at once). */
  delay(ms: number): void;
  close(): Promise<void>;
}

export async function cutProxy(port: number): Promise<CutProxy> {
  const open = new Set<net.Socket>();
  let refusing = false;
  let accepted = 0;
  let target = port;
  let delayMs = 0;
  const server = net.createServer((client) => {
    if (refusing) return client.resetAndDestroy();
    accepted++;
    const upstream = net.connect(target, '127.0.0.1');
    open.add(client).add(upstream);
    upstream.pipe(client);
    // client → server, each chunk held until its time (never before an earlier one's)
    const held: { at: number; chunk: Buffer }[] = [];
    const drain = () => {
      while (held.length > 0 && held[0]!.at <= Date.now()) {
        const c = held.shift()!;
        if (!upstream.destroyed) upstream.write(c.chunk);
      }
      if (held.length > 0) setTimeout(drain, held[0]!.at - Date.now());
    };
    client.on('data', (chunk: Buffer) => {
      if (delayMs === 0 && held.length === 0) return void upstream.write(chunk);
      held.push({ at: Math.max(held.at(-1)?.at ?? 0, Date.now() + delayMs), chunk });
      if (held.length === 1) setTimeout(drain, delayMs);
    });
    const drop = () => { open.delete(client); open.delete(upstream); client.destroy(); upstream.destroy(); };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    accepted: () => accepted,
    cut() {
      refusing = true;
      for (const s of open) s.resetAndDestroy();
    },
    allow() { refusing = false; },
    retarget(p) { target = p; },
    delay(ms) { delayMs = ms; },
    close: () => new Promise<void>((r) => { for (const s of open) s.destroy(); server.close(() => r()); }),
  };
}
