// pusher-js (its Node build, unmodified) pointed at a test server, with an in-process
// channel authorizer playing the application's auth endpoint.

import PusherJS from 'pusher-js';
import type { Channel } from 'pusher-js';
import { channelAuth } from '../../src/protocol/hmac';
import { APP, eventually } from './server';

export interface PusherJsOptions {
  /** Presence channel_data this client authorizes with ({user_id, user_info}). */
  user?: { user_id: string | number; user_info?: unknown };
  app?: { key: string; secret: string };
  /** Make the authorizer refuse (as an app's endpoint answering 403 would). */
  refuseAuth?: boolean;
}

export function pusherJs(port: number, opts: PusherJsOptions = {}): PusherJS {
  const app = opts.app ?? APP;
  return new PusherJS(app.key, {
    cluster: 'mt1',
    wsHost: '127.0.0.1',
    wsPort: port,
    forceTLS: false,
    enabledTransports: ['ws'],
    disableStats: true,
    channelAuthorization: {
      endpoint: 'unused',
      transport: 'ajax',
      customHandler: ({ socketId, channelName }, callback) => {
        if (opts.refuseAuth) return callback(new Error('forbidden'), null);
        const cd = channelName.startsWith('presence-') ? JSON.stringify(opts.user ?? { user_id: socketId }) : undefined;
        callback(null, { auth: channelAuth(app.key, app.secret, socketId, channelName, cd), ...(cd ? { channel_data: cd } : {}) });
      },
    },
  });
}

/** Resolves once pusher-js reports the connection state `connected`. */
export function connected(client: PusherJS, timeoutMs = 5000): Promise<string> {
  return new Promise((resolve, reject) => {
    if (client.connection.state === 'connected') return resolve(client.connection.socket_id);
    const t = setTimeout(() => reject(new Error(`pusher-js not connected: ${client.connection.state}`)), timeoutMs);
    client.connection.bind('connected', () => {
      clearTimeout(t);
      resolve(client.connection.socket_id);
    });
  });
}

/** Subscribes; resolves with the channel at pusher:subscription_succeeded, rejects at subscription_error. */
export const subscribed = (c: PusherJS, name: string): Promise<Channel> => new Promise((resolve, reject) => {
  const ch = c.subscribe(name);
  ch.bind('pusher:subscription_succeeded', () => resolve(ch));
  ch.bind('pusher:subscription_error', (e: unknown) => reject(new Error(`subscription_error ${JSON.stringify(e)}`)));
});

/** Collects an event's data on a channel; `until(n)` resolves once n arrived. */
export function collect<T = unknown>(ch: Channel, event: string) {
  const got: T[] = [];
  ch.bind(event, (d: T) => got.push(d));
  return { got, until: (n: number, what: string, ms = 10_000) => eventually(() => got.length >= n, ms, what) };
}

/** Subscribes to every channel, recording the `i` of each `event`'s data per channel; resolves once every subscription succeeded. */
/** Publishes `{"i": i}` as event `msg` on every channel for i = from…to, one batch per i, each answered before the next (the numbers subscribeNumbered reads). */
export async function publishNumbered(sdk: { triggerBatch(batch: { channel: string; name: string; data: string }[]): Promise<unknown> }, channels: string[], from: number, to: number): Promise<void> {
  for (let i = from; i <= to; i++) await sdk.triggerBatch(channels.map((channel) => ({ channel, name: 'msg', data: JSON.stringify({ i }) })));
}

export async function subscribeNumbered(c: PusherJS, channels: string[], event = 'msg'): Promise<Map<string, number[]>> {
  const got = new Map(channels.map((name) => [name, [] as number[]]));
  await Promise.all(channels.map((name) => new Promise<void>((resolve) => {
    const ch = c.subscribe(name);
    ch.bind(event, (d: { i: number }) => got.get(name)!.push(d.i));
    ch.bind('pusher:subscription_succeeded', () => resolve());
  })));
  return got;
}
