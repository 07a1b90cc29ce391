// Raw WebSocket clients for the delta tests: every frame kept as text, delta frames
// decoded with the shipped client decoder (client/delta-core.js), so a test compares
// what a delta client reconstructs with what a plain client receives, byte for byte.

import path from 'node:path';
import WebSocket from 'ws';
import type { TestServer } from '../helpers/server';
import { APP } from '../helpers/server';
import { sign } from '../helpers/auth';

interface DecodeResult { type: 'event' | 'sync_error'; channel: string; event?: string; envelope?: string }
export interface Decoder {
  receive(text: string): DecodeResult | null;
  reset(channel: string): void;
  stats: { full: number; deltas: number; syncErrors: number; deltaBytes: number };
}
interface CoreModule {
  DeltaDecoder: new (opts?: { algorithm?: string; xdelta3?: (b: Uint8Array, d: Uint8Array) => Uint8Array }) => Decoder;
  createDeltaDecoder(opts?: { xdelta3?: boolean; algorithm?: string }): Promise<Decoder>;
}
// The client is an ES module (client/package.json); Node 20.19+ requires it synchronously.
// eslint-disable-next-line @typescript-eslint/no-require-imports
export const core = require(path.join(__dirname, '../../../client/delta-core.js')) as CoreModule;

const SEQ_FIELD = ',"__delta_seq":';

export class DeltaClient {
  readonly texts: string[] = [];
  /** Per channel: the application events as envelopes (full ones without the __ fields, deltas decoded). */
  readonly envelopes = new Map<string, string[]>();
  /** Every raw byte received (bandwidth). */
  bytes = 0;
  socketId = '';
  /** Before a delta is decoded: a test may break the bases here. */
  beforeDelta: ((text: string) => void) | null = null;
  private ws!: WebSocket;
  private waiters: { pred: () => boolean; resolve: () => void }[] = [];

  constructor(readonly decoder: Decoder | null) {}

  static async open(srv: TestServer, decoder: Decoder | null): Promise<DeltaClient> {
    const c = new DeltaClient(decoder);
    c.ws = new WebSocket(srv.wsUrl());
    c.ws.on('message', (raw: Buffer) => c.onText(raw.toString('utf8'), raw.length));
    srv.track({ close: () => c.ws.terminate() });
    await c.until(() => c.socketId !== '', 'connection_established');
    return c;
  }

  private onText(text: string, n: number): void {
    this.bytes += n;
    this.texts.push(text);
    const msg = JSON.parse(text) as { event: string; channel?: string; data?: unknown };
    if (msg.event === 'pusher:connection_established') this.socketId = (JSON.parse(msg.data as string) as { socket_id: string }).socket_id;
    if (this.decoder && msg.event === 'pusher:delta') this.beforeDelta?.(text);
    const r = this.decoder?.receive(text) ?? null;
    if (r?.type === 'sync_error') this.send('pusher:delta_sync_error', { channel: r.channel });
    if (r?.type === 'event') this.push(r.channel, r.envelope!);
    else if (msg.channel !== undefined && !msg.event.startsWith('pusher')) {
      const at = text.lastIndexOf(SEQ_FIELD);
      this.push(msg.channel, at > 0 ? text.slice(0, at) + '}' : text);
    }
    for (const w of this.waiters.splice(0)) {
      if (w.pred()) w.resolve();
      else this.waiters.push(w);
    }
  }

  private push(channel: string, envelope: string): void {
    const list = this.envelopes.get(channel) ?? [];
    list.push(envelope);
    this.envelopes.set(channel, list);
  }

  send(event: string, data: unknown, channel?: string): void {
    this.ws.send(JSON.stringify(channel === undefined ? { event, data } : { event, channel, data }));
  }

  enable(): Promise<void> {
    this.send('pusher:enable_delta_compression', {});
    return this.until(() => this.texts.some((t) => t.includes('pusher:delta_compression_enabled')), 'delta_compression_enabled');
  }

  async subscribe(channel: string, extra: Record<string, unknown> = {}): Promise<void> {
    const auth = channel.startsWith('private-') ? { auth: sign(APP, this.socketId, channel) } : {};
    this.send('pusher:subscribe', { channel, ...auth, ...extra });
    await this.until(() => this.texts.some((t) => t.includes('subscription_succeeded') && t.includes(JSON.stringify(channel))), `subscribed to ${channel}`);
  }

  events(channel: string): string[] {
    return this.envelopes.get(channel) ?? [];
  }

  has(pred: (text: string) => boolean): boolean {
    return this.texts.some(pred);
  }

  until(pred: () => boolean, what: string, ms = 20_000): Promise<void> {
    if (pred()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
      this.waiters.push({ pred, resolve: () => { clearTimeout(timer); resolve(); } });
    });
  }
}

/** An order book of about `size` bytes per symbol; each update changes a level or two. */
export class Books {
  private readonly books = new Map<string, { p: number; q: number }[]>();
  private seq = 0;
  constructor(private readonly rand: () => number, private readonly size = 1000) {}

  update(symbol: string): string {
    let levels = this.books.get(symbol);
    if (levels === undefined) {
      levels = [];
      let p = 100 + Math.floor(this.rand() * 50);
      while (JSON.stringify(levels).length < this.size - 120) levels.push({ p: +(p++ + this.rand()).toFixed(2), q: Math.floor(this.rand() * 500) });
      this.books.set(symbol, levels);
    }
    for (let k = 0; k < 2; k++) levels[Math.floor(this.rand() * levels.length)].q = Math.floor(this.rand() * 500);
    const seq = ++this.seq;
    return JSON.stringify({ sym: symbol, seq, ts: 1_700_000_000_000 + seq * 17, bid: levels });
  }
}

/** Deterministic PRNG (mulberry32) so that a failure can be replayed from its seed. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Each delta message a client got: its seq and whether it came full. */
export function positions(c: DeltaClient, channel: string): { seq: number; full: boolean }[] {
  const out: { seq: number; full: boolean }[] = [];
  for (const text of c.texts) {
    const m = JSON.parse(text) as { event: string; channel?: string; data?: { seq?: number } };
    if (m.channel !== channel) continue;
    if (m.event === 'pusher:delta') out.push({ seq: m.data!.seq!, full: false });
    else {
      const at = /,"__delta_seq":(\d+)/.exec(text);
      if (at) out.push({ seq: Number(at[1]), full: true });
    }
  }
  return out;
}

