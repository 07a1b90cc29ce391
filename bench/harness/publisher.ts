// Publisher child process: signed `POST /apps/{id}/events` requests over keep-alive
// HTTP/1.1 connections, at a fixed rate or as fast as the API answers.
//
// A small raw HTTP/1.1 client is used (responses are delimited by Content-Length, which
// every uWS-based target sends) because node:http tops out near the rate a uWS server
// answers on one core, and the publisher must not be what limits the API numbers.
// Requests carry the auth query of the `pusher` SDK (auth_key, auth_timestamp,
// auth_version, body_md5, auth_signature; see src/protocol/api-auth.ts). A request whose
// body does not change (no timestamp in it) is signed once and re-signed every 60 s; a
// timestamped one is signed per request. Commands arrive over IPC (PubCommand).

import net from 'node:net';
import { signApiQuery } from '../../src/protocol/api-auth';
import { Histogram } from './histogram';
import type { PubCommand, PubInit, PubReply, PubRun, PubStats } from './protocol';
import { cpuUs, nowUs } from './protocol';

let init: PubInit;
let run: PubRun | null = null;
let path = '';
let hostHeader = '';

let sent = 0;
let ok = 0;
let lagging = 0;
let inFlight = 0;
const status: Record<string, number> = {};
const errors: Record<string, number> = {};
const rtt = new Histogram();

let stopping = false;
let stopWaiter: number | null = null;
let safetyTimer: NodeJS.Timeout | null = null;
let rateTimer: NodeJS.Timeout | null = null;
let cutTimer: NodeJS.Timeout | null = null;

function send(msg: PubReply): void {
  if (process.send) process.send(msg);
}

function count(map: Record<string, number>, k: string): void {
  map[k] = (map[k] ?? 0) + 1;
}

function stats(): PubStats {
  return { sent, ok, status: { ...status }, errors: { ...errors }, inFlight, lagging, cpuUs: cpuUs(), t: nowUs() };
}

// ---- request building ------------------------------------------------------------

const cache = new Map<string, { ts: number; req: Buffer }>();
let pad = '';
let seq = 0;

