// Client process of the reconnect-storm bench: many Pusher clients on raw TCP sockets that
// reconnect by themselves, as pusher-js does, and resubscribe.
//
// Started by reconnect.ts (fork, IPC commands of protocol.ts). The WebSocket side is the
// minimal RFC 6455 client of bench/harness/loadgen.ts (fixed upgrade request, zero masking
// key), but every text frame is parsed with JSON.parse: a storm is a few frames per client,
// and each client keeps per-subscription state:
// - a closed connection reconnects after U(0, jitterMs) ms; a failed attempt (refused,
//   an HTTP answer other than 101, closed before connection_established) after U(0, retryMs);
// - on connection_established it sends all its subscribes at once; a recover subscription
//   sends `recover: {epoch, serial}` of the last message it saw (`recover: {}` the first time)
//   and counts as answered on its pusher_internal:recovery;
// - per client it records when it was established and when its last answer came, in the
//   monotonic µs clock every process of the machine shares, so the orchestrator can take
//   them against the moment it stopped the server.

import net from 'node:net';
import { cpuUs, nowUs, readHandshake } from '../harness/protocol';
import type { StormCommand, StormInit, StormReply, StormStats, Sub } from './protocol';
import { channelsOf } from './protocol';

const OP_TEXT = 0x1;
const OP_CLOSE = 0x8;
const OP_PING = 0x9;

interface Client {
  i: number; // index in this process
  g: number; // global index
  subs: Sub[];
  sock: net.Socket | null;
  state: 0 | 1 | 2; // 0 handshake, 1 open (101 seen), 2 closed
  hs: Buffer | null;
  pend: Buffer | null;
  est: boolean;
  /** Answers still expected on this connection. */
  pending: number;
  back: boolean;
  /** Last position seen on the recover subscription. */
  epoch: string | null;
  serial: number;
  /** First serial expected after a recovery that said recovered: true (gap check). */
  expectSerial: number;
  timer: NodeJS.Timeout | null;
}

let init: StormInit;
const clients: Client[] = [];
let tEst = new Float64Array(0);
let tBack = new Float64Array(0);
let closing = false;
let storming = false;
let upgradeBytes: Buffer;

let st: StormStats = freshStats(0);
function freshStats(n: number): StormStats {
  return { clients: n, back: 0, established: 0, attempts: 0, failures: {}, closes: {}, errors: {}, subsConfirmed: 0, recovery: {}, msgs: 0, rewindMsgs: 0, serialGaps: 0, cpuUs: 0 };
}
const bump = (r: Record<string, number>, k: string): void => {
  r[k] = (r[k] ?? 0) + 1;
};

function send(msg: StormReply): void {
  if (process.send) process.send(msg);
}

function maskedText(s: string): Buffer {
  const payload = Buffer.from(s);
  const n = payload.length;
  const hl = n < 126 ? 2 : 4;
  const f = Buffer.allocUnsafe(hl + 4 + n);
  f[0] = 0x80 | OP_TEXT;
  if (n < 126) f[1] = 0x80 | n;
  else {
    f[1] = 0x80 | 126;
    f.writeUInt16BE(n, 2);
  }
  f.writeUInt32BE(0, hl);
  payload.copy(f, hl + 4);
  return f;
}

const PONG = maskedText('{"event":"pusher:pong","data":{}}');

// ---- connecting ------------------------------------------------------------------------

let launched = 0;
let inFlight = 0;

/** First connect: at most init.concurrency handshakes in flight. */
function launch(): void {
  while (inFlight < init.concurrency && launched < clients.length) {
    inFlight++;
    open(clients[launched++]);
  }
}

function open(c: Client): void {
  c.timer = null;
  st.attempts++;
  const localAddress = init.srcAddrs.length > 0 ? init.srcAddrs[c.g % init.srcAddrs.length] : undefined;
  const sock = net.connect({ host: init.host, port: init.port, localAddress, noDelay: true });
  c.sock = sock;
  c.state = 0;
  c.hs = null;
  c.pend = null;
  c.est = false;
  c.pending = 0;
  sock.on('connect', () => sock.write(upgradeBytes));
  sock.on('data', (chunk: Buffer) => {
    if (c.sock !== sock) return;
    if (c.state === 1) onData(c, chunk);
    else if (c.state === 0) onHandshake(c, chunk);
  });
  sock.on('error', (err: NodeJS.ErrnoException) => {
    if (c.sock === sock && !c.est && !closing) bump(st.failures, err.code ?? 'error');
  });
  sock.on('close', () => {
    if (c.sock !== sock) return;
    onClosed(c);
  });
}

