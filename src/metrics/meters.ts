// Hot-path counting on top of a MetricsSink: label children resolved once per app and
// label value (Map lookups, no label objects per message), and the bounded `event` label
// of the message metrics:
//   - protocol events (pusher: / pusher_internal:, any spelling) → their canonical name;
//   - client-* events → 'client-event'; app events published through the API → 'api-event';
//   - received frames with another name → 'other', unparseable frames → 'malformed'.
// A name chosen by a client never becomes a label value.

import { ErrorCode } from '../protocol/codes';
import { Ev, isClientEvent, outName } from '../protocol/events';
import { noMetrics, type BoundCounter, type BoundGauge, type MetricsSink } from './types';

const PROTOCOL_EVENTS: ReadonlySet<string> = new Set(Object.values(Ev));

const REFUSE_REASONS: Readonly<Record<number, string>> = {
  [ErrorCode.AppNotFound]: 'app_not_found',
  [ErrorCode.AppDisabled]: 'app_disabled',
  [ErrorCode.OverQuota]: 'over_quota',
  [ErrorCode.Unauthorized]: 'origin_not_allowed',
  [ErrorCode.OverCapacity]: 'over_capacity',
};

/** `reason` of connection_errors_total for a connection refused at open with `code`. */
export function refuseReason(code: number): string {
  return REFUSE_REASONS[code] ?? `code_${code}`;
}

/** The `event` label of a received frame (name already normalised to pusher:). */
export function receivedLabel(event: string): string {
  if (isClientEvent(event)) return 'client-event';
  return PROTOCOL_EVENTS.has(event) ? event : 'other';
}

const EVENT_OPEN = Buffer.from('{"event":"');
/** Every protocol event name in both spellings, as bytes followed by the closing quote. */
const WIRE_NAMES: { bytes: Buffer; label: string }[] = [];
for (const canonical of PROTOCOL_EVENTS) {
  for (const spelling of new Set([canonical, outName(canonical, 'proto')])) {
    WIRE_NAMES.push({ bytes: Buffer.from(spelling + '"'), label: canonical });
  }
}
/** The same, as text (delta/deliver.ts holds its frames as strings). */
const WIRE_TEXT = WIRE_NAMES.map((w) => ({ text: w.bytes.toString('latin1'), label: w.label }));
const C = 99; // 'c'
const P = 112; // 'p'
const CLIENT_DASH = Buffer.from('client-');

function startsAt(msg: Uint8Array, at: number, what: Uint8Array): boolean {
  if (msg.length < at + what.length) return false;
  for (let i = 0; i < what.length; i++) if (msg[at + i] !== what[i]) return false;
  return true;
}

/**
 * The `event` label of a serialised message ({"event":"…",…} as built by protocol/frames
 * and client-events), read from its first bytes without decoding it.
 */
export function sentLabel(msg: Uint8Array): string {
  const at = EVENT_OPEN.length;
  if (!startsAt(msg, 0, EVENT_OPEN)) return 'api-event';
  const first = msg[at];
  if (first === C && startsAt(msg, at, CLIENT_DASH)) return 'client-event';
  if (first === P) {
    for (const w of WIRE_NAMES) if (startsAt(msg, at, w.bytes)) return w.label;
  }
  return 'api-event';
}

/** sentLabel() of a message held as a string. */
export function sentLabelText(msg: string): string {
  const at = EVENT_OPEN.length;
  if (!msg.startsWith('{"event":"')) return 'api-event';
  const first = msg.charCodeAt(at);
  if (first === C && msg.startsWith('client-', at)) return 'client-event';
  if (first === P) {
    for (const w of WIRE_TEXT) if (msg.startsWith(w.text, at)) return w.label;
  }
  return 'api-event';
}

type AppCounter = 'connection_errors_total' | 'channel_subscriptions_total' | 'channel_subscription_errors_total'
  | 'messages_sent_total' | 'messages_received_total' | 'rate_limit_exceeded_total';

/** Cached label children of one app: one Map per metric, keyed by the second label's value. */
export class AppMeters {
  readonly connectionsActive: BoundGauge;
  readonly connectionsTotal: BoundCounter;
  readonly channelsActive: BoundGauge;
  private readonly receivedBy = new Map<string, BoundCounter>();
  private readonly sentBy = new Map<string, BoundCounter>();
  private readonly connectionErrorsBy = new Map<string, BoundCounter>();
  private readonly subscriptionsBy = new Map<string, BoundCounter>();
  private readonly subscriptionErrorsBy = new Map<string, BoundCounter>();
  private readonly rateLimitedBy = new Map<string, BoundCounter>();

  constructor(private readonly sink: MetricsSink, readonly appId: string) {
    const app = { app_id: appId };
    this.connectionsActive = sink.gauge('connections_active', app);
    this.connectionsTotal = sink.counter('connections_total', app);
    this.channelsActive = sink.gauge('channels_active', app);
  }

  private child(map: Map<string, BoundCounter>, name: AppCounter, label: string, value: string): BoundCounter {
    let c = map.get(value);
    if (c === undefined) {
      c = this.sink.counter(name, { app_id: this.appId, [label]: value });
      map.set(value, c);
    }
    return c;
  }

