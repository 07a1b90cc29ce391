// A TCP proxy on 127.0.0.1 in front of a test server that can cut every connection it
// carries (RST: no close frame, what a dropped network looks like to the client) and
// refuse new ones until allowed again: a client's connection loss, for the recovery tests.

import net from 'node:net';
import type { Test } from 'tap';

export interface TcpProxy {
  port: number;
  /** Connections accepted so far (a reconnect shows as one more). */
  accepted(): number;
  /** Resets every open connection and refuses (resets) new ones. */
  cut(): void;
  /** Accepts connections again. */
  allow(): void;
  close(): Promise<void>;
}

/** A proxy to 127.0.0.1:`port`; closed at `t`'s teardown when given. */
export async function tcpProxy(port: number, t?: Test): Promise<TcpProxy> {
  const open = new Set<net.Socket>();
  let refusing = false;
  let accepted = 0;
  const server = net.createServer((client) => {
    if (refusing) return client.resetAndDestroy();
    accepted++;
    const upstream = net.connect(port, '127.0.0.1');
    open.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const drop = () => { open.delete(client); open.delete(upstream); client.destroy(); upstream.destroy(); };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const proxy: TcpProxy = {
    port: (server.address() as net.AddressInfo).port,
    accepted: () => accepted,
    cut() {
      refusing = true;
      for (const s of open) s.resetAndDestroy();
    },
    allow() { refusing = false; },
    close: () => new Promise<void>((r) => { for (const s of open) s.destroy(); server.close(() => r()); }),
  };
  t?.teardown(() => proxy.close());
  return proxy;
}
