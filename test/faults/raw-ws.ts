// A WebSocket client on a bare node:net socket, for fault tests that need control over
// the TCP side: it can stop reading (pause) so that the server's send queue fills, and it
// hands over every frame exactly as it came off the wire (a half-written frame would show
// as unparseable JSON or a frame cut short at EOF).

import { randomBytes } from 'node:crypto';
import net from 'node:net';

export interface WireFrame {
  opcode: number;
  payload: Buffer;
}

export class TcpWs {
  /** Text frames' payloads, in order. */
  readonly texts: string[] = [];
  closeCode: number | null = null;
  /** EOF or error seen. */
  ended = false;
  /** Bytes of an incomplete frame left when the connection ended (0: none). */
  partialAtEnd = 0;
  bytesRead = 0;
  private buf: Buffer = Buffer.alloc(0);
  private upgraded = false;
  private waiters: (() => void)[] = [];

  private constructor(readonly socket: net.Socket) {
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('end', () => this.finish());
    socket.on('close', () => this.finish());
    socket.on('error', () => this.finish());
  }

  /** Opens a TCP connection, does the RFC 6455 handshake by hand, resolves once upgraded. */
  static connect(port: number, path: string, host = '127.0.0.1'): Promise<TcpWs> {
    return new Promise((resolve, reject) => {
      const s = net.connect(port, host);
      const c = new TcpWs(s);
      s.once('error', reject);
      s.once('connect', () => {
        s.write(`GET ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
      });
      c.until(() => c.upgraded || c.ended, 5000).then(() => {
        if (c.upgraded) resolve(c);
        else reject(new Error('WebSocket handshake failed'));
      }, reject);
    });
  }

  /** Sends a masked text frame (clients must mask). */
  send(text: string): void {
    const payload = Buffer.from(text);
    const n = payload.length;
    const head = n < 126 ? Buffer.alloc(2) : n < 65536 ? Buffer.alloc(4) : Buffer.alloc(10);
    head[0] = 0x81;
    if (n < 126) head[1] = 0x80 | n;
    else if (n < 65536) { head[1] = 0x80 | 126; head.writeUInt16BE(n, 2); }
    else { head[1] = 0x80 | 127; head.writeBigUInt64BE(BigInt(n), 2); }
    const mask = randomBytes(4);
    for (let i = 0; i < n; i++) payload[i] ^= mask[i & 3];
    this.socket.write(Buffer.concat([head, mask, payload]));
  }

  pause(): void { this.socket.pause(); }
  resume(): void { this.socket.resume(); }
  destroy(): void { this.socket.destroy(); }

  /** Resolves when pred() holds (checked after every frame and at EOF), rejects after ms. */
  until(pred: () => boolean, ms: number, what = 'condition'): Promise<void> {
    if (pred()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = () => {
        if (!pred()) return false;
        clearTimeout(timer);
        resolve();
        return true;
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`timed out waiting for ${what}`));
      }, ms);
      const waiter = () => { if (check()) this.waiters = this.waiters.filter((w) => w !== waiter); };
      this.waiters.push(waiter);
    });
  }

  /** Resolves with the first text frame whose JSON matches pred. */
  async frame(pred: (f: { event?: string; channel?: string; data?: unknown }) => boolean, ms = 5000): Promise<void> {
    let from = 0;
    await this.until(() => {
      for (; from < this.texts.length; from++) if (pred(JSON.parse(this.texts[from]))) return true;
      return false;
    }, ms, 'a frame');
  }

  private notify(): void {
    for (const w of [...this.waiters]) w();
  }

  private finish(): void {
    if (this.ended) return;
    this.ended = true;
    this.partialAtEnd = this.upgraded ? this.buf.length : 0;
    this.notify();
  }

  private onData(chunk: Buffer): void {
    this.bytesRead += chunk.length;
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    if (!this.upgraded) {
      const end = this.buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = this.buf.subarray(0, end).toString();
      if (!/^HTTP\/1\.1 101 /.test(head)) {
        this.socket.destroy();
        return;
      }
      this.upgraded = true;
      this.buf = this.buf.subarray(end + 4);
    }
    let off = 0;
    const b = this.buf;
    for (;;) {
      if (b.length - off < 2) break;
      const opcode = b[off] & 0x0f;
      let len = b[off + 1] & 0x7f;
      let at = off + 2;
      if (len === 126) {
        if (b.length - off < 4) break;
        len = b.readUInt16BE(off + 2);
        at = off + 4;
      } else if (len === 127) {
        if (b.length - off < 10) break;
        len = Number(b.readBigUInt64BE(off + 2));
        at = off + 10;
      }
      if (b.length - at < len) break;
      const payload = b.subarray(at, at + len);
      off = at + len;
      if (opcode === 1) this.texts.push(payload.toString('utf8'));
      else if (opcode === 8) this.closeCode = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
    }
    this.buf = off === b.length ? Buffer.alloc(0) : b.subarray(off);
    this.notify();
  }
}
