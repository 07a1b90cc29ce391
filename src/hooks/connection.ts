// The hooks of a WebSocket connection: connect, subscribe and client_event, in the
// connection's order.
//
// Invariants (per connection):
//   1. At most one hook call is pending. While it is, the connection is `busy`: every frame
//      that arrives (after the size and rate checks of ws/connection.ts) waits in a FIFO
//      and is dispatched, in arrival order, once the call is answered and acted on. So a
//      client event never overtakes an earlier one waiting on its hook, an unsubscribe
//      never overtakes its subscribe, whatever order the backend answers in.
//   2. The FIFO is bounded (hook_client.max_pending_per_connection frames, MAX_PENDING_BYTES):
//      a frame over the bound is dropped and answered with pusher:error 4301.
//   3. A connection that closes aborts its pending call (the HTTP request is destroyed,
//      its in-flight slot freed) and drops its FIFO; the answer, if it comes, is ignored,
//      so nothing (subscription, member, count) is left behind.
//   4. Nothing here runs for a connection without a pending call but one counter check.
//
// Denials (docs/protocol.md): connect → pusher:error 4009 and close 4009; subscribe →
// pusher:subscription_error {type:"AuthError", error, status:403}, connection kept;
// client event → pusher:error 4301 with the channel, connection kept.

import type { AppConfig, Config } from '../config/types';
import { metersFor, sendFrame } from '../metrics/meters';
import type { MetricsSink } from '../metrics/types';
import { ErrorCode } from '../protocol/codes';
import { Ev } from '../protocol/events';
import { errorFrame, subscriptionErrorFrame } from '../protocol/frames';
import type { ConnectionInfo, HookBody, HookCaller, Verdict } from './caller';
import { hookFor, type CompiledHook } from './settings';
import type { ConnSocket } from '../channels/conn';

/** Bytes of frames one connection may have waiting behind a pending hook. */
export const MAX_PENDING_BYTES = 256 * 1024;
/** Upgrades not (yet) opened whose connection info is kept. */
const MAX_UPGRADED = 4096;
/** HTTP status in the subscription_error of a denied subscribe (docs/protocol.md). */
export const DENIED_STATUS = 403;
/** Close reasons are cut by uWS at 123 bytes (possibly inside a character): longer ones get this text. */
const CONNECT_DENIED = 'Connection refused by the app backend';

/** What this file needs of a connection's socket (ws/types.ts Socket: a uWS WebSocket). */
export type HookSocket = Pick<ConnSocket<unknown>, 'cork' | 'send' | 'end'>;

/** What this file needs of a connection's state (ws/types.ts SocketData). */
export interface HookConn {
  id: string;
  app: AppConfig | null;
  closed: boolean;
  userId: string | null;
}


interface ConnState {
  info: ConnectionInfo;
  /** hook_client.calls_per_second_per_connection: calls left in this connection's bucket, and when it was last filled (ms). */
  tokens: number;
  filled: number;
  busy: boolean;
  queue: string[];
  queuedBytes: number;
  ctrl: AbortController | null;
}

export interface WsHooks<Socket extends HookSocket = HookSocket, SocketData extends HookConn = HookConn> {
  /** At the upgrade of a connection to an app with hooks: what a hook may see of it (its IP honouring trust_hops, Origin, User-Agent). */
  upgrade(socketId: string, info: ConnectionInfo): void;
  /** Where queued frames go once the pending call is done (ws/connection.ts's frame dispatch). */
  resume(dispatch: (ws: Socket, d: SocketData, text: string) => void): void;
  /** True when the frame waits (or was refused) behind a pending hook call of this connection. */
  holds(ws: Socket, d: SocketData, text: string): boolean;
  /** At open (every accepted connection): connect hook, `established` once allowed; false when no connect hook applies (call it yourself). */
  connect(ws: Socket, d: SocketData, established: () => void): boolean;
  /** Subscribe hook after the auth check: `proceed` once allowed; false when no hook applies. */
  subscribe(ws: Socket, d: SocketData, channel: string, channelData: string | undefined, proceed: () => void): boolean;
  /**
   * Client-event hook after every local check: `deliver(data)` once allowed, with the backend's
   * replacement data or undefined; false when no hook applies.
   */
  clientEvent(ws: Socket, d: SocketData, channel: string, event: string, data: unknown, userId: unknown, deliver: (replaced: unknown) => void): boolean;
  /** The connection closed: cancel its call, drop its queue. */
  closed(d: SocketData): void;
  /** Connections with a call pending on this shard (tests, metrics). */
  busy(): number;
}

