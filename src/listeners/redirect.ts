// ssl.redirect_http: a plain HTTP listener on ssl.http_port that answers every request
// with 301 to the same host, path and query on the HTTPS port. It runs in the primary on
// node:http: it only ever answers redirects (no WebSocket, no API), so it needs neither
// the shards nor uWS, and it stops with the server.

import http from 'node:http';
import type { Config } from '../config/types';
import { listenHttp } from './http';

export interface RedirectServer {
  readonly port: number;
  close(): Promise<void>;
}

/** A Host header we are willing to echo: a name or an address, an optional port (no userinfo, no path). */
const HOST = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/;

/** The https URL for a request: the Host header's host (else `domain`), the HTTPS port, the same path and query. */
export function redirectLocation(hostHeader: string | undefined, url: string, domain: string, httpsPort: number): string {
  const m = hostHeader === undefined ? null : HOST.exec(hostHeader);
  const host = m ? m[1] : domain;
  const port = httpsPort === 443 ? '' : `:${httpsPort}`;
  // url is the request target as sent: origin form ("/path?query") for any client that is
  // not talking to a proxy; anything else is answered with the root.
  const path = url.startsWith('/') ? url : '/';
  return `https://${host}${port}${path}`;
}

export function startRedirectServer(config: Config, httpsPort: number): Promise<RedirectServer> {
  const server = http.createServer((req, res) => {
    const location = redirectLocation(req.headers.host, req.url ?? '/', config.domain, httpsPort);
    res.writeHead(301, { Location: location, 'Content-Type': 'text/plain', Connection: 'close' });
    res.end(`Moved permanently to ${location}\n`);
  });
  return listenHttp(server, config.ssl.http_port, config.host);
}
