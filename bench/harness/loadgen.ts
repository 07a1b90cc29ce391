// Load-generator child process: many Pusher WebSocket subscribers on raw TCP sockets.
//
// Started by bench/harness/procs.ts with fork(); commands arrive over IPC (see
// GenCommand). A minimal RFC 6455 client is used instead of `ws` so that one process can
// hold ~19,000 sockets and count millions of frames per second:
// - the upgrade request is a fixed string and the 101 response is only checked for "101";
// - server frames are walked header by header; a Pusher message is recognised by the
//   byte after `{"event":"` (every target serialises `event` first; any other layout
//   falls back to JSON.parse), so counting a message touches 4 bytes of it;
// - the end-to-end latency is read from the digits after '@' in the payload, which the
//   publisher fills with process.hrtime() in µs (CLOCK_MONOTONIC: the same clock in
//   every process of the machine);
// - client frames are masked with a zero key (valid per RFC 6455, and free).
// It answers WebSocket pings and pusher:ping, and exits when its parent goes away.

import net from 'node:net';
import { Histogram } from './histogram';
import type { GenCommand, GenInit, GenReply } from './protocol';
import { channelsOf, cpuUs, nowUs, readHandshake } from './protocol';

const OP_TEXT = 0x1;
const OP_CLOSE = 0x8;
const OP_PING = 0x9;

const CH_AT = 0x40; // '@'
const CH_0 = 0x30;
const CH_9 = 0x39;

interface Conn {
  g: number; // global connection index
  sock: net.Socket;
  state: 0 | 1 | 2; // 0 handshake, 1 open, 2 closed
  hs: Buffer | null; // partial handshake response
  pend: Buffer | null; // partial frame
  channels: string[];
  subsSent: boolean;
  est: boolean; // pusher:connection_established received
}

let init: GenInit;
const conns: Conn[] = [];
const hist = new Histogram();
let msgs = 0;
let bytes = 0;
let established = 0;
let failed = 0;
let closedAfterOpen = 0;
let subsConfirmed = 0;
let subsFailed = 0;
let subsSentCount = 0;
let pusherPings = 0;
let wsPings = 0;
const errors: Record<string, number> = {};
let tFirstSubSent = 0;
let tLastSubConfirmed = 0;
let tLastEstablished = 0;
let measureLatency = false;
let closing = false;

function countError(code: string): void {
  errors[code] = (errors[code] ?? 0) + 1;
}

function send(msg: GenReply): void {
  if (process.send) process.send(msg);
}

// ---- client frames -------------------------------------------------------------------

function maskedFrame(opcode: number, payload: Buffer): Buffer {
  const n = payload.length;
  const hl = n < 126 ? 2 : n < 65536 ? 4 : 10;
  const f = Buffer.allocUnsafe(hl + 4 + n);
  f[0] = 0x80 | opcode;
  if (n < 126) {
    f[1] = 0x80 | n;
  } else if (n < 65536) {
    f[1] = 0x80 | 126;
    f.writeUInt16BE(n, 2);
  } else {
    f[1] = 0x80 | 127;
    f.writeUInt32BE(0, 2);
    f.writeUInt32BE(n, 6);
  }
  f.writeUInt32BE(0, hl); // zero masking key: the payload goes out as is
  payload.copy(f, hl + 4);
  return f;
}

const PONG_FRAME = maskedFrame(OP_TEXT, Buffer.from('{"event":"pusher:pong","data":{}}'));

function subscribeFrames(channels: string[], g: number): Buffer {
  // subscribeData: more subscribe fields (a delta subscription: bench/delta/)
  const f = init.channels.filter;
  const eq = f ? { key: f.key, cmp: 'eq', val: String(g % f.values) } : null;
  const filter = f ? { filter: f.shape === 'and' ? { op: 'and', nodes: [eq, { key: f.key, cmp: 'ex' }] } : eq } : {};
  return Buffer.concat(channels.map((c) => maskedFrame(OP_TEXT, Buffer.from(JSON.stringify({ event: 'pusher:subscribe', data: { channel: c, ...filter, ...init.subscribeData } })))));
}

function sendSubscribes(c: Conn): void {
  if (c.subsSent || c.state !== 1) return;
  c.subsSent = true;
  if (tFirstSubSent === 0) tFirstSubSent = nowUs();
  subsSentCount += c.channels.length;
  c.sock.write(subscribeFrames(c.channels, c.g));
}

// ---- server frames -------------------------------------------------------------------

