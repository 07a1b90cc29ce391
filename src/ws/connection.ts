// WebSocket connection lifecycle on /app/<key>: upgrade checks, connection_established,
// frame dispatch, activity pings (4201) and cleanup on close.

import uWS, { type HttpRequest, type HttpResponse, type us_socket_context_t, type WebSocketBehavior } from 'uWebSockets.js';
import { CloseMessage, ErrorCode, WsClose } from '../protocol/codes';
import { Ev, isClientEvent, normalizeIncomingEvent } from '../protocol/events';
import { errorFrame, frame } from '../protocol/frames';
import { originAllowed } from '../protocol/origin';
import { createClientEvents } from './client-events';
import type { WsDeps } from './deps';
import { createSubscriptions } from './subscribe';
import type { Socket, SocketData } from './types';

const decoder = new TextDecoder();

function parseData(data: unknown): unknown {
  if (typeof data !== 'string') return data;
  try {
    return JSON.parse(data);
  } catch {
    return data;
  }
}

export function createWsBehavior(deps: WsDeps): WebSocketBehavior<SocketData> & { sweep(now: number): void } {
  const { config, apps, counters, sockets } = deps;
  const subs = createSubscriptions(deps);
  const clientEvent = createClientEvents(deps);
  const activityMs = config.websocket.activity_timeout * 1000;
  const pongMs = config.websocket.pong_timeout * 1000;
  const maxPayload = config.websocket.max_payload_kb * 1024;
  const established = (id: string) => frame(deps.out(Ev.ConnectionEstablished),
    JSON.stringify({ socket_id: id, activity_timeout: config.websocket.activity_timeout }));

  function malformed(ws: Socket, message: string) {
    ws.send(errorFrame(deps.out(Ev.Error), ErrorCode.Malformed, message), false);
  }

  function onFrame(ws: Socket, d: SocketData, text: string, now: number) {
    let msg: unknown;
    try {
      msg = JSON.parse(text);
    } catch {
      return malformed(ws, 'Malformed frame: not valid JSON');
    }
    if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) return malformed(ws, 'Malformed frame: expected a JSON object');
    const m = msg as { event?: unknown; data?: unknown; channel?: unknown };
    if (typeof m.event !== 'string' || m.event.length === 0) return malformed(ws, 'Malformed frame: missing "event"');
    const event = normalizeIncomingEvent(m.event);
    switch (event) {
      case Ev.Ping:
        return void ws.send(frame(deps.out(Ev.Pong), {}), false);
      case Ev.Pong:
        return;
      case Ev.Subscribe: {
        const data = parseData(m.data);
        if (data === null || typeof data !== 'object') return malformed(ws, 'Malformed frame: subscribe needs data with a channel');
        return subs.subscribe(ws, d, data as { channel?: unknown });
      }
      case Ev.Unsubscribe: {
        const data = parseData(m.data) as { channel?: unknown } | null;
        return subs.unsubscribe(ws, d, data?.channel);
      }
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
    const app = apps.byKey(key) ?? null;
    const origin = originHeader.length > 0 ? originHeader : null;
    let refuse: SocketData['refuse'] = null;
    if (!app) refuse = { code: ErrorCode.AppNotFound, message: `App key ${key} does not exist` };
    else if (!app.enabled) refuse = { code: ErrorCode.AppDisabled, message: 'The app is disabled' };
    else if (!originAllowed(origin, app.allowed_origins)) refuse = { code: ErrorCode.Unauthorized, message: CloseMessage[ErrorCode.Unauthorized] ?? 'Origin not allowed' };
    const data: SocketData = {
      id: deps.nextSocketId(),
      app,
      appIdx: app ? apps.index(app) : -1,
      origin,
      ip: decoder.decode(res.getRemoteAddressAsText()),
      refuse,
      counted: false,
      closed: false,
      channels: new Map(),
      lastSeen: Date.now(),
      pingSentAt: 0,
      evWindowStart: 0,
      evCount: 0,
    };
    res.upgrade(data, secKey, proto, ext, context);
  }

  return {
    // uWS cuts a frame over maxPayloadLength without a close frame (the client sees 1006).
    // Give it headroom so that message() can close over-limit frames with 1009 as the
    // protocol says; only frames over 4× the limit are still cut by uWS.
    maxPayloadLength: Math.min(maxPayload * 4, 2 ** 31 - 1),
    maxBackpressure: config.websocket.max_bytes,
    closeOnBackpressureLimit: 0,
    // uWS idle timeout is a backstop behind the protocol's own ping/pong (4201).
    idleTimeout: Math.min(960, Math.max(8, Math.ceil((activityMs + pongMs) / 1000) + 8)),
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

    open(ws) {
      const d = ws.getUserData();
      if (!d.refuse && !counters.tryAcquire(d.appIdx, d.app!.max_connections)) {
        d.refuse = { code: ErrorCode.OverQuota, message: `App is over its connection quota (${d.app!.max_connections})` };
      }
      if (d.refuse) {
        ws.cork(() => {
          ws.send(errorFrame(deps.out(Ev.Error), d.refuse!.code, d.refuse!.message), false);
          ws.end(d.refuse!.code, d.refuse!.message);
        });
        return;
      }
      d.counted = true;
      sockets.set(d.id, ws);
      ws.send(established(d.id), false);
    },

    message(ws, message) {
      const d = ws.getUserData();
      if (d.refuse) return;
      // The app's max_message_size_kb applies within the server-wide max_payload_kb.
      if (message.byteLength > maxPayload || message.byteLength > d.app!.max_message_size_kb * 1024) {
        return ws.end(WsClose.MessageTooBig, 'Message too big');
      }
      const now = Date.now();
      d.lastSeen = now;
      d.pingSentAt = 0;
      onFrame(ws, d, decoder.decode(message), now);
    },

    close(ws) {
      const d = ws.getUserData();
      d.closed = true;
      if (!d.counted) return;
      d.counted = false;
      sockets.delete(d.id);
      counters.release(d.appIdx);
      subs.dropAll(d);
    },

    /** Pings quiet sockets and closes those that did not answer (4201). */
    sweep(now: number) {
      for (const ws of sockets.values()) {
        const d = ws.getUserData();
        if (d.pingSentAt > 0) {
          if (now - d.pingSentAt >= pongMs) ws.end(ErrorCode.PongTimeout, 'Pong reply not received');
        } else if (now - d.lastSeen >= activityMs) {
          d.pingSentAt = now;
          ws.send(frame(deps.out(Ev.Ping), {}), false);
        }
      }
    },
  };
}
