// HTTP fallback on a shard: the endpoints under http_fallback.path, the sessions this
// shard is home to, and the relay of requests for sessions held by other shards.
//
// Routing (docs/fallback.md has the measurement): SO_REUSEPORT spreads a session's
// requests over the shards (pusher-js in Node opens a TCP connection per request), but a
// session's subscriptions and its place in the owners' records belong to one shard. So a
// session lives on its home shard, homeShard(session id) — every shard computes it, no
// lookup — and a request accepted elsewhere is relayed over the bus:
//   receive  the accepting shard keeps the uWS response (uWS responses cannot move between
//            threads) under a request id and sends fb_recv home; the home shard attaches a
//            RemoteReceiver that writes fb_out frames back; an abort there sends fb_gone.
//   send     the accepting shard reads and checks the body, then asks home (fb_send) and
//            answers with home's status.
//
// A session answers only the client that opened it (app key, client address, User-Agent);
// any other request naming it gets the answer of an id that does not exist, and those
// answers are throttled per address (fallback/throttle.ts) on the shard that accepted them.

import type { Logger } from 'pino';
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import type { AppRegistry } from '../apps/registry';
import type { FallbackMsg, RequestBody } from '../bus/messages';
import type { ConnectionCounters } from '../channels/counters';
import type { Config } from '../config/types';
import { openBody } from '../http/body';
import { jsonError, writeResponse } from '../http/request';
import { createBodyBudget } from '../limits/body-budget';
import { clientAddressOf } from '../limits/client-address';
import type { BoundCounter, MetricsSink } from '../metrics/types';
import { originAllowed } from '../protocol/origin';
import { newSocketData, refusalOf, type ConnectionHandlers } from '../ws/connection';
import { close, homeShard, parseSendBody, validSessionId, type Transport } from './frames';
import { corsFor, HttpReceiver } from './http';
import type { SessionTopics } from './hub';
import { Session, type Peer, type Receiver } from './session';
import { createUnknownThrottle } from './throttle';

export interface FallbackDeps {
  config: Config;
  apps: AppRegistry;
  shardId: number;
  shards: number;
  handlers: ConnectionHandlers;
  /** The shard's connection counters (limits.max_connections_per_ip). */
  counters: ConnectionCounters;
  /** Backend hooks: what a hook sees of a session's client (hooks/connection.ts). */
  hooks?: { upgrade(socketId: string, info: { ip: string; origin: string | null; user_agent: string | null }): void };
  topics: SessionTopics;
  bus: {
    /** Throws when the ring and its spill queue are full. */
    control(to: number, msg: FallbackMsg): void;
    request<T>(to: number, body: RequestBody): Promise<T>;
    reply(to: number, req: number, body: unknown): void;
  };
  nextSocketId(): string;
  metrics: MetricsSink;
  log: Logger;
  /** A paced drain is under way (shard/drain.ts): no new session. */
  draining?(): boolean;
}

export interface Fallback {
  /** The endpoints, on the shard's App (the main listener, TLS and the Unix socket alike). */
  register(uws: TemplatedApp): void;
  handle(msg: FallbackMsg, from: number): void;
  /** Heartbeats, grace periods, silent relays: once a second. */
  sweep(now: number): void;
  /** Shutdown: requests relayed through this shard are closed with 4200. */
  stop(): void;
  /** Sessions this shard is home to (tests). */
  readonly size: number;
}

type Outcome = { status: number; error: string } | null;
type SendReply = { status: number; error: string };

const decoder = new TextDecoder();

/** Largest xhr_send body: an escaped frame of websocket.max_payload_kb takes up to ~2× its size, plus the array. */
const bodyLimit = (config: Config) => config.websocket.max_payload_kb * 1024 * 2 + 64;

