// pusher-js (its Node build, unmodified) forced onto an HTTP fallback transport
// (xhr_streaming or xhr_polling) of a test server, with the `pusher` server SDK playing the
// application's channel and user authorization endpoints.

import http from 'node:http';
import PusherJS from 'pusher-js';
import Pusher from 'pusher';
import { APP } from './server';

export type FallbackTransport = 'xhr_streaming' | 'xhr_polling';
export const FALLBACK_TRANSPORTS: readonly FallbackTransport[] = ['xhr_streaming', 'xhr_polling'];
/** A 32-byte key for private-encrypted channels (the SDK derives each channel's secret from it). */
export const MASTER_KEY = Buffer.alloc(32, 7).toString('base64');

export interface FallbackClientOptions {
  user?: { user_id: string; user_info?: Record<string, unknown> };
  app?: { id: string; key: string; secret: string };
}

export function fallbackClient(port: number, transport: FallbackTransport, opts: FallbackClientOptions = {}): PusherJS {
  const app = opts.app ?? APP;
  const sdk = new Pusher({ appId: app.id, key: app.key, secret: app.secret, host: '127.0.0.1', port: String(port), useTLS: false, encryptionMasterKeyBase64: MASTER_KEY });
  return new PusherJS(app.key, {
    cluster: 'x',
    httpHost: '127.0.0.1',
    httpPort: port,
    // no WebSocket is tried: the only transport enabled is the HTTP one
    wsHost: '127.0.0.1',
    wsPort: 1,
    forceTLS: false,
    enabledTransports: [transport as 'ws'],
    disableStats: true,
    channelAuthorization: {
      endpoint: 'unused',
      transport: 'ajax',
      customHandler: ({ socketId, channelName }, callback) => {
        const presence = channelName.startsWith('presence-') ? opts.user ?? { user_id: socketId } : undefined;
        callback(null, sdk.authorizeChannel(socketId, channelName, presence) as never);
      },
    },
    userAuthentication: {
      endpoint: 'unused',
      transport: 'ajax',
      customHandler: ({ socketId }, callback) => {
        callback(null, sdk.authenticateUser(socketId, { id: opts.user?.user_id ?? 'nobody', ...(opts.user?.user_info ? { user_info: opts.user.user_info } : {}) }) as never);
      },
    },
  });
}

/** The transport pusher-js connected with (its internal connection object). */
export function transportOf(c: PusherJS): string {
  return (c.connection as unknown as { connection: { transport: { name: string } } | null }).connection?.transport.name ?? '';
}

/** The sum of a counter's series whose labels include `match` (e.g. transport="xhr_streaming"), from /metrics. */
export function counterValue(metricsPort: number, name: string, match: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port: metricsPort, path: '/metrics', agent: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => { body += c.toString(); });
      res.on('end', () => {
        let sum = 0;
        for (const m of body.matchAll(new RegExp(`^ringcast_${name}\\{([^}]*)\\} (\\S+)$`, 'gm'))) if (m[1].includes(match)) sum += Number(m[2]);
        resolve(sum);
      });
    }).on('error', reject);
  });
}

/** A raw receiving request (xhr_streaming or xhr) on its own connection: the body as it arrives. */
export class RawReceive {
  text = '';
  status = 0;
  headers: http.IncomingHttpHeaders = {};
  ended = false;
  private readonly req: http.ClientRequest;

  /** `localAddress`: the client's source address (127.0.0.2 is another client on loopback). */
  constructor(port: number, path: string, headers: Record<string, string> = {}, localAddress?: string) {
    this.req = http.request({ host: '127.0.0.1', port, method: 'POST', path, agent: false, localAddress, headers: { 'content-type': 'application/json', 'content-length': '0', ...headers } }, (res) => {
      this.status = res.statusCode!;
      this.headers = res.headers;
      res.setEncoding('utf8');
      res.on('data', (c: string) => { this.text += c; });
      res.on('end', () => { this.ended = true; });
      res.on('error', () => { this.ended = true; });
    });
    this.req.on('error', () => { this.ended = true; });
    this.req.end();
  }

  /** The Pusher frames of every `a` line so far. */
  frames(): { event: string; channel?: string; data?: any }[] {
    const out = [];
    for (const line of this.text.split('\n')) {
      if (!line.startsWith('a')) continue;
      for (const el of JSON.parse(line.slice(1)) as string[]) out.push(JSON.parse(el));
    }
    return out;
  }

  lines(): string[] {
    return this.text.split('\n').filter((l) => l.length > 0);
  }

  abort(): void {
    this.req.destroy();
  }
}
