// A TCP proxy in front of a server that can cut every connection (RST, no close frame: what
// a dropped network does to a WebSocket), refuse new ones meanwhile, and send the next ones
// to another port (a client that reconnects to another node of a cluster).

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
  close(): Promise<void>;
}

export async function cutProxy(port: number): Promise<CutProxy> {
  const open = new Set<net.Socket>();
  let refusing = false;
  let accepted = 0;
  let target = port;
  const server = net.createServer((client) => {
    if (refusing) return client.resetAndDestroy();
    accepted++;
    const upstream = net.connect(target, '127.0.0.1');
    open.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
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
    close: () => new Promise<void>((r) => { for (const s of open) s.destroy(); server.close(() => r()); }),
  };
}
