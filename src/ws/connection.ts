// WebSocket connection lifecycle on /app/<key>: upgrade checks, connection_established,
// frame dispatch, activity pings (4201) and cleanup on close.

import uWS, { type HttpRequest, type HttpResponse, type us_socket_context_t, type WebSocketBehavior } from 'uWebSockets.js';
import { metersFor, receivedLabel, refuseReason } from '../metrics/meters';
import { CloseMessage, ErrorCode, WsClose } from '../protocol/codes';
import { Ev, isClientEvent, normalizeIncomingEvent } from '../protocol/events';
import { errorFrame, frame } from '../protocol/frames';
import { originAllowed } from '../protocol/origin';
import { nativeMaxBackpressure } from './backpressure';
import { createClientEvents } from './client-events';
import type { WsDeps } from './deps';
import { createSignin } from './signin';
import { createWsLimits } from './limits';
import { createSubscriptions } from './subscribe';
import type { Socket, SocketData } from './types';
import type { AppConfig } from '../config/types';
import type { AppRegistry } from '../apps/registry';
import { sendFrame } from './send';
import { clientAddressOf } from '../limits/client-address';

const decoder = new TextDecoder();

function parseData(data: unknown): unknown {
  if (typeof data !== 'string') return data;
  try {
    return JSON.parse(data);
  } catch {
    return data;
  }
}

/**
 * A connection's user data. At most USER_DATA_FIELDS fields: uWS hands back a user data
 * object of more than 15 properties in dictionary mode (bench/ws/user-data.bench.ts), which
 * costs every connection ~0.65 KiB more (19,000 idle connections: +12 MiB) and a hash
 * lookup for every field read on every frame.
 */
export function newSocketData(id: string, app: AppConfig | null, refuse: SocketData['refuse']): SocketData {
  return {
    id,
    app,
    refuse,
    counted: -1,
    closed: false,
    userId: null,
    watch: null,
    authBy: 0,
    channels: new Map(),
    lastSeen: Date.now(),
    evWindowStart: 0,
    evCount: 0,
    wsWindow: null,
    frameTat: 0,
    delta: null,
  };
}

/** The most fields uWS keeps a user data object fast with. */
export const USER_DATA_FIELDS = 15;

/** uWS's ping margin for an idle timeout (WebSocketContextData::calculateIdleTimeoutCompnents). */
function pingMargin(idleTimeout: number): number {
  let m = 4;
  while (idleTimeout - m * 2 >= m * 2 && m < 16) m <<= 1;
  return m;
}

/**
 * uWS's idleTimeout (seconds). websocket.auto_ping: uWS sends a WebSocket ping frame after
 * (idleTimeout − margin) s without a frame from the client and closes the connection when
 * nothing arrives within the margin (4, 8 or 16 s, derived from idleTimeout), so the
 * timeout is chosen for that first part to be websocket.ping_interval (uWS's timers tick
 * every 4 s: a ping comes after ping_interval − 4 to ping_interval s of silence). Without auto_ping it is only a backstop behind the
 * protocol's own ping/pong (activity_timeout + pong_timeout, 4201).
 */
export function idleTimeoutFor(ws: { auto_ping: boolean; ping_interval: number }, protocolMs: number): number {
  if (!ws.auto_ping) return Math.min(960, Math.max(8, Math.ceil(protocolMs / 1000) + 8));
  for (const margin of [4, 8, 16]) {
    const t = ws.ping_interval + margin;
    if (pingMargin(t) === margin) return t;
  }
  throw new RangeError(`no uWS idle timeout gives ping_interval ${ws.ping_interval}`);
}

/**
 * Why a connection to app key `key` from `origin` must be refused at open, or null. The
 * one check for a WebSocket upgrade and an HTTP fallback session (fallback/).
 */
export function refusalOf(apps: AppRegistry, key: string, origin: string | null): { app: AppConfig | null; refuse: SocketData['refuse'] } {
  const app = apps.lookupKey(key) ?? null;
  let refuse: SocketData['refuse'] = null;
  if (!app) refuse = { code: ErrorCode.AppNotFound, message: `App key ${key} does not exist` };
  else if (!app.enabled) refuse = { code: ErrorCode.AppDisabled, message: 'The app is disabled' };
  else if (!originAllowed(origin, app.allowed_origins)) refuse = { code: ErrorCode.Unauthorized, message: CloseMessage[ErrorCode.Unauthorized] ?? 'Origin not allowed' };
  return { app, refuse };
}