export function createFallback(deps: FallbackDeps): Fallback {
  const { config, apps, shardId, shards, handlers, log } = deps;
  const fb = config.http_fallback;
  const heartbeatMs = fb.heartbeat_interval * 1000;
  const graceMs = fb.disconnect_delay * 1000;
  const leftMs = fb.abort_delay_ms;
  const maxHere = Math.ceil(fb.max_sessions / shards);
  const limit = bodyLimit(config);
  // xhr_send bodies of this shard's requests in flight, bounded like the API's (limits.http_body_bytes_in_flight)
  const bodyBudget = createBodyBudget(config.limits.http_body_bytes_in_flight);
  const clientAddress = clientAddressOf(config);
  const perIp = config.limits.max_connections_per_ip;
  const unknownThrottle = createUnknownThrottle();

  /** Sessions of this shard, open or closed within the grace period (their `c` answers a late request). */
  const sessions = new Map<string, Session>();
  /** The counted app of each open session (fallback_sessions_active). */
  const active = new Map<Session, string>();
  /** Home side: receivers of requests held by other shards, by `from:rid`. */
  const remote = new Map<string, { r: Receiver; session: string }>();
  /** Relay side: requests this shard holds for other shards' sessions. */
  const relays = new Map<number, { r: HttpReceiver; home: number; session: string; ip: string }>();
  // random start: a restarted shard's ids do not meet the ones its predecessor handed out
  let ridSeq = Math.floor(Math.random() * 2 ** 30);

  const requests = new Map<string, BoundCounter>();
  const counted = (transport: string): BoundCounter => {
    let c = requests.get(transport);
    if (c === undefined) requests.set(transport, (c = deps.metrics.counter('fallback_requests_total', { transport })));
    return c;
  };
  const failed = (transport: string, status: number) => deps.metrics.inc('fallback_request_errors_total', { transport, status: String(status) });

  const env = {
    handlers,
    topics: deps.topics,
    maxQueueBytes: Math.min(2 * config.websocket.max_bytes, 2 ** 32 - 1),
    closeOnOverflow: config.websocket.on_backpressure === 'close',
    now: Date.now,
    onClosed(s: Session, keep: boolean) {
      if (!keep && sessions.get(s.sessionId) === s) sessions.delete(s.sessionId);
      const app = active.get(s);
      if (app === undefined) return;
      active.delete(s);
      deps.metrics.add('fallback_sessions_active', { app_id: app }, -1);
    },
  };

  /** The answer to a request naming a session that is not its client's, or that does not exist. */
  const unknown = (id: string): SendReply => ({ status: 404, error: `Unknown session ${id}` });

  /** Home side: the client aborted receiving request `r` of session `id`: unless a new one comes, the session ends after abort_delay_ms. */
  function aborted(id: string, r: Receiver): void {
    const s = sessions.get(id);
    if (s === undefined || !s.detach(r, true)) return;
    setTimeout(() => {
      if (sessions.get(id) === s && s.closing === null) s.tick(Date.now(), heartbeatMs, graceMs, leftMs);
    }, leftMs);
  }

  /** Home side: a receiving request for session `id` of app `key`. */
  function receive(key: string, id: string, origin: string | null, peer: Peer, r: Receiver): Outcome {
    const s = sessions.get(id);
    if (s !== undefined) {
      if (!s.owns(key, peer)) return unknown(id);
      s.attach(r);
      return null;
    }
    if (deps.draining?.() === true) return { status: 503, error: 'Server is draining: connect to another node' };
    if (active.size >= maxHere) return { status: 503, error: `Too many HTTP fallback sessions (http_fallback.max_sessions ${fb.max_sessions})` };
    const { app, refuse } = refusalOf(apps, key, origin);
    const data = newSocketData(deps.nextSocketId(), app, refuse);
    if (refuse === null && !deps.counters.tryAcquireAddress(data.id, peer.ip, perIp)) {
      deps.metrics.inc('connections_refused_per_ip_total', { transport: 'http' });
      return { status: 429, error: `Too many connections from this address: at most ${perIp} WebSockets and HTTP sessions together (limits.max_connections_per_ip)` };
    }
    if (refuse === null && app!.hooks !== null) deps.hooks?.upgrade(data.id, { ip: peer.ip, origin, user_agent: peer.ua === '' ? null : peer.ua });
    const session = new Session(id, key, peer, data, env);
    sessions.set(id, session);
    session.attach(r);
    handlers.open(session); // connection_established, or the refusal and c[code]
    if (session.closing === null && app !== null) {
      active.set(session, app.id);
      deps.metrics.inc('fallback_sessions_total', { app_id: app.id });
      deps.metrics.add('fallback_sessions_active', { app_id: app.id }, 1);
    }
    return null;
  }

  /** Home side: an xhr_send's frames. */
  function send(key: string, id: string, peer: Peer, frames: string[]): SendReply {
    const s = sessions.get(id);
    if (s === undefined || s.closing !== null || !s.owns(key, peer)) return unknown(id);
    s.receive(frames);
    return { status: 204, error: '' };
  }

  function tryControl(to: number, msg: FallbackMsg): boolean {
    try {
      deps.bus.control(to, msg);
      return true;
    } catch (err) {
      log.warn({ err, to, type: msg.type }, 'HTTP fallback: could not relay to another shard');
      return false;
    }
  }

  /** Home side: writes to a request another shard holds. */
  function remoteReceiver(from: number, rid: number, session: string, streaming: boolean): Receiver {
    const id = `${from}:${rid}`;
    const out = (text: string, end: boolean) => {
      if (end) remote.delete(id);
      if (tryControl(from, { type: 'fb_out', rid, session, status: 200, text, end })) return;
      // the frame could not go: the request is as good as gone (the client reopens or polls again)
      remote.delete(id);
      queueMicrotask(() => sessions.get(session)?.detach(r));
    };
    const r: Receiver = { streaming, write: (text) => out(text, false), end: (text) => out(text, true) };
    remote.set(id, { r, session });
    return r;
  }

  function params(res: HttpResponse, req: HttpRequest): { key: string; server: string; id: string; origin: string | null; peer: Peer } {
    let key = req.getParameter(0) ?? '';
    try {
      key = decodeURIComponent(key);
    } catch { /* kept raw: it matches no app */ }
    const ip = clientAddress(decoder.decode(res.getRemoteAddressAsText()), { forwardedFor: req.getHeader('x-forwarded-for') || null, forwarded: req.getHeader('forwarded') || null });
    return { key, server: req.getParameter(1) ?? '', id: req.getParameter(2) ?? '', origin: req.getHeader('origin') || null, peer: { ip, ua: req.getHeader('user-agent') } };
  }

  /** The 429 of an address past its unknown-session answers, or null. */
  function throttled(ip: string): SendReply | null {
    const wait = unknownThrottle.blocked(ip, Date.now());
    return wait === 0 ? null : { status: 429, error: `Too many requests for unknown HTTP sessions from this address: retry in ${wait} s` };
  }

  /** Counts an unknown-session answer against the address. */
  function noted(ip: string, status: number): void {
    if (status === 404) unknownThrottle.missed(ip, Date.now());
  }

  function refuse(res: HttpResponse, transport: Transport | 'options', status: number, error: string, cors: Record<string, string>, inCallback: boolean): void {
    failed(transport, status);
    writeResponse(res, jsonError(status, error), cors, false, inCallback);
  }

  function onReceive(res: HttpResponse, req: HttpRequest, streaming: boolean): void {
    const transport: Transport = streaming ? 'xhr_streaming' : 'xhr';
    counted(transport).inc();
    const { key, id, origin, peer } = params(res, req);
    const cors = corsFor(apps, key, origin);
    if (!validSessionId(id)) return refuse(res, transport, 400, 'Malformed session id: 1 to 64 of A-Z a-z 0-9 _ -', cors, true);
    const over = throttled(peer.ip);
    if (over !== null) return refuse(res, transport, over.status, over.error, cors, true);
    const home = homeShard(id, shards);
    if (home === shardId) {
      const r = new HttpReceiver(res, streaming, cors, () => aborted(id, r));
      const bad = receive(key, id, origin, peer, r);
      if (bad !== null) {
        noted(peer.ip, bad.status);
        failed(transport, bad.status);
        r.fail(bad.status, bad.error);
      }
      return;
    }
    const rid = ++ridSeq;
    const r = new HttpReceiver(res, streaming, cors, () => {
      relays.delete(rid);
      tryControl(home, { type: 'fb_gone', session: id, rid, from: shardId });
    });
    relays.set(rid, { r, home, session: id, ip: peer.ip });
    if (!tryControl(home, { type: 'fb_recv', from: shardId, rid, key, session: id, streaming, origin: origin ?? '', ip: peer.ip, ua: peer.ua })) {
      relays.delete(rid);
      failed(transport, 503);
      r.fail(503, 'Server busy: try again');
    }
  }

  function onSend(res: HttpResponse, req: HttpRequest): void {
    counted('xhr_send').inc();
    const { key, id, origin, peer } = params(res, req);
    const cors = corsFor(apps, key, origin);
    const state = { aborted: false };
    const answer = (reply: SendReply, inCallback: boolean) => {
      noted(peer.ip, reply.status);
      if (state.aborted) return;
      if (reply.status !== 204) return refuse(res, 'xhr_send', reply.status, reply.error, cors, inCallback);
      writeResponse(res, { status: 204, body: null }, cors, false, inCallback);
    };
    if (!validSessionId(id)) return answer({ status: 400, error: 'Malformed session id: 1 to 64 of A-Z a-z 0-9 _ -' }, true);
    const over = throttled(peer.ip);
    if (over !== null) return answer(over, true);
    const lengthHeader = req.getHeader('content-length');
    const reader = openBody(res, { limit, answerEarly: true, contentLength: lengthHeader === '' ? null : Number(lengthHeader), budget: bodyBudget });
    res.onAborted(() => {
      state.aborted = true;
      reader.abort();
    });
    reader.keep((body) => {
      if (body === 'too_large') return answer({ status: 413, error: `xhr_send body over ${limit} bytes` }, true);
      if (body === 'busy') return answer({ status: 503, error: 'Server busy: request bodies in flight over limits.http_body_bytes_in_flight, try again' }, true);
      const parsed = parseSendBody(body.toString());
      if ('status' in parsed) return answer(parsed, true);
      const home = homeShard(id, shards);
      if (home === shardId) return answer(send(key, id, peer, parsed.frames), true);
      deps.bus.request<SendReply>(home, { type: 'fb_send', key, session: id, frames: parsed.frames, ip: peer.ip, ua: peer.ua }).then(
        (reply) => answer(reply, false),
        (err: unknown) => {
          log.warn({ err, home }, 'HTTP fallback: xhr_send not relayed');
          answer({ status: 503, error: 'Server busy: try again' }, false);
        },
      );
    });
  }

  function onOptions(res: HttpResponse, req: HttpRequest): void {
    counted('options').inc();
    let key = req.getParameter(0) ?? '';
    try {
      key = decodeURIComponent(key);
    } catch { /* kept raw: it matches no app */ }
    const origin = req.getHeader('origin') || null;
    const app = apps.byKey(key);
    const allowHeaders = req.getHeader('access-control-request-headers') || 'Content-Type';
    if (origin !== null && app !== undefined && !originAllowed(origin, app.allowed_origins)) {
      return refuse(res, 'options', 403, `Origin ${origin} is not allowed for app key ${key}`, { Vary: 'Origin' }, true);
    }
    writeResponse(res, { status: 204, body: null }, {
      'Access-Control-Allow-Origin': origin ?? '*',
      'Access-Control-Allow-Methods': 'OPTIONS, POST',
      'Access-Control-Allow-Headers': allowHeaders,
      'Access-Control-Max-Age': '86400',
      Vary: 'Origin',
    }, false, true);
  }

  return {
    register(uws) {
      const base = `${fb.path}/app/:key/:server/:session`;
      uws.post(`${base}/xhr_streaming`, (res, req) => onReceive(res, req, true));
      uws.post(`${base}/xhr`, (res, req) => onReceive(res, req, false));
      uws.post(`${base}/xhr_send`, onSend);
      uws.options(`${base}/:transport`, onOptions);
    },

    handle(msg, from) {
      switch (msg.type) {
        case 'fb_recv': {
          const r = remoteReceiver(msg.from, msg.rid, msg.session, msg.streaming);
          const bad = receive(msg.key, msg.session, msg.origin === '' ? null : msg.origin, { ip: msg.ip, ua: msg.ua }, r);
          if (bad === null) return;
          remote.delete(`${msg.from}:${msg.rid}`);
          tryControl(msg.from, { type: 'fb_out', rid: msg.rid, session: msg.session, status: bad.status, text: bad.error, end: true });
          return;
        }
        case 'fb_out': {
          const relay = relays.get(msg.rid);
          if (relay === undefined || relay.session !== msg.session || relay.home !== from) return; // aborted meanwhile
          if (msg.end) relays.delete(msg.rid);
          if (msg.status !== 200) {
            noted(relay.ip, msg.status);
            failed(relay.r.streaming ? 'xhr_streaming' : 'xhr', msg.status);
            return relay.r.fail(msg.status, msg.text);
          }
          if (msg.end) return relay.r.end(msg.text);
          relay.r.write(msg.text);
          if (relay.r.backlog > env.maxQueueBytes) {
            // its client reads slower than home sends (home cannot see this response's backpressure):
            // the request is let go and home's queue, bounded like a WebSocket's, takes over
            relays.delete(msg.rid);
            relay.r.end('');
            tryControl(relay.home, { type: 'fb_gone', session: relay.session, rid: msg.rid, from: shardId });
          }
          return;
        }
        case 'fb_gone': {
          const id = `${msg.from}:${msg.rid}`;
          const entry = remote.get(id);
          if (entry === undefined) return;
          remote.delete(id);
          aborted(entry.session, entry.r);
          return;
        }
        case 'fb_send':
          try {
            deps.bus.reply(msg.from, msg.req, send(msg.key, msg.session, { ip: msg.ip, ua: msg.ua }, msg.frames));
          } catch (err) {
            log.warn({ err, to: msg.from }, 'HTTP fallback: xhr_send answer not relayed (the sender answers 503 at its timeout)');
          }
          return;
      }
    },

    sweep(now) {
      for (const [id, s] of sessions) {
        if (s.closing !== null) {
          if (now - s.detachedAt >= graceMs) sessions.delete(id);
        } else {
          s.tick(now, heartbeatMs, graceMs, leftMs);
        }
      }
      // a home shard that went silent (it died: its streams write `h` and its polls end
      // within the heartbeat interval): the client is let go, and reconnects
      for (const [rid, relay] of relays) {
        if (now - relay.r.lastOut < 2 * heartbeatMs + 5000) continue;
        relays.delete(rid);
        relay.r.end('');
      }
    },

    stop() {
      for (const relay of relays.values()) relay.r.end(close(4200, 'Server shutting down'));
      relays.clear();
    },

    get size() {
      return sessions.size;
    },
  };
}