function buildRequest(body: string, ts: number, p = path): Buffer {
  const q = signApiQuery(init.key, init.secret, 'POST', p, {}, body, ts);
  const bodyBuf = Buffer.from(body, 'utf8');
  const head = `POST ${p}?${q} HTTP/1.1\r\nHost: ${hostHeader}\r\nContent-Type: application/json\r\nContent-Length: ${bodyBuf.length}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), bodyBuf]);
}

/** The next request; sentUs is put in the payload when run.timestamp. */
function nextRequest(sentUs: number): Buffer {
  const r = run!;
  const channel = r.channelPrefix + String(seq++ % r.channelCount);
  const nowS = Math.floor(Date.now() / 1000);
  if (r.timestamp) {
    const data = '@' + String(sentUs) + ' ' + pad;
    return buildRequest(JSON.stringify({ name: r.event, channels: [channel], data }), nowS);
  }
  let e = cache.get(channel);
  if (e === undefined || nowS - e.ts > 60) {
    const data = '@0 ' + pad;
    const b = r.batch;
    e = {
      ts: nowS,
      req: b
        ? buildRequest(JSON.stringify({
          batch: Array.from({ length: b.size }, (_, j) => ({ name: r.event, channel, data, ...(b.tagKey ? { tags: { [b.tagKey]: String(j) } } : {}) })),
        }), nowS, path.replace(/\/events$/, '/batch_events'))
        : buildRequest(JSON.stringify({ name: r.event, channels: [channel], data }), nowS),
    };
    cache.set(channel, e);
  }
  return e.req;
}

// ---- connections -------------------------------------------------------------------

interface HttpConn {
  sock: net.Socket;
  open: boolean;
  opened: boolean;
  /** The server said `Connection: close`: a new connection has taken this one's place. */
  replaced: boolean;
  sentAt: number[]; // µs of the requests in flight, FIFO
  buf: Buffer | null;
}

const conns: HttpConn[] = [];
const idle: HttpConn[] = [];
let backlog: number[] = []; // scheduled µs of rate-mode publishes waiting for a connection

function connect(): HttpConn {
  const sock = net.connect({ host: init.host, port: init.port, localAddress: init.srcAddr, noDelay: true });
  const c: HttpConn = { sock, open: false, opened: false, replaced: false, sentAt: [], buf: null };
  sock.on('connect', () => {
    c.open = true;
    c.opened = true;
    pump(c);
  });
  sock.on('data', (chunk: Buffer) => onData(c, chunk));
  sock.on('error', (err: NodeJS.ErrnoException) => count(errors, err.code ?? 'error'));
  sock.on('close', () => {
    c.open = false;
    for (let i = 0; i < c.sentAt.length; i++) count(errors, 'closed_in_flight');
    inFlight -= c.sentAt.length;
    c.sentAt = [];
    const i = conns.indexOf(c);
    if (i >= 0) conns.splice(i, 1);
    const j = idle.indexOf(c);
    if (j >= 0) idle.splice(j, 1);
    // soketi ends every API response with `Connection: close`: reconnect at once (after a
    // pause only if the connection never opened, so a dead server is not spun on).
    if (run !== null && !stopping && !c.replaced) {
      if (c.opened) conns.push(connect());
      else setTimeout(() => { if (run !== null && !stopping) conns.push(connect()); }, 100);
    }
    checkStopped();
  });
  return c;
}

function retire(c: HttpConn): void {
  c.open = false;
  c.replaced = true;
  for (let i = 0; i < c.sentAt.length; i++) count(errors, 'closed_in_flight');
  inFlight -= c.sentAt.length;
  c.sentAt = [];
  c.sock.end();
  const i = conns.indexOf(c);
  if (i >= 0) conns.splice(i, 1);
  const j = idle.indexOf(c);
  if (j >= 0) idle.splice(j, 1);
  if (run !== null && !stopping) conns.push(connect());
  else checkStopped();
}

const CRLFCRLF = Buffer.from('\r\n\r\n');

function onData(c: HttpConn, chunk: Buffer): void {
  const buf = c.buf === null ? chunk : Buffer.concat([c.buf, chunk]);
  let off = 0;
  const now = nowUs();
  for (;;) {
    const he = buf.indexOf(CRLFCRLF, off);
    if (he < 0) break;
    const head = buf.toString('latin1', off, he);
    const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
    if (m === null) {
      count(errors, /transfer-encoding/i.test(head) ? 'unsupported_chunked_response' : 'no_content_length');
      c.sock.destroy();
      return;
    }
    const end = he + 4 + Number(m[1]);
    if (end > buf.length) break;
    const code = head.slice(9, 12);
    if (code[0] === '2') ok++;
    else count(status, code);
    const t0 = c.sentAt.shift();
    inFlight--;
    if (t0 !== undefined) rtt.record(now - t0);
    off = end;
    if (/\r\nconnection:\s*close/i.test(head)) {
      // soketi closes the connection after every API answer (as the SDKs see it too):
      // send nothing more on it and open the next one now.
      retire(c);
      return;
    }
  }
  c.buf = off < buf.length ? Buffer.from(buf.subarray(off)) : null;
  if (stopping) {
    checkStopped();
    return;
  }
  pump(c);
}

/** Sends on c while it has room: the rate backlog first, then (max mode) new requests. */
function pump(c: HttpConn): void {
  if (!c.open || run === null || stopping) return;
  const room = init.pipeline - c.sentAt.length;
  if (room <= 0) return;
  const parts: Buffer[] = [];
  const now = nowUs();
  for (let k = 0; k < room; k++) {
    if (run.rate > 0) {
      if (backlog.length === 0) break;
      backlog.shift();
    }
    // The payload carries the time the request is written, not the time it was due: a
    // timer firing late in this process is not the server's latency (a backlog of due
    // publishes is reported as publisher_max_backlog instead).
    parts.push(nextRequest(now));
    c.sentAt.push(now);
    sent++;
    inFlight++;
  }
  if (parts.length === 0) {
    if (!idle.includes(c)) idle.push(c);
    return;
  }
  c.sock.write(parts.length === 1 ? parts[0] : Buffer.concat(parts));
}

// ---- fixed rate ----------------------------------------------------------------------

let rateStart = 0;
let scheduledCount = 0;

function rateTick(): void {
  if (run === null || stopping) return;
  const now = nowUs();
  const due = Math.floor(((now - rateStart) * run.rate) / 1e6);
  const period = 1e6 / run.rate;
  while (scheduledCount < due) {
    backlog.push(Math.round(rateStart + scheduledCount * period));
    scheduledCount++;
  }
  if (backlog.length > 0) {
    const free = idle.splice(0);
    for (const c of free) pump(c);
  }
  // Publishes still waiting here have no free connection: the API is behind the rate.
  if (backlog.length > lagging) lagging = backlog.length;
}

// ---- commands ----------------------------------------------------------------------------

function startRun(r: PubRun): void {
  run = r;
  stopping = false;
  pad = 'x'.repeat(Math.max(0, r.payloadBytes - 18));
  for (let i = 0; i < init.conns; i++) conns.push(connect());
  if (r.rate > 0) {
    rateStart = nowUs();
    scheduledCount = 0;
    rateTimer = setInterval(rateTick, 1);
  }
  safetyTimer = setTimeout(() => stopRun(-1), r.maxDurationMs);
}

function stopRun(id: number): void {
  if (stopWaiter === null && id >= 0) stopWaiter = id;
  if (stopping) {
    checkStopped();
    return;
  }
  stopping = true;
  if (rateTimer) clearInterval(rateTimer);
  if (safetyTimer) clearTimeout(safetyTimer);
  backlog = [];
  // Give in-flight requests up to 2 s to be answered, then cut the connections. (Cleared
  // when the stop completes: left armed, it would cut the next run's connections.)
  cutTimer = setTimeout(() => {
    for (const c of conns.slice()) c.sock.destroy();
    inFlight = 0;
    checkStopped(true);
  }, 2000).unref();
  checkStopped();
}

function checkStopped(force = false): void {
  if (!stopping || stopWaiter === null) return;
  if (inFlight > 0 && !force) return;
  if (cutTimer) clearTimeout(cutTimer);
  cutTimer = null;
  for (const c of conns.slice()) c.sock.destroy();
  const id = stopWaiter;
  stopWaiter = null;
  run = null;
  send({ id, type: 'done', stats: stats(), latency: rtt.toSparse() });
}

process.on('message', (cmd: PubCommand) => {
  switch (cmd.type) {
    case 'init':
      init = cmd.init;
      path = `/apps/${encodeURIComponent(init.appId)}/events`;
      hostHeader = `${init.host}:${init.port}`;
      send({ id: cmd.id, type: 'ok', stats: stats() });
      return;
    case 'start':
      startRun(cmd.run);
      send({ id: cmd.id, type: 'ok', stats: stats() });
      return;
    case 'snapshot': {
      const st = stats();
      const lat = rtt.toSparse();
      if (cmd.resetLatency) rtt.reset();
      send({ id: cmd.id, type: 'ok', stats: st, latency: lat });
      return;
    }
    case 'stop':
      stopRun(cmd.id);
      return;
  }
});

process.on('disconnect', () => process.exit(0));