function onClosed(c: Client): void {
  c.sock = null;
  c.state = 2;
  if (closing) return;
  const wasEst = c.est;
  c.est = false;
  if (!wasEst) {
    if (!storming) handshakeDone();
  } else if (!storming) {
    bump(st.errors, 'closed_before_storm');
  }
  const delay = Math.random() * (wasEst ? init.jitterMs : init.retryMs);
  c.timer = setTimeout(() => open(c), delay);
}

/** A first-connect handshake finished (either way): the next one may start. */
function handshakeDone(): void {
  if (inFlight > 0) inFlight--;
  launch();
}

function drop(c: Client, cause: string): void {
  if (!c.est) bump(st.failures, cause);
  c.sock?.destroy();
}

function onHandshake(c: Client, chunk: Buffer): void {
  const h = readHandshake(c, chunk);
  if (h === null) return;
  if (h.status !== '101') return drop(c, 'http_' + h.status);
  c.state = 1;
  if (h.rest !== null) onData(c, h.rest);
}

// ---- frames ----------------------------------------------------------------------------

function frameLength(buf: Buffer, off: number): number {
  const avail = buf.length - off;
  if (avail < 2) return -1;
  const pl = buf[off + 1] & 0x7f;
  if (pl < 126) return 2 + pl;
  if (pl === 126) return avail < 4 ? -1 : 4 + buf.readUInt16BE(off + 2);
  return avail < 10 ? -1 : 10 + buf.readUInt32BE(off + 6);
}

function onData(c: Client, chunk: Buffer): void {
  let buf = c.pend === null ? chunk : Buffer.concat([c.pend, chunk]);
  c.pend = null;
  let off = 0;
  for (;;) {
    const n = frameLength(buf, off);
    if (n < 0 || off + n > buf.length) break;
    const b0 = buf[off];
    const pl = buf[off + 1] & 0x7f;
    const hl = pl < 126 ? 2 : pl === 126 ? 4 : 10;
    onFrame(c, b0 & 0x0f, buf.subarray(off + hl, off + n));
    if (c.state !== 1) return;
    off += n;
  }
  if (off < buf.length) {
    buf = Buffer.from(buf.subarray(off));
    c.pend = buf;
  }
}

function onFrame(c: Client, op: number, payload: Buffer): void {
  if (op === OP_TEXT) onText(c, payload.toString('utf8'));
  else if (op === OP_PING) c.sock?.write(Buffer.concat([Buffer.from([0x8a, 0x80 | payload.length, 0, 0, 0, 0]), payload]));
  else if (op === OP_CLOSE) {
    bump(st.closes, String(payload.length >= 2 ? payload.readUInt16BE(0) : 1005));
    c.state = 2;
    // echo the close frame (with its code) as browsers do: the server's TCP side ends on it
    const code = payload.subarray(0, Math.min(2, payload.length));
    c.sock?.end(Buffer.concat([Buffer.from([0x80 | OP_CLOSE, 0x80 | code.length, 0, 0, 0, 0]), code]));
  }
}

interface Frame {
  event?: string;
  channel?: string;
  data?: unknown;
  __serial?: number;
}

function dataOf(f: Frame): Record<string, unknown> {
  try {
    const d = typeof f.data === 'string' ? JSON.parse(f.data) as unknown : f.data;
    return d !== null && typeof d === 'object' ? d as Record<string, unknown> : {};
  } catch {
    return {};
  }
}

