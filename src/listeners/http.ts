// A node:http server on the primary (metrics, console, the HTTPS redirect) brought up and
// down the same way: listen resolves with the bound port (or rejects with the listen
// error, e.g. EADDRINUSE); later errors go to `onError`; close() stops accepting, drops
// every open connection and resolves once the server is closed (twice = the same promise).

import type http from 'node:http';
import type net from 'node:net';

export interface HttpListener {
  readonly port: number;
  close(): Promise<void>;
}

export function listenHttp(server: http.Server, port: number, host: string, o: { onError?: (err: Error) => void; beforeClose?: () => void } = {}): Promise<HttpListener> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      if (o.onError) server.on('error', o.onError);
      let closing: Promise<void> | null = null;
      resolve({
        port: (server.address() as net.AddressInfo).port,
        close() {
          closing ??= new Promise<void>((done) => {
            o.beforeClose?.();
            server.close(() => done());
            server.closeAllConnections();
          });
          return closing;
        },
      });
    });
  });
}
