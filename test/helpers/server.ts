// Test harness: a real ringcast (primary + shard threads) on an ephemeral port on
// 127.0.0.1, real clients (raw `ws`, pusher-js, the `pusher` SDK).
// RINGCAST_TEST_WORKERS picks the shard count (make test runs the suite with 1 and 4).

import { readFileSync } from 'node:fs';
import http from 'node:http';
import Pusher from 'pusher';
import WebSocket from 'ws';
import { loadConfig, type ConfigInput } from '../../src/config';
import type { Config } from '../../src/config/types';
import { start, type RunningServer } from '../../src/main';
import { channelAuth } from '../../src/protocol/hmac';

export const WORKERS = Number(process.env.RINGCAST_TEST_WORKERS ?? '1');

export const APP = { id: 'app-id', key: 'app-key', secret: 'app-secret' } as const;

export interface TestServer {
  port: number;
  config: Config;
  server: RunningServer;
  wsUrl(key?: string, query?: string): string;
  /** The `pusher` server SDK pointed at this server (no keep-alive, so stop() is quick). */
  sdk(app?: { id: string; key: string; secret: string }): Pusher;
  /** Registers a client to be disconnected before the server stops. */
  track<T extends { disconnect(): void } | { close(): unknown }>(client: T): T;
  /** Disconnects tracked clients, then stops the server. */
  stop(): Promise<void>;
}

/** The running test file mentions delta compression anywhere (read once). */
let fileMentionsDelta: boolean | null = null;

/**
 * Whether a test may use delta compression: it configures it (`delta_compression` or an
 * app's `channel_delta_compression`), or its file mentions delta at all (a client's own
 * opt-in needs no config). The delta sequencer is a thread of its own (about a third of the
 * CPU a one-shard server takes to start and stop), so a test server starts it only then.
 */
function wantsDelta(overrides: ConfigInput): boolean {
  if (overrides.delta_compression !== undefined || (overrides.apps ?? []).some((a) => a.channel_delta_compression !== undefined)) return true;
  if (fileMentionsDelta === null) {
    let src = '';
    try {
      src = readFileSync(process.argv[1] ?? '', 'utf8');
    } catch {
      src = 'delta'; // not a test file: keep the default
    }
    fileMentionsDelta = /delta/i.test(src);
  }
  return fileMentionsDelta;
}

export async function startServer(overrides: ConfigInput = {}): Promise<TestServer> {
  const config = loadConfig({
    env: {},
    overrides: {
      host: '127.0.0.1',
      port: 0,
      workers: WORKERS,
      log: { level: 'error' },
      apps: [{ ...APP }],
      // stops take no paced drain unless the test asks (test/faults/drain.test.ts)
      shutdown_drain_window: 0,
      ...(wantsDelta(overrides) ? {} : { delta_compression: { enabled: false } }),
      ...overrides,
    },
  });
  const server = await start(config);
  const agent = new http.Agent({ keepAlive: false });
  const clients: ({ disconnect(): void } | { close(): unknown })[] = [];
  return {
    port: server.port,
    config,
    server,
    wsUrl: (key = APP.key, query = '?protocol=7&client=js&version=8.4.0') => `ws://127.0.0.1:${server.port}/app/${key}${query}`,
    sdk: (app = APP) => new Pusher({
      appId: app.id, key: app.key, secret: app.secret,
      host: '127.0.0.1', port: String(server.port), useTLS: false, agent,
    }),
    track: (client) => {
      clients.push(client);
      return client;
    },
    stop: async () => {
      for (const c of clients.splice(0)) {
        if ('disconnect' in c) c.disconnect();
        else void c.close();
      }
      await server.stop();
    },
  };
}

export interface Frame {
  event: string;
  channel?: string;
  data?: any;
  user_id?: unknown;
}

let syncSeq = 0;

/** A raw WebSocket client that records every frame and can wait for one. */
export class RawClient {
  readonly frames: Frame[] = [];
  closeCode: number | null = null;
  closeReason = '';
  socketId = '';
  private waiters: { pred: (f: Frame) => boolean; resolve: (f: Frame) => void; from: number }[] = [];
  private closeWaiters: ((code: number) => void)[] = [];

  constructor(readonly ws: WebSocket) {
    ws.on('message', (raw) => {
      const f = JSON.parse(raw.toString()) as Frame;
      this.frames.push(f);
      for (const w of [...this.waiters]) {
        if (w.pred(f)) {
          this.waiters.splice(this.waiters.indexOf(w), 1);
          w.resolve(f);
        }
      }
    });
    ws.on('close', (code, reason) => {
      this.closeCode = code;
      this.closeReason = reason.toString();
      for (const w of this.closeWaiters) w(code);
    });
  }