function onText(c: Client, text: string): void {
  let f: Frame;
  try {
    f = JSON.parse(text) as Frame;
  } catch {
    bump(st.errors, 'bad_json');
    return;
  }
  switch (f.event) {
    case 'pusher:connection_established':
      if (c.est) return;
      c.est = true;
      st.established++;
      tEst[c.i] = nowUs();
      if (!storming) handshakeDone();
      subscribe(c);
      return;
    case 'pusher_internal:subscription_succeeded':
      st.subsConfirmed++;
      answered(c);
      return;
    case 'pusher_internal:recovery': {
      const d = dataOf(f);
      bump(st.recovery, d.recovered === true ? 'recovered' : typeof d.reason === 'string' ? d.reason : 'no_reason');
      if (typeof d.epoch === 'string' && typeof d.serial === 'number') {
        if (d.recovered === true) c.expectSerial = d.serial - Number(d.missed ?? 0) + 1;
        else c.expectSerial = 0;
        c.epoch = d.epoch;
        c.serial = d.serial - (d.recovered === true ? Number(d.missed ?? 0) : 0);
      }
      answered(c);
      return;
    }
    case 'pusher:subscription_error':
      bump(st.errors, 'subscription_error');
      answered(c);
      return;
    case 'pusher:error': {
      const code = dataOf(f).code;
      bump(st.errors, 'pusher_error_' + (typeof code === 'number' || typeof code === 'string' ? String(code) : '?'));
      return;
    }
    case 'pusher:ping':
      c.sock?.write(PONG);
      return;
    default:
      if (typeof f.event !== 'string' || f.event.startsWith('pusher')) return;
      st.msgs++;
      if (f.channel?.startsWith('storm-rw-')) st.rewindMsgs++;
      if (typeof f.__serial === 'number') {
        if (c.expectSerial > 0 && f.__serial !== c.expectSerial) st.serialGaps++;
        c.expectSerial = 0;
        c.serial = f.__serial;
      }
  }
}

function subscribe(c: Client): void {
  const frames: Buffer[] = [];
  for (const s of c.subs) {
    const data: Record<string, unknown> = { channel: s.channel };
    if (s.kind === 'recover') {
      data.recover = c.epoch === null ? {} : { epoch: c.epoch, serial: c.serial };
      if (init.recoveryAnswers) c.pending++;
    }
    c.pending++;
    frames.push(maskedText(JSON.stringify({ event: 'pusher:subscribe', data })));
  }
  c.sock?.write(Buffer.concat(frames));
}

function answered(c: Client): void {
  if (--c.pending > 0 || c.back) return;
  c.back = true;
  tBack[c.i] = nowUs();
  st.back++;
  maybeDone();
}

// ---- commands --------------------------------------------------------------------------

let waiter: { id: number; timer: NodeJS.Timeout } | null = null;

function stats(): StormStats {
  return { ...st, failures: { ...st.failures }, closes: { ...st.closes }, errors: { ...st.errors }, recovery: { ...st.recovery }, cpuUs: cpuUs() };
}

function maybeDone(): void {
  if (waiter !== null && st.back >= clients.length) finish(false);
}

function finish(timedOut: boolean): void {
  if (waiter === null) return;
  const w = waiter;
  waiter = null;
  clearTimeout(w.timer);
  send({ id: w.id, type: 'done', timedOut, stats: stats(), tEst: tEst.slice(), tBack: tBack.slice() });
}

function wait(id: number, timeoutMs: number): void {
  waiter = { id, timer: setTimeout(() => finish(true), timeoutMs) };
  maybeDone();
}

process.on('message', (cmd: StormCommand) => {
  switch (cmd.type) {
    case 'init': {
      init = cmd.init;
      upgradeBytes = Buffer.from(`GET ${init.path} HTTP/1.1\r\nHost: ${init.host}:${init.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n', 'latin1');
      for (let i = 0; i < init.count; i++) {
        const g = init.firstIndex + i;
        clients.push({ i, g, subs: channelsOf(init.layout, g), sock: null, state: 2, hs: null, pend: null, est: false, pending: 0, back: false, epoch: null, serial: 0, expectSerial: 0, timer: null });
      }
      tEst = new Float64Array(init.count);
      tBack = new Float64Array(init.count);
      st = freshStats(init.count);
      send({ id: cmd.id, type: 'ok', stats: stats() });
      return;
    }
    case 'connect':
      wait(cmd.id, cmd.timeoutMs);
      launch();
      return;
    case 'arm':
      storming = true;
      st = freshStats(clients.length);
      tEst.fill(0);
      tBack.fill(0);
      for (const c of clients) c.back = false;
      send({ id: cmd.id, type: 'ok', stats: stats() });
      return;
    case 'wait':
      wait(cmd.id, cmd.timeoutMs);
      return;
    case 'snapshot':
      send({ id: cmd.id, type: 'ok', stats: stats() });
      return;
    case 'close':
      closing = true;
      for (const c of clients) {
        if (c.timer) clearTimeout(c.timer);
        c.sock?.destroy();
      }
      send({ id: cmd.id, type: 'ok', stats: stats() });
      setTimeout(() => process.exit(0), 50);
  }
});

process.on('disconnect', () => process.exit(0));