export interface WsHooksDeps {
  config: Config;
  caller: HookCaller;
  metrics: MetricsSink;
  out(canonical: string): string;
}

export function createWsHooks<Socket extends HookSocket, SocketData extends HookConn>(deps: WsHooksDeps): WsHooks<Socket, SocketData> {
  const { caller, config } = deps;
  const meters = metersFor(deps.metrics);
  const states = new WeakMap<SocketData, ConnState>();
  /**
   * What the upgrade saw, by socket_id, until open() adopts it: uWS hands open() a copy of
   * the user data given to res.upgrade(), not the same object. (uWS calls open() right after
   * the upgrade; the bound only guards against upgrades that never open.)
   */
  const upgraded = new Map<string, ConnectionInfo>();
  const maxPending = config.hook_client.max_pending_per_connection;
  const rate = config.hook_client.calls_per_second_per_connection;
  const OVER_RATE = `Too many backend hook calls from this connection (hook_client.calls_per_second_per_connection: ${rate}/s): not called, try again later`;

  /** Takes one call from the connection's bucket; false when it is empty (the call is refused, not made). */
  function takeCall(d: SocketData, s: ConnState): boolean {
    const now = Date.now();
    s.tokens = Math.min(rate, s.tokens + ((now - s.filled) * rate) / 1000);
    s.filled = now;
    if (s.tokens < 1) {
      meters.app(d.app!.id).rateLimited('hook_calls').inc();
      return false;
    }
    s.tokens--;
    return true;
  }
  let busyCount = 0;
  let dispatch: ((ws: Socket, d: SocketData, text: string) => void) | null = null;

  function stateOf(d: SocketData): ConnState {
    let s = states.get(d);
    if (s === undefined) {
      // An app given hooks by a reload after this connection opened: the upgrade's headers are gone.
      s = { info: { ip: '', origin: null, user_agent: null }, tokens: rate, filled: Date.now(), busy: false, queue: [], queuedBytes: 0, ctrl: null };
      states.set(d, s);
    }
    return s;
  }

  function body(d: SocketData, s: ConnState, hook: CompiledHook, extra: Partial<HookBody>): HookBody {
    return { hook: hook.kind, app_id: d.app!.id, time_ms: Date.now(), socket_id: d.id, ...extra, connection: s.info };
  }

  /** Calls the hook with the connection busy; `act` runs (corked) with the verdict unless the connection closed meanwhile. */
  function run(ws: Socket, d: SocketData, hook: CompiledHook, extra: Partial<HookBody>, act: (v: Verdict) => void): void {
    const s = stateOf(d);
    if (!takeCall(d, s)) {
      // refused before the call: the connection is told, the endpoint and the others are untouched
      act({ allow: false, reason: OVER_RATE, failed: false });
      return;
    }
    const ctrl = new AbortController();
    s.busy = true;
    s.ctrl = ctrl;
    busyCount++;
    void caller.call(d.app!, hook, body(d, s, hook, extra), ctrl.signal).then((v) => {
      if (d.closed || s.ctrl !== ctrl) return; // closed() has cleaned up
      s.ctrl = null;
      ws.cork(() => {
        try {
          act(v);
        } catch (err) {
          // never an unhandled rejection (it would end the shard): the client hears of it
          if (!d.closed) {
            sendFrame(meters, ws, d.app!.id, Ev.Error, errorFrame(deps.out(Ev.Error), ErrorCode.ClientEventRefused,
              `Server error: message not handled (${err instanceof Error ? err.message : String(err)})`.slice(0, 200)));
          }
        }
        if (!d.closed) drain(ws, d, s);
      });
    });
  }

  /** The call is done: dispatch the waiting frames in order, until one starts another call. */
  function drain(ws: Socket, d: SocketData, s: ConnState): void {
    s.busy = false;
    busyCount--;
    while (s.queue.length > 0 && !s.busy && !d.closed) {
      const text = s.queue.shift()!;
      s.queuedBytes -= text.length;
      dispatch!(ws, d, text);
    }
  }

  function userIdOf(v: unknown): string | undefined {
    if (typeof v === 'string') return v;
    if (typeof v === 'number') return String(v);
    return undefined;
  }

  /** A presence subscribe's member id (channel_data is checked after the hook, by ws/subscribe.ts). */
  function memberOf(channelData: string | undefined): string | undefined {
    if (channelData === undefined) return undefined;
    try {
      return userIdOf((JSON.parse(channelData) as { user_id?: unknown } | null)?.user_id);
    } catch {
      return undefined;
    }
  }

  return {
    upgrade(socketId, info) {
      if (upgraded.size >= MAX_UPGRADED) upgraded.delete(upgraded.keys().next().value!);
      upgraded.set(socketId, info);
    },

    resume(fn) {
      dispatch = fn;
    },

    holds(ws, d, text) {
      if (busyCount === 0) return false;
      const s = states.get(d);
      if (s === undefined || !s.busy) return false;
      if (s.queue.length >= maxPending || s.queuedBytes + text.length > MAX_PENDING_BYTES) {
        meters.app(d.app!.id).rateLimited('hook_pending').inc();
        sendFrame(meters, ws, d.app!.id, Ev.Error, errorFrame(deps.out(Ev.Error), ErrorCode.ClientEventRefused,
          `Too many messages waiting for a backend hook (at most ${maxPending} messages, ${MAX_PENDING_BYTES} bytes): message dropped`));
        return true;
      }
      s.queue.push(text);
      s.queuedBytes += text.length;
      return true;
    },

    connect(ws, d, established) {
      const info = upgraded.get(d.id);
      if (info !== undefined) {
        upgraded.delete(d.id);
        states.set(d, { info, tokens: rate, filled: Date.now(), busy: false, queue: [], queuedBytes: 0, ctrl: null });
      }
      const hook = hookFor(d.app!, 'connect');
      if (hook === null) return false;
      run(ws, d, hook, {}, (v) => {
        if (v.allow) return established();
        meters.app(d.app!.id).connectionError('hook_denied').inc();
        sendFrame(meters, ws, d.app!.id, Ev.Error, errorFrame(deps.out(Ev.Error), ErrorCode.Unauthorized, v.reason));
        ws.end(ErrorCode.Unauthorized, Buffer.byteLength(v.reason) <= 123 ? v.reason : CONNECT_DENIED);
      });
      return true;
    },

    subscribe(ws, d, channel, channelData, proceed) {
      const hook = hookFor(d.app!, 'subscribe', channel);
      if (hook === null) return false;
      const userId = memberOf(channelData) ?? d.userId ?? undefined;
      const extra: Partial<HookBody> = { channel, ...(userId !== undefined ? { user_id: userId } : {}), ...(channelData !== undefined ? { channel_data: channelData } : {}) };
      run(ws, d, hook, extra, (v) => {
        if (v.allow) return proceed();
        const appId = d.app!.id;
        meters.app(appId).subscriptionError('AuthError').inc();
        sendFrame(meters, ws, appId, Ev.SubscriptionError, subscriptionErrorFrame(deps.out(Ev.SubscriptionError), channel, 'AuthError', v.reason, DENIED_STATUS));
      });
      return true;
    },

    clientEvent(ws, d, channel, event, data, memberId, deliver) {
      const hook = hookFor(d.app!, 'client_event', channel, event);
      if (hook === null) return false;
      const userId = userIdOf(memberId) ?? d.userId ?? undefined;
      run(ws, d, hook, { channel, event, data, ...(userId !== undefined ? { user_id: userId } : {}) }, (v) => {
        if (v.allow) return deliver(v.data);
        sendFrame(meters, ws, d.app!.id, Ev.Error, errorFrame(deps.out(Ev.Error), ErrorCode.ClientEventRefused, v.reason, channel));
      });
      return true;
    },

    closed(d) {
      const s = states.get(d);
      if (s === undefined) return;
      states.delete(d);
      if (s.busy) {
        s.busy = false;
        busyCount--;
      }
      s.queue = [];
      const ctrl = s.ctrl;
      s.ctrl = null;
      ctrl?.abort();
    },

    busy: () => busyCount,
  };
}
