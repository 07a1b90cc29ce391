// client-* events: a subscriber of a private or presence channel talks to the other
// subscribers. Refusals are pusher:error 4301 with the channel; the socket stays open.

import { BusFullError } from '../bus/errors';
import { HistoryUnavailableError } from '../history/types';
import { metersFor } from '../metrics/meters';
import { ErrorCode } from '../protocol/codes';
import { Ev } from '../protocol/events';
import { errorFrame } from '../protocol/frames';
import type { WsDeps } from './deps';
import type { Socket, SocketData, Subscription } from './types';
import { sendFrame } from './send';
import { logLimited } from '../log';
import { nestedDeeperThan } from '../limits/json-depth';

export interface ClientFrame {
  event: string;
  channel?: unknown;
  data?: unknown;
}

export function createClientEvents(deps: WsDeps) {
  const meters = metersFor(deps.metrics);

  function refuse(ws: Socket, message: string, channel?: string) {
    sendFrame(meters, ws, ws.getUserData().app!.id, Ev.Error, errorFrame(deps.out(Ev.Error), ErrorCode.ClientEventRefused, message, channel));
  }

  /** Returns a refusal message, or null when this socket may send one more event now. */
  function overRate(d: SocketData, limit: number, now: number): boolean {
    if (now - d.evWindowStart >= 1000) {
      d.evWindowStart = now;
      d.evCount = 0;
    }
    d.evCount++;
    return d.evCount > limit;
  }

  const handleClientEvent = function handleClientEvent(ws: Socket, d: SocketData, msg: ClientFrame, now: number): void {
    const app = d.app!;
    const channel = typeof msg.channel === 'string' ? msg.channel : undefined;
    if (!app.enable_client_messages) return refuse(ws, 'Client events are not enabled for this app', channel);
    if (channel === undefined) return refuse(ws, 'Client event needs a channel');
    const sub = d.channels.get(channel);
    if (!sub || !sub.joined) return refuse(ws, `Not subscribed to ${channel}`, channel);
    if (sub.type === 'public') return refuse(ws, 'Client events are only allowed on private and presence channels', channel);
    if (msg.event.length > app.max_event_name_length) {
      return refuse(ws, `Event name is longer than ${app.max_event_name_length} characters`, channel);
    }
    if (overRate(d, app.max_client_events_per_second, now)) {
      meters.app(app.id).rateLimited('client_events').inc();
      return refuse(ws, `Client event rate limit of ${app.max_client_events_per_second}/s reached`, channel);
    }
    if (nestedDeeperThan(msg.data, deps.config.limits.max_client_event_depth)) {
      meters.app(app.id).rateLimited('client_event_depth').inc();
      return refuse(ws, `Client event data is nested more than ${deps.config.limits.max_client_event_depth} levels deep`, channel);
    }
    let dataJson: string;
    try {
      dataJson = JSON.stringify(msg.data === undefined ? null : msg.data);
    } catch {
      // Data from JSON.parse only fails to serialise when nested too deeply (RangeError:
      // stack overflow), which would otherwise kill the shard (test/fuzz/ws.fuzz.test.ts).
      return refuse(ws, 'Client event data is nested too deeply', channel);
    }
    if (Buffer.byteLength(dataJson) > app.max_event_payload_in_kb * 1024) {
      return refuse(ws, `Client event payload is larger than ${app.max_event_payload_in_kb} KB`, channel);
    }
    // client_event hook (hooks/connection.ts): the backend allows, denies or replaces the data first
    const hooked = deps.hooks?.clientEvent(ws, d, channel, msg.event, msg.data, sub.type === 'presence' ? sub.userId : null, (replaced) => {
      if (d.channels.get(channel) !== sub) return refuse(ws, `Not subscribed to ${channel}`, channel);
      if (replaced === undefined) return deliver(ws, d, channel, sub, msg.event, msg.data, dataJson);
      const json = JSON.stringify(replaced);
      if (Buffer.byteLength(json) > app.max_event_payload_in_kb * 1024) {
        return refuse(ws, `Client event payload is larger than ${app.max_event_payload_in_kb} KB (as replaced by the client_event hook)`, channel);
      }
      deliver(ws, d, channel, sub, msg.event, replaced, json);
    });
    if (!hooked) deliver(ws, d, channel, sub, msg.event, msg.data, dataJson);
  };

  function deliver(ws: Socket, d: SocketData, channel: string, sub: Subscription, event: string, data: unknown, dataJson: string): void {
    const app = d.app!;
    let out = '{"event":' + JSON.stringify(event) + ',"channel":' + JSON.stringify(channel) + ',"data":' + dataJson;
    if (sub.type === 'presence') out += ',"user_id":' + JSON.stringify(sub.userId);
    out += '}';
    const refused = deps.clusterRefuses?.();
    if (refused) {
      logLimited(deps.log, 'warn', { channel, why: refused }, 'client event refused: the cluster backend cannot take it (adapter.when_down refuse)');
      return refuse(ws, `Server busy: client event not delivered (${refused}); send it again later`, channel);
    }
    try {
      deps.publisher.publishOne({ kind: 'client', app: app.id, channel, except: d.id, message: out });
      // webhook data: the string the client sent, or the JSON of its object (Pusher sends a string)
      if (deps.webhooks?.wantsClientEvents(app.id)) {
        deps.webhooks.clientEvent(app.id, channel, event, typeof data === 'string' ? data : dataJson, d.id,
          sub.type === 'presence' ? sub.userId : undefined);
      }
    } catch (err) {
      if (err instanceof HistoryUnavailableError) {
        logLimited(deps.log, 'warn', { channel }, 'client event dropped: the history store is unreachable');
        refuse(ws, 'Server busy: client event not delivered (history store unavailable)', channel);
        return;
      }
      if (!(err instanceof BusFullError)) throw err;
      meters.busFullAt('client_event');
      logLimited(deps.log, 'warn', { channel }, 'client event dropped: internal queue full');
      refuse(ws, 'Server busy: client event not delivered', channel);
    }
  }

  return handleClientEvent;
}
