import type { RecognizedString } from 'uWebSockets.js';
import type { AppConfig } from '../config/types';
import type { ChannelType } from '../protocol/channels';
import type { FilterHandle } from '../channels/filtered';
import type { CompiledFilter } from '../filter/compile';
import type { SocketDelta } from '../delta/socket';
import type { ConnSocket } from '../channels/conn';

export interface Subscription {
  type: ChannelType;
  /** Presence only: the member key this socket joined as, and the user_id as given. */
  userKey: string | null;
  userId: unknown;
  /** Presence only: the user_info given (re-announced to a restarted owner: channels/rebuild.ts). */
  userInfo?: unknown;
  /** Presence only: false while the owner has not answered the join yet. */
  joined: boolean;
  /** Tag filtering: its entry in the shard's filter index (channels/filtered.ts); such a socket is not on the native topic. */
  filter?: FilterHandle;
  /** Tag filtering: the subscription's filter (a cache channel's replay is checked against it). */
  tagFilter?: CompiledFilter;
  /**
   * History channels (history/shard.ts): the subscription waits for its rewind or replay
   * before it joins a topic; `serial`: it asked for positions (`recover`), so it is on the
   * channel's serial topic (frames with __serial) instead of the plain one.
   */
  history?: { serial: boolean; attached?: boolean };
  /** history.driver redis / redis-cluster: the numbered subject this subscription holds (history/redis-subjects.ts). */
  subject?: number;
}

/** A signed-in socket's watchlist (ws/watchlist.ts). */
export interface WatchState {
  ws: Socket;
  /** Distinct watched user ids. */
  ids: string[];
  /** Per owner shard of some of the ids: its answer to `watch` is awaited, came, or never will. */
  status: Map<number, 'pending' | 'ok' | 'failed'>;
}

/** Per-socket state, kept in uWS user data (never monkey-patched onto the socket). */
export interface SocketData {
  id: string;
  /** null when the connection is refused at open (see `refuse`). */
  app: AppConfig | null;
  /** Set at upgrade when the connection must be refused right after it opens. */
  refuse: { code: number; message: string } | null;
  /**
   * -1 until the connection is counted against its app's max_connections; then the app's
   * slot in the shared counters, which close gives back. (One field for both: every field
   * of this object costs every connection, and V8 lays out a literal of more than 15 of
   * them so that 19,000 idle connections take ~12 MiB more: bench/ws/user-data.bench.ts.)
   */
  counted: number;
  closed: boolean;
  /** The user this socket signed in as (pusher:signin), else null. */
  userId: string | null;
  /** Watchlist of the signed-in user (apps with enable_watchlist_events), else null. */
  watch: WatchState | null;
  /**
   * user_authentication_timeout: when (ms) the socket is closed (4009) unless it signs in or
   * subscribes to a private / presence channel first; 0 = no deadline (none, or met).
   */
  authBy: number;
  channels: Map<string, Subscription>;

  /**
   * When the client's last frame came (ms); negated once the server sent pusher:ping for
   * its silence (−the time of that ping), until the next frame. (One field for both: see
   * `counted`.)
   */
  lastSeen: number;
  /** Client-event rate window. */
  evWindowStart: number;
  evCount: number;
  /** rate_limiter.websocket window of this connection (all frames): start (ms), frames in it; null until the first frame with that limit on. */
  wsWindow: { start: number; count: number } | null;
  /** The frame budget's theoretical arrival time (ms) of the next frame (limits/frames.ts). */
  frameTat: number;
  /** Delta compression state (delta/shard.ts): null until the socket opts in or subscribes with delta. */
  delta: SocketDelta<Socket> | null;
}

/**
 * A connection as the connection logic (ws/, channels/, delta/) sees it: the part of a uWS
 * WebSocket it uses. A uWS WebSocket is one; an HTTP fallback session (fallback/session.ts)
 * is the other, so subscribe, presence, client events, sign-in, limits and cleanup are
 * written once for both.
 */
export interface Socket extends ConnSocket<SocketData> {
  /** 0 queued behind backpressure, 1 sent, 2 dropped (over the queue's bound). */
  send(message: RecognizedString, isBinary?: boolean, compress?: boolean): number;
  /** Closes with a code and reason (the close handler runs). */
  end(code?: number, shortMessage?: RecognizedString): void;
  /** Cuts the connection at once (the close handler runs). */
  close(): void;
  cork(cb: () => void): unknown;
  subscribe(topic: RecognizedString): boolean;
  unsubscribe(topic: RecognizedString): boolean;
  isSubscribed(topic: RecognizedString): boolean;
  /** To every subscriber of the topic but this connection. */
  publish(topic: RecognizedString, message: RecognizedString, isBinary?: boolean, compress?: boolean): boolean;
  /** Bytes queued for the client and not yet written to the kernel. */
  getBufferedAmount(): number;
  getUserData(): SocketData;
}