/**
 * The connection logic, for any Socket: uWS calls these for a WebSocket, fallback/ for an
 * HTTP session (open once established, message per client frame, close once when it ends).
 */
export interface ConnectionHandlers {
  open: (ws: Socket) => void;
  message: (ws: Socket, message: ArrayBuffer | Uint8Array, isBinary: boolean) => void;
  drain: (ws: Socket) => void;
  close: (ws: Socket) => void;
  sweep: (now: number) => void;
}

export function createWsBehavior(deps: WsDeps): WebSocketBehavior<SocketData> & ConnectionHandlers {
  const { config, apps, counters, sockets } = deps;
  const subs = createSubscriptions(deps);
  const clientEvent = createClientEvents(deps);
  const meters = metersFor(deps.metrics);
  const signin = createSignin(deps);
  const limits = createWsLimits(deps);
  const clientAddress = clientAddressOf(config);
  deps.hooks?.resume((ws, d, text) => onFrame(ws, d, text, Date.now()));
  const activityMs = config.websocket.activity_timeout * 1000;
  const pongMs = config.websocket.pong_timeout * 1000;
  const maxPayload = config.websocket.max_payload_kb * 1024;
  const established = (id: string) => frame(deps.out(Ev.ConnectionEstablished),
    JSON.stringify({ socket_id: id, activity_timeout: config.websocket.activity_timeout }));

  // rate_limiter.websocket: at most wsMax frames (of any kind) per window per connection.
  // Kept in the socket's user data: a connection lives on one shard, so this needs no
  // shared memory nor Redis whatever the driver (`none` / enabled: false turns it off).
  // Over the limit the frame is dropped and the connection stays open; the first drop of
  // a window gets pusher:error 4301, later ones in that window are dropped silently (one
  // error per window: a flooding client does not get one frame back per frame sent).
  const wsMax = deps.limiter.driver === 'none' ? null : config.rate_limiter.websocket.max_requests;
  const wsWindowMs = config.rate_limiter.websocket.window_seconds * 1000;

  /** Counts this frame; true when it is over the window's limit (and has been answered). */
  function overWsWindow(ws: Socket, d: SocketData, now: number): boolean {
    const w = (d.wsWindow ??= { start: now, count: 0 });
    if (now - w.start >= wsWindowMs) {
      w.start = now;
      w.count = 0;
    }
    if (++w.count <= wsMax!) return false;
    meters.app(d.app!.id).rateLimited('websocket').inc();
    if (w.count === wsMax! + 1) {
      const secs = Math.max(1, Math.ceil((w.start + wsWindowMs - now) / 1000));
      sendFrame(meters, ws, d.app!.id, Ev.Error, errorFrame(deps.out(Ev.Error), ErrorCode.RateLimited,
        `Rate limit exceeded: at most ${wsMax} messages per ${config.rate_limiter.websocket.window_seconds} s; messages are dropped for ${secs} s`));
    }
    return true;
  }

  function malformed(ws: Socket, message: string) {
    sendFrame(meters, ws, ws.getUserData().app!.id, Ev.Error, errorFrame(deps.out(Ev.Error), ErrorCode.Malformed, message));
  }

  /** A frame without a usable event name: counted as received{event="malformed"}. */
  function unreadable(ws: Socket, d: SocketData, message: string) {
    meters.app(d.app!.id).received('malformed').inc();
    malformed(ws, message);
  }

  function onFrame(ws: Socket, d: SocketData, text: string, now: number) {
    let msg: unknown;
    try {
      msg = JSON.parse(text);
    } catch {
      return unreadable(ws, d, 'Malformed frame: not valid JSON');
    }
    if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) return unreadable(ws, d, 'Malformed frame: expected a JSON object');
    const m = msg as { event?: unknown; data?: unknown; channel?: unknown };
    if (typeof m.event !== 'string' || m.event.length === 0) return unreadable(ws, d, 'Malformed frame: missing "event"');
    const event = normalizeIncomingEvent(m.event);
    if (meters.enabled) meters.app(d.app!.id).received(receivedLabel(event)).inc();
    switch (event) {
      case Ev.Ping:
        return void sendFrame(meters, ws, d.app!.id, Ev.Pong, frame(deps.out(Ev.Pong), {}));
      case Ev.Pong:
        return;
      case Ev.Subscribe: {
        const data = parseData(m.data);
        if (data === null || typeof data !== 'object') return malformed(ws, 'Malformed frame: subscribe needs data with a channel');
        return subs.subscribe(ws, d, data);
      }
      case Ev.Unsubscribe: {
        const data = parseData(m.data) as { channel?: unknown } | null;
        return subs.unsubscribe(ws, d, data?.channel);
      }
      case Ev.Signin:
        return signin(ws, d, parseData(m.data));
      case Ev.EnableDelta:
        // delta_compression.enabled false: no delta part on the shard, the answer says so
        if (deps.delta) return deps.delta.enable(ws, d);
        return void sendFrame(meters, ws, d.app!.id, Ev.DeltaEnabled, frame(deps.out(Ev.DeltaEnabled), { enabled: false }));
      case Ev.DeltaSyncError:
        return deps.delta?.syncError(ws, d, parseData(m.data));
      default:
        if (isClientEvent(event)) return clientEvent(ws, d, { event, channel: m.channel, data: m.data }, now);
        // Unknown pusher: events and other names are ignored, as Pusher does.
        return;
    }
  }

  function doUpgrade(res: HttpResponse, req: HttpRequest, context: us_socket_context_t) {
    const url = req.getUrl();
    const secKey = req.getHeader('sec-websocket-key');
    const proto = req.getHeader('sec-websocket-protocol');
    const ext = req.getHeader('sec-websocket-extensions');
    const originHeader = req.getHeader('origin');
    let key = url.slice('/app/'.length);
    if (key.endsWith('/')) key = key.slice(0, -1);
    try {
      key = decodeURIComponent(key);
    } catch { /* keep raw: it will not match an app */ }
    const { app, refuse } = refusalOf(apps, key, originHeader.length > 0 ? originHeader : null);
    const data = newSocketData(deps.nextSocketId(), app, refuse);
    const ip = clientAddress(decoder.decode(res.getRemoteAddressAsText()), { forwardedFor: req.getHeader('x-forwarded-for') || null, forwarded: req.getHeader('forwarded') || null });
    // limits.max_connections_per_ip: counted here (the address is known only now), refused at open like the other limits
    if (!refuse) data.refuse = limits.admitAddress(data.id, ip);
    if (!data.refuse && app!.hooks !== null && deps.hooks) {
      // what a hook sees of the connection (hooks/connection.ts); req is gone after the upgrade
      deps.hooks.upgrade(data.id, { ip, origin: originHeader.length > 0 ? originHeader : null, user_agent: req.getHeader('user-agent') || null });
    }
    res.upgrade(data, secKey, proto, ext, context);
  }

  return {
    // uWS cuts a frame over maxPayloadLength without a close frame (the client sees 1006).
    // Give it headroom so that message() can close over-limit frames with 1009 as the
    // protocol says; only frames over 4× the limit are still cut by uWS.
    maxPayloadLength: Math.min(maxPayload * 4, 2 ** 31 - 1),
    // Slow consumers (ws/backpressure.ts): uWS bounds each socket's queued output natively;
    // in close mode it also shuts a socket whose message it had to skip.
    maxBackpressure: nativeMaxBackpressure(config.websocket.max_bytes),
    closeOnBackpressureLimit: config.websocket.on_backpressure === 'close' ? 1 : 0,
    idleTimeout: idleTimeoutFor(config.websocket, activityMs + pongMs),
    sendPingsAutomatically: config.websocket.auto_ping,
    compression: uWS.DISABLED,

    upgrade(res, req, context) {
      try {
        doUpgrade(res, req, context);
      } catch (err) {
        // uWS aborts the process if an upgrade handler returns without answering.
        deps.log.error({ err }, 'WebSocket upgrade failed');
        res.writeStatus('500 Internal Server Error').end('upgrade failed', true);
      }
    },

    open(ws: Socket) {
      const d = ws.getUserData();
      const slot = d.refuse ? -1 : apps.index(d.app!);
      if (!d.refuse) d.refuse = limits.admit(); // limits.max_connections, then the app's quota
      if (!d.refuse && !counters.tryAcquire(slot, d.app!.max_connections)) {
        limits.release();
        d.refuse = { code: ErrorCode.OverQuota, message: `App is over its connection quota (${d.app!.max_connections})` };
      }
      if (d.refuse) {
        const appId = d.app?.id ?? '';
        meters.app(appId).connectionError(refuseReason(d.refuse.code)).inc();
        ws.cork(() => {
          sendFrame(meters, ws, appId, Ev.Error, errorFrame(deps.out(Ev.Error), d.refuse!.code, d.refuse!.message));
          // The close reason is the short ASCII text of the code: the detailed message can
          // hold the key as given, and uWS cuts reasons at 123 bytes, possibly inside a
          // UTF-8 character (the client then sees 1006, not the code).
          ws.end(d.refuse!.code, CloseMessage[d.refuse!.code] ?? 'Connection refused');
        });
        return;
      }
      d.counted = slot;
      // user_authentication_timeout: checked by sweep() (one pass a second, no timer per socket)
      if (d.app!.user_authentication_timeout !== null) d.authBy = Date.now() + d.app!.user_authentication_timeout * 1000;
      sockets.set(d.id, ws);
      const am = meters.app(d.app!.id);
      am.connectionsTotal.inc();
      am.connectionsActive.inc();
      const establish = () => void sendFrame(meters, ws, d.app!.id, Ev.ConnectionEstablished, established(d.id));
      // connect hook (hooks/connection.ts): connection_established once the backend allows it
      if (!deps.hooks?.connect(ws, d, establish)) establish();
      if (deps.tap?.on(d.app!.id)) deps.tap.emit({ app: d.app!.id, kind: 'connection', op: 'open', socket_id: d.id });
    },

    message(ws: Socket, message: ArrayBuffer | Uint8Array) {
      const d = ws.getUserData();
      if (d.refuse) return;
      meters.bytesReceived.inc(message.byteLength);
      // The app's max_message_size_kb applies within the server-wide max_payload_kb.
      if (message.byteLength > maxPayload || message.byteLength > d.app!.max_message_size_kb * 1024) {
        meters.app(d.app!.id).connectionError('message_too_big').inc();
        return ws.end(WsClose.MessageTooBig, 'Message too big');
      }
      const now = Date.now();
      d.lastSeen = now; // positive again: any frame answers a ping
      if (limits.overBudget(ws, d, now)) return;
      if (wsMax !== null && overWsWindow(ws, d, now)) return;
      const text = decoder.decode(message);
      if (deps.hooks?.holds(ws, d, text)) return; // waits behind this connection's pending hook call
      onFrame(ws, d, text, now);
    },

    drain(ws: Socket) {
      deps.backpressure.drained(ws);
    },

    close(ws: Socket) {
      const d = ws.getUserData();
      d.closed = true;
      counters.releaseAddress(d.id);
      deps.hooks?.closed(d);
      deps.backpressure.closed(d);
      if (d.counted < 0) return;
      const slot = d.counted;
      d.counted = -1;
      sockets.delete(d.id);
      counters.release(slot);
      limits.release();
      meters.app(d.app!.id).connectionsActive.dec();
      // Before the unsubscribes: a test that sees an owner count the unsubscribe knows the
      // owner of the user (the same shard, if it is the channel's owner) has the sign-out too.
      deps.watchlists?.closed(d, !deps.stopping());
      deps.delta?.dropAll(d, ws);
      subs.dropAll(ws, d);
      if (deps.tap?.on(d.app!.id)) deps.tap.emit({ app: d.app!.id, kind: 'connection', op: 'close', socket_id: d.id });
    },

    /**
     * Pings quiet sockets and closes those that did not answer (4201); watches slow consumers;
     * closes sockets past their user_authentication_timeout (4009).
     */
    sweep(now: number) {
      for (const ws of sockets.values()) {
        const d = ws.getUserData();
        if (d.authBy !== 0 && now >= d.authBy) {
          d.authBy = 0;
          meters.app(d.app!.id).connectionError('user_authentication_timeout').inc();
          const message = 'Connection not authorized within the user authentication timeout';
          ws.cork(() => {
            sendFrame(meters, ws, d.app!.id, Ev.Error, errorFrame(deps.out(Ev.Error), ErrorCode.Unauthorized, message));
            ws.end(ErrorCode.Unauthorized, message);
          });
          continue;
        }
        deps.backpressure.sweep(ws, d);
        if (d.lastSeen < 0) {
          if (now + d.lastSeen >= pongMs) {
            meters.app(d.app!.id).connectionError('pong_timeout').inc();
            ws.end(ErrorCode.PongTimeout, 'Pong reply not received');
          }
        } else if (now - d.lastSeen >= activityMs) {
          d.lastSeen = -now;
          sendFrame(meters, ws, d.app!.id, Ev.Ping, frame(deps.out(Ev.Ping), {}));
        }
      }
    },
  };
}