  /** messages_received_total{event}, `label` from receivedLabel(). */
  received(label: string): BoundCounter {
    return this.child(this.receivedBy, 'messages_received_total', 'event', label);
  }

  /** messages_sent_total{event}, `label` a canonical protocol event name or a bucket from sentLabel(). */
  sent(label: string): BoundCounter {
    return this.child(this.sentBy, 'messages_sent_total', 'event', label);
  }

  connectionError(reason: string): BoundCounter {
    return this.child(this.connectionErrorsBy, 'connection_errors_total', 'reason', reason);
  }

  subscription(channelType: string): BoundCounter {
    return this.child(this.subscriptionsBy, 'channel_subscriptions_total', 'channel_type', channelType);
  }

  subscriptionError(reason: string): BoundCounter {
    return this.child(this.subscriptionErrorsBy, 'channel_subscription_errors_total', 'reason', reason);
  }

  rateLimited(limitType: string): BoundCounter {
    return this.child(this.rateLimitedBy, 'rate_limit_exceeded_total', 'limit_type', limitType);
  }
}

/** Per-thread counting helpers over a sink; one instance per sink (see metersFor). */
export class Meters {
  readonly enabled: boolean;
  readonly bytesSent: BoundCounter;
  readonly bytesReceived: BoundCounter;
  readonly sendErrors: BoundCounter;
  readonly dropped: BoundCounter;
  readonly bufferFullDrop: BoundCounter;
  readonly presenceJoins: BoundCounter;
  readonly presenceLeaves: BoundCounter;
  private readonly apps = new Map<string, AppMeters>();
  private readonly busFull = new Map<string, BoundCounter>();

  constructor(readonly sink: MetricsSink) {
    this.enabled = sink !== noMetrics;
    this.bytesSent = sink.counter('message_bytes_sent_total');
    this.bytesReceived = sink.counter('message_bytes_received_total');
    this.sendErrors = sink.counter('message_send_errors_total');
    this.dropped = sink.counter('websocket_messages_dropped_total');
    this.bufferFullDrop = sink.counter('websocket_buffer_full_total', { action: 'drop' });
    this.presenceJoins = sink.counter('presence_joins_total');
    this.presenceLeaves = sink.counter('presence_leaves_total');
  }

  /** The app's cached children ('' for connections refused before an app was found). */
  app(appId: string): AppMeters {
    let m = this.apps.get(appId);
    if (m === undefined) {
      m = new AppMeters(this.sink, appId);
      this.apps.set(appId, m);
    }
    return m;
  }

  /**
   * One protocol frame of `bytes` bytes was handed to one socket with uWS status `status`:
   * messages_sent_total{event} and bytes, or a drop (status 2: over the backpressure limit).
   * The sending itself is ws/send.ts's (metrics/ sends nothing).
   */
  sent(appId: string, canonicalEvent: string, status: number, bytes: number): void {
    if (!this.enabled) return;
    if (status === 2) {
      this.sendErrors.inc();
      this.dropped.inc();
      this.bufferFullDrop.inc();
      return;
    }
    this.app(appId).sent(canonicalEvent).inc();
    this.bytesSent.inc(bytes);
  }

  /** A publish frame was handed to uWS for `n` local subscribers. */
  delivered(appId: string, message: Uint8Array, n: number): void {
    if (!this.enabled || n <= 0) return;
    this.app(appId).sent(sentLabel(message)).inc(n);
    this.bytesSent.inc(n * message.length);
  }

  /** A text frame of `bytes` bytes (event label `label`) was handed to uWS for `n` local subscribers. */
  deliveredText(appId: string, label: string, bytes: number, n: number): void {
    if (!this.enabled || n <= 0) return;
    this.app(appId).sent(label).inc(n);
    this.bytesSent.inc(n * bytes);
  }

  /** A frame was refused because a ring and its spill queue were full. */
  busFullAt(source: 'api' | 'client_event' | 'member_event' | 'owner'): void {
    let c = this.busFull.get(source);
    if (c === undefined) {
      c = this.sink.counter('bus_full_total', { source });
      this.busFull.set(source, c);
    }
    c.inc();
  }
}

const bySink = new WeakMap<MetricsSink, Meters>();

/** The Meters of a sink (one per sink, so every module of a thread shares the same caches). */
export function metersFor(sink: MetricsSink): Meters {
  let m = bySink.get(sink);
  if (m === undefined) {
    m = new Meters(sink);
    bySink.set(sink, m);
  }
  return m;
}

/**
 * ws.send of one protocol frame to one socket (a WebSocket or an HTTP fallback session),
 * counted: messages_sent_total{event}, bytes, drops at the backpressure limit. Returns the
 * socket's status: 0 backpressure, 1 sent, 2 dropped. The one send of a frame to one socket
 * for every layer above (ws/, hooks/, history/).
 */
export function sendFrame(meters: Meters, ws: { send(message: string, isBinary: boolean): number }, appId: string, canonicalEvent: string, text: string): number {
  const status = ws.send(text, false);
  if (meters.enabled) meters.sent(appId, canonicalEvent, status, Buffer.byteLength(text));
  return status;
}