function onControlText(c: Conn, buf: Buffer, s: number, e: number, now: number): void {
  let m: { event?: unknown; data?: unknown };
  try {
    m = JSON.parse(buf.toString('utf8', s, e)) as { event?: unknown; data?: unknown };
  } catch {
    countError('bad_json');
    return;
  }
  const ev = typeof m.event === 'string' ? m.event : '';
  switch (ev) {
    case 'pusher:connection_established':
      if (c.est) return;
      c.est = true;
      established++;
      tLastEstablished = now;
      launchNext();
      if (init.subscribeOnConnect) sendSubscribes(c);
      maybeDone();
      return;
    case 'pusher_internal:subscription_succeeded':
      subsConfirmed++;
      tLastSubConfirmed = now;
      maybeDone();
      return;
    case 'pusher:subscription_error':
      subsFailed++;
      countError('subscription_error');
      maybeDone();
      return;
    case 'pusher:ping':
      pusherPings++;
      c.sock.write(PONG_FRAME);
      return;
    case 'pusher:pong':
      return;
    case 'pusher:delta': // a delta message counts as a message (not decoded: bench/delta/)
      onMessage(buf, s, e, now);
      return;
    case 'pusher:error': {
      let code = '?';
      try {
        const d = (typeof m.data === 'string' ? JSON.parse(m.data) : m.data) as { code?: unknown };
        code = String(d?.code);
      } catch { /* keep '?' */ }
      countError('pusher_error_' + code);
      return;
    }
    default:
      if (ev.startsWith('pusher')) return;
      onMessage(buf, s, e, now);
  }
}

function onMessage(buf: Buffer, s: number, e: number, now: number): void {
  msgs++;
  if (!measureLatency) return;
  for (let i = s; i < e; i++) {
    if (buf[i] !== CH_AT) continue;
    let v = 0;
    let j = i + 1;
    for (; j < e; j++) {
      const ch = buf[j];
      if (ch < CH_0 || ch > CH_9) break;
      v = v * 10 + (ch - CH_0);
    }
    if (j > i + 1) hist.record(now - v);
    return;
  }
}

function onFrame(c: Conn, b0: number, buf: Buffer, s: number, e: number, now: number): void {
  const op = b0 & 0x0f;
  if (op === OP_TEXT) {
    // Fast path: `{"event":"X…` where X is not 'p' (pusher:…/pusher_internal:…) is a message.
    if (e - s > 11 && buf[s + 2] === 0x65 && buf[s + 8] === 0x3a && buf[s + 9] === 0x22) {
      if (buf[s + 10] !== 0x70) {
        onMessage(buf, s + 10, e, now);
        return;
      }
    }
    onControlText(c, buf, s, e, now);
  } else if (op === OP_PING) {
    wsPings++;
    c.sock.write(maskedFrame(0xa, Buffer.from(buf.subarray(s, e))));
  } else if (op === OP_CLOSE) {
    const code = e - s >= 2 ? buf.readUInt16BE(s) : 1005;
    countError('close_' + code);
    c.sock.end();
  }
}

/** Parses whole frames of buf from off; returns the offset of the first incomplete one. */
function parseFrames(c: Conn, buf: Buffer, off: number, now: number): number {
  const len = buf.length;
  while (off + 2 <= len) {
    const b0 = buf[off];
    let pl = buf[off + 1] & 0x7f;
    let hl = 2;
    if (pl === 126) {
      if (off + 4 > len) break;
      pl = buf.readUInt16BE(off + 2);
      hl = 4;
    } else if (pl === 127) {
      if (off + 10 > len) break;
      pl = buf.readUInt32BE(off + 2) * 4294967296 + buf.readUInt32BE(off + 6);
      hl = 10;
    }
    if (off + hl + pl > len) break;
    onFrame(c, b0, buf, off + hl, off + hl + pl, now);
    off += hl + pl;
  }
  return off;
}

/** Total length of the frame at buf[0..], or -1 if its header is not complete yet. */
function frameLength(buf: Buffer): number {
  if (buf.length < 2) return -1;
  const pl = buf[1] & 0x7f;
  if (pl < 126) return 2 + pl;
  if (pl === 126) return buf.length < 4 ? -1 : 4 + buf.readUInt16BE(2);
  return buf.length < 10 ? -1 : 10 + buf.readUInt32BE(2) * 4294967296 + buf.readUInt32BE(6);
}

function onData(c: Conn, chunk: Buffer): void {
  bytes += chunk.length;
  const now = nowUs();
  let off = 0;
  if (c.pend !== null) {
    // Complete the pending frame with just the bytes it still needs, then go on in chunk.
    let p: Buffer = c.pend;
    let total = frameLength(p);
    if (total < 0) {
      const head = Buffer.concat([p, chunk.subarray(0, Math.min(chunk.length, 10))]);
      total = frameLength(head);
      if (total < 0) {
        c.pend = Buffer.concat([p, chunk]);
        return;
      }
    }
    const need = total - p.length;
    if (chunk.length < need) {
      c.pend = Buffer.concat([p, chunk]);
      return;
    }
    p = Buffer.concat([p, chunk.subarray(0, need)]);
    c.pend = null;
    parseFrames(c, p, 0, now);
    off = need;
  }
  const end = parseFrames(c, chunk, off, now);
  if (end < chunk.length) c.pend = Buffer.from(chunk.subarray(end));
}