  static async connect(url: string, opts: WebSocket.ClientOptions = {}): Promise<RawClient> {
    const c = new RawClient(new WebSocket(url, opts));
    const first = await c.next(() => true, 5000);
    if (first.event === 'pusher:connection_established') c.socketId = JSON.parse(first.data).socket_id;
    return c;
  }

  send(obj: unknown): void {
    this.ws.send(typeof obj === 'string' ? obj : JSON.stringify(obj));
  }

  /** Resolves with the first frame (already received or future) matching pred. */
  next(pred: (f: Frame) => boolean, timeoutMs = 3000): Promise<Frame> {
    const seen = this.frames.find(pred);
    if (seen) {
      this.frames.splice(this.frames.indexOf(seen), 1);
      return Promise.resolve(seen);
    }
    return new Promise((resolve, reject) => {
      const w = { pred, resolve: (f: Frame) => { clearTimeout(t); this.frames.splice(this.frames.indexOf(f), 1); resolve(f); }, from: this.frames.length };
      const t = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        reject(new Error(`timed out waiting for a frame; got: ${JSON.stringify(this.frames)}`));
      }, timeoutMs);
      this.waiters.push(w);
    });
  }

  event(event: string, channel?: string, timeoutMs?: number): Promise<Frame> {
    return this.next((f) => f.event === event && (channel === undefined || f.channel === channel), timeoutMs);
  }

  /**
   * A round trip on this connection: subscribes to a fresh public channel, waits for its
   * subscription_succeeded (sent in the turn the server reads the subscribe), then leaves
   * it. Whatever the server sent in answer to frames this client sent before is here then
   * (one connection's frames are read in order). Nothing from other threads is ordered
   * by it: for those, see test/helpers/settle.ts.
   */
  async sync(timeoutMs = 3000): Promise<void> {
    const channel = `sync-${process.pid}-${++syncSeq}`;
    this.send({ event: 'pusher:subscribe', data: { channel } });
    const f = await this.next((x) => x.channel === channel, timeoutMs);
    if (f.event !== 'pusher_internal:subscription_succeeded') throw new Error(`sync subscribe answered ${JSON.stringify(f)}`);
    this.send({ event: 'pusher:unsubscribe', data: { channel } });
  }

  async subscribe(channel: string, extra: Record<string, unknown> = {}): Promise<Frame> {
    this.send({ event: 'pusher:subscribe', data: { channel, ...extra } });
    return this.next((f) => f.channel === channel &&
      (f.event === 'pusher_internal:subscription_succeeded' || f.event === 'pusher:subscription_error'));
  }

  /** Private/presence subscribe with a correct signature. */
  subscribeAuthed(channel: string, channelData?: unknown, app: { key: string; secret: string } = APP): Promise<Frame> {
    const cd = channelData === undefined ? undefined : JSON.stringify(channelData);
    return this.subscribe(channel, { auth: channelAuth(app.key, app.secret, this.socketId, channel, cd), ...(cd ? { channel_data: cd } : {}) });
  }

  closed(timeoutMs = 3000): Promise<number> {
    if (this.closeCode !== null) return Promise.resolve(this.closeCode);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('socket did not close')), timeoutMs);
      this.closeWaiters.push((c) => { clearTimeout(t); resolve(c); });
    });
  }

  close(): Promise<number> {
    if (this.closeCode === null) this.ws.close();
    return this.closed();
  }
}

/**
 * Opens `n` tracked connections to `srv` (more if needed so that, with several workers,
 * at least two shards are used).
 */
export async function spreadClients(srv: TestServer, n: number): Promise<RawClient[]> {
  const out: RawClient[] = [];
  const shards = () => new Set(out.map((c) => c.socketId.split('.')[0])).size;
  const wantShards = Math.min(WORKERS, 2);
  for (let i = 0; i < 40 && (out.length < n || shards() < wantShards); i++) {
    out.push(srv.track(await RawClient.connect(srv.wsUrl())));
  }
  if (shards() < wantShards) throw new Error(`connections landed on ${shards()} shard(s) only`);
  return out;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Polls fn until it returns true (or throws after timeoutMs). */
export async function eventually(fn: () => boolean | Promise<boolean>, timeoutMs = 3000, what = 'condition'): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (await fn()) return;
    await sleep(20);
  }
  throw new Error(`timed out waiting for ${what}`);
}
