// What the delta shard needs of a connection and of its state. delta/ sits below ws/ in
// the layering (.dependency-cruiser.cjs), so it names these shapes and the shard's
// connection type is a parameter S: ws/types.ts Socket (a uWS WebSocket, or an HTTP
// fallback session: fallback/session.ts) and SocketData are one, and shard/context.ts
// makes the delta shard for them.

import type { ExcludedSocket } from '../channels/exclude';
import type { FilterHandle } from '../channels/filtered';
import type { AppConfig } from '../config/types';
import type { CompiledFilter } from '../filter/compile';
import type { Meters } from '../metrics/meters';
import type { Algo } from './settings';
import type { FilterGroup, StreamMember } from './subscribers';
import type { ConnSocket } from '../channels/conn';

/** A delta subscriber: it steps in and out of streams, is skipped by an excluding publish, and is sent full messages. */
export interface DeltaSocket extends StreamMember, ExcludedSocket, Pick<ConnSocket, 'send' | 'cork'> {}

/** Per-socket delta state (ws/types.ts SocketData.delta). */
export interface SocketDelta<S> {
  /** The algorithm the socket opted into with pusher:enable_delta_compression, or null. */
  algo: Algo | null;
  /** Delta subscriptions of this socket: channel → algorithm. */
  channels: Map<string, Algo>;
  /** Its tag-filtered ones (delta/shard.ts rule 8): channel → the group it is in. */
  filtered: Map<string, FilterGroup<S>>;
  /** Its subscriptions with positions (history channels: frames with the serial; delta/shard.ts rule 9). */
  serial?: Set<string>;
  /** Its subscriptions waiting for their history answer (rule 9): held paused, resumed only by release(). */
  held?: Set<string>;
}

/** A channel subscription of the socket, as far as the opt-in moves it to deltas (ws/types.ts Subscription). */
export interface DeltaSubscription {
  joined: boolean;
  /** In the filter stage (channels/filtered.ts) under this handle. */
  filter?: FilterHandle;
  tagFilter?: CompiledFilter;
  /** A history subscription with a rewind or positions (ws/types.ts): the opt-in leaves it as it is. */
  history?: unknown;
}

/** A connection's state (ws/types.ts SocketData), as far as delta reads and keeps it. */
export interface DeltaSocketData<S> {
  app: AppConfig | null;
  closed: boolean;
  channels: ReadonlyMap<string, DeltaSubscription>;
  /** null until the socket opts in or subscribes with delta. */
  delta: SocketDelta<S> | null;
}

/** ws/send.ts sendFrame: one protocol frame to one socket, counted as sent; uWS's status. */
export type SendFrame<S> = (meters: Meters, ws: S, appId: string, canonicalEvent: string, text: string) => number;
