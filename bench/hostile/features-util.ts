// Small clients for bench/hostile/features.ts: a raw WebSocket with its frames, signed API
// requests and a raw HTTP POST from a chosen source address.

import crypto from 'node:crypto';
import http from 'node:http';
import WebSocket from 'ws';
import { signApiQuery } from '../../src/protocol/api-auth';
import { APP } from '../harness/target';

export interface Frame { event: string; channel?: string; data?: unknown }

export class Sock {
  frames: Frame[] = [];
  socketId = '';
  closeCode: number | null = null;
  private waiters = new Set<() => void>();

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (raw) => {
      const f = JSON.parse((raw as Buffer).toString()) as Frame;
      if (typeof f.data === 'string' && f.data.startsWith('{')) {
        try { f.data = JSON.parse(f.data) as unknown; } catch { /* a string */ }
      }
      if (f.event === 'pusher:connection_established') this.socketId = (f.data as { socket_id: string }).socket_id;
      this.frames.push(f);
      for (const w of [...this.waiters]) w();
    });
    ws.on('close', (code) => {
      this.closeCode = code;
      for (const w of [...this.waiters]) w();
    });
    ws.on('error', () => undefined);
  }

  /** Connected: connection_established, or the first frame / close that came instead (`frames`, `closeCode`). */
  static async open(port: number, localAddress?: string): Promise<Sock> {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/app/${APP.key}?protocol=7&client=js&version=8.4.0`, { localAddress });
    const s = new Sock(ws);
    await s.until(() => s.frames.length > 0 || s.closeCode !== null, 10_000, 'the first frame').catch(() => undefined);
    return s;
  }

  get shard(): string {
    return this.socketId.split('.')[0];
  }

  send(f: unknown): void {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(typeof f === 'string' ? f : JSON.stringify(f));
  }

  until(pred: () => boolean, ms: number, what: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (!pred()) return;
        clearTimeout(t);
        this.waiters.delete(check);
        resolve();
      };
      const t = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
      }, ms);
      this.waiters.add(check);
      check();
    });
  }

  /** The next frame matching `pred` after now (or already there when `from` is given). */
  async next(pred: (f: Frame) => boolean, ms: number, what: string, from = this.frames.length): Promise<Frame> {
    let found: Frame | undefined;
    await this.until(() => (found = this.frames.slice(from).find(pred)) !== undefined, ms, what);
    return found!;
  }

  /** Round trip of one pusher:ping (ms). */
  async ping(ms = 5000): Promise<number> {
    const started = performance.now();
    await this.next((f) => f.event === 'pusher:pong', ms, 'pusher:pong', this.frames.length + (this.send({ event: 'pusher:ping', data: {} }), 0));
    return performance.now() - started;
  }

  close(): void {
    this.ws.terminate();
  }
}

/** A private channel's auth for a socket. */
export function channelAuth(socketId: string, channel: string): string {
  return `${APP.key}:${crypto.createHmac('sha256', APP.secret).update(`${socketId}:${channel}`).digest('hex')}`;
}

export interface Answer { status: number; body: string; json: { error?: string } | null; ms: number }

/** A POST of `body` to `path` (query included) from `from`, with `headers`. */
export function post(port: number, path: string, body: string, from = '127.0.0.1', headers: Record<string, string> = {}): Promise<Answer> {
  const started = performance.now();
  return new Promise((resolve) => {
    const req = http.request({
      host: '127.0.0.1', port, method: 'POST', path, agent: false, localAddress: from,
      headers: { connection: 'close', 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), ...headers },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { text += c; });
      res.on('end', () => {
        let json: Answer['json'] = null;
        try { json = JSON.parse(text) as Answer['json']; } catch { /* not JSON */ }
        resolve({ status: res.statusCode ?? 0, body: text, json, ms: performance.now() - started });
      });
    });
    req.on('error', (err) => resolve({ status: 0, body: String(err), json: null, ms: performance.now() - started }));
    req.setTimeout(10_000, () => req.destroy(new Error('timed out')));
    req.end(body);
  });
}

/** A signed HTTP API POST (`route`: events or batch_events). */
export function api(port: number, route: string, payload: unknown): Promise<Answer> {
  const path = `/apps/${APP.id}/${route}`;
  const body = JSON.stringify(payload);
  const q = signApiQuery(APP.key, APP.secret, 'POST', path, {}, body, Math.floor(Date.now() / 1000));
  return post(port, `${path}?${q}`, body);
}

export function p99(xs: number[]): number {
  if (xs.length === 0) return Infinity;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * 0.99))];
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const MiB = 1024 * 1024;