function onHandshakeData(c: Conn, chunk: Buffer): void {
  const h = readHandshake(c, chunk);
  if (h === null) return;
  if (h.status !== '101') {
    countError('http_' + h.status);
    fail(c);
    return;
  }
  c.state = 1;
  if (h.rest !== null) onData(c, h.rest);
}

// ---- connection management -----------------------------------------------------------

let nextToLaunch = 0;
let inFlight = 0;
let target = 0;
let doneWaiter: { kind: 'connect' | 'subscribe'; id: number; timer: NodeJS.Timeout } | null = null;

function fail(c: Conn): void {
  if (c.state === 2) return;
  c.state = 2;
  c.sock.destroy();
  if (!c.est) {
    failed++;
    launchNext();
    maybeDone();
  }
}

function launchNext(): void {
  inFlight--;
  launch();
}

function launch(): void {
  while (inFlight < init.concurrency && nextToLaunch < target) {
    const i = nextToLaunch++;
    inFlight++;
    open(init.firstIndex + i);
  }
}

const upgradeRequest = (): string =>
  `GET ${init.path} HTTP/1.1\r\nHost: ${init.host}:${init.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
  'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n';
let upgradeBytes: Buffer;

function open(g: number): void {
  const localAddress = init.srcAddrs.length > 0 ? init.srcAddrs[g % init.srcAddrs.length] : undefined;
  const sock = net.connect({ host: init.host, port: init.port, localAddress, noDelay: true });
  const c: Conn = { g, sock, state: 0, hs: null, pend: null, channels: channelsOf(init.channels, g), subsSent: false, est: false };
  conns.push(c);
  sock.on('connect', () => sock.write(upgradeBytes));
  sock.on('data', (chunk: Buffer) => {
    if (c.state === 1) onData(c, chunk);
    else if (c.state === 0) onHandshakeData(c, chunk);
  });
  sock.on('error', (err: NodeJS.ErrnoException) => {
    if (!closing) countError(err.code ?? 'error');
  });
  sock.on('close', () => {
    if (c.state === 2) return;
    c.state = 2;
    if (!c.est) {
      failed++;
      launchNext();
      maybeDone();
    } else if (!closing) {
      closedAfterOpen++;
    }
  });
}

function connectDone(): boolean {
  if (established + failed < target) return false;
  // Subscribes go out the moment a connection is established, so subsSentCount is final here.
  if (init.subscribeOnConnect && subsConfirmed + subsFailed < subsSentCount) return false;
  return true;
}

function maybeDone(): void {
  if (doneWaiter === null) return;
  const ok = doneWaiter.kind === 'connect' ? connectDone() : subsConfirmed + subsFailed >= subsSentCount;
  if (ok) finishWaiter(false);
}

function finishWaiter(timedOut: boolean): void {
  if (doneWaiter === null) return;
  const w = doneWaiter;
  doneWaiter = null;
  clearTimeout(w.timer);
  send({ id: w.id, type: 'done', timedOut, stats: stats() });
}

function stats(): GenReply['stats'] {
  return {
    established, failed, closedAfterOpen, subsConfirmed, subsFailed, subsSent: subsSentCount,
    msgs, bytes, pusherPings, wsPings, errors: { ...errors },
    tFirstSubSent, tLastSubConfirmed, tLastEstablished, cpuUs: cpuUs(), t: nowUs(),
  };
}

process.on('message', (cmd: GenCommand) => {
  switch (cmd.type) {
    case 'init':
      init = cmd.init;
      upgradeBytes = Buffer.from(upgradeRequest(), 'latin1');
      measureLatency = init.latency;
      send({ id: cmd.id, type: 'ok', stats: stats() });
      return;
    case 'connect': {
      target = init.count;
      doneWaiter = { kind: 'connect', id: cmd.id, timer: setTimeout(() => finishWaiter(true), cmd.timeoutMs) };
      launch();
      maybeDone();
      return;
    }
    case 'subscribe': {
      doneWaiter = { kind: 'subscribe', id: cmd.id, timer: setTimeout(() => finishWaiter(true), cmd.timeoutMs) };
      for (const c of conns) sendSubscribes(c);
      maybeDone();
      return;
    }
    case 'snapshot': {
      const st = stats();
      const lat = cmd.latency ? hist.toSparse() : undefined;
      if (cmd.resetLatency) hist.reset();
      send({ id: cmd.id, type: 'ok', stats: st, latency: lat });
      return;
    }
    case 'close': {
      closing = true;
      for (const c of conns) {
        c.state = 2;
        c.sock.destroy();
      }
      send({ id: cmd.id, type: 'ok', stats: stats() });
      setTimeout(() => process.exit(0), 50);
      return;
    }
  }
});

// The parent went away (Ctrl-C, crash): drop every socket and leave.
process.on('disconnect', () => process.exit(0));
