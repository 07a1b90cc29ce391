// The event tap of the live console: what happens to the apps someone is watching, copied
// out of a shard to the primary (src/console/server.ts streams it to the browser).
//
//   shard:   publish pipeline stage (api, client, user, subscription count events)
//            owner member events (added / removed, once, by the channel's owner)
//            connection open / close (ws/connection.ts)       ─▶ Tap ─▶ postMessage (batched)
//   primary: console server ─▶ `tap` command with the app ids watched now ─▶ every shard
//
// Off, it costs one Set size check per publish: nothing is copied until the console
// watches an app. Watched, events are batched (one postMessage per 50 ms) and bounded
// (MAX_PER_SECOND per shard; the rest are counted as dropped, and said so in the log).

import type { MemberMsg, OutboundStage, Outgoing } from '../channels/publisher';

export type TapKind = 'api' | 'client' | 'user' | 'count' | 'member' | 'connection' | 'webhook' | 'hook';

export interface TapEvent {
  /** ms since the epoch */
  t: number;
  app: string;
  kind: TapKind;
  /** The shard it happened on (-1: the primary, e.g. a publish from the console). */
  shard: number;
  channel?: string;
  event?: string;
  /** The event's data as sent, cut at MAX_DATA characters. */
  data?: string;
  socket_id?: string;
  /** member: added / removed; connection: open / close; webhook: delivered / retry / failed (event: the events' names, data: endpoint and status or reason); hook: denied / failed (event: the hook, data: the reason). */
  op?: string;
  user_id?: string;
}

/** Primary → shard: the app ids the console watches now ([]: none). Part of shard/init.ts's PrimaryCommand. */
export interface TapCommand { type: 'tap'; apps: string[] }
/** Shard → primary: a batch of events. Part of shard/init.ts's ShardEvent. */
export interface TapReport { type: 'tap'; events: TapEvent[]; dropped: number }

export const MAX_DATA = 1024;
const MAX_PER_SECOND = 500;
const FLUSH_MS = 50;

export interface Tap {
  watch(apps: readonly string[]): void;
  /** True when `app` is watched: check before building an event. */
  on(app: string): boolean;
  emit(ev: Omit<TapEvent, 't' | 'shard'>): void;
  /** The publish pipeline stage (never takes a message over). */
  readonly stage: OutboundStage;
  /** A member event decided by this shard (as owner). */
  member(m: MemberMsg): void;
}

function cut(s: string): string {
  return s.length > MAX_DATA ? s.slice(0, MAX_DATA) + '…' : s;
}

/** The tap event of a message on its way out of the shard that made it. */
export function fromOutgoing(m: Outgoing): Omit<TapEvent, 't' | 'shard'> {
  let event: string | undefined;
  let data: string | undefined;
  let userId: string | undefined;
  try {
    const f = JSON.parse(m.message) as { event?: unknown; data?: unknown; user_id?: unknown };
    if (typeof f.event === 'string') event = f.event;
    if (f.data !== undefined) data = cut(typeof f.data === 'string' ? f.data : JSON.stringify(f.data));
    if (typeof f.user_id === 'string') userId = f.user_id;
  } catch { /* a frame is always JSON; keep what is known */ }
  return {
    app: m.app, kind: m.kind, channel: m.channel, event, data,
    ...(m.except ? { socket_id: m.except } : {}), ...(userId ? { user_id: userId } : {}),
  };
}

export function createTap(shard: number, post: (r: TapReport) => void): Tap {
  let watched = new Set<string>();
  let queue: TapEvent[] = [];
  let dropped = 0;
  let windowStart = 0;
  let inWindow = 0;
  let timer: NodeJS.Timeout | null = null;

  function flush(): void {
    timer = null;
    if (queue.length === 0 && dropped === 0) return;
    post({ type: 'tap', events: queue, dropped });
    queue = [];
    dropped = 0;
  }

  const tap: Tap = {
    watch(apps) {
      watched = new Set(apps);
    },
    on(app) {
      return watched.size > 0 && watched.has(app);
    },
    emit(ev) {
      if (!tap.on(ev.app)) return;
      const now = Date.now();
      if (now - windowStart >= 1000) {
        windowStart = now;
        inWindow = 0;
      }
      if (++inWindow > MAX_PER_SECOND) dropped++;
      else queue.push({ ...ev, t: now, shard });
      timer ??= setTimeout(flush, FLUSH_MS);
    },
    stage: {
      out(m, w) {
        // shown once the publish is written: a publish refused with 503 reached nobody
        if (watched.size > 0 && watched.has(m.app)) {
          const ev = fromOutgoing(m);
          w.after(() => tap.emit(ev));
        }
        return false;
      },
    },
    member(m) {
      if (!tap.on(m.app)) return;
      tap.emit({
        app: m.app, kind: 'member', channel: m.channel, op: m.op,
        user_id: typeof m.userId === 'string' ? m.userId : JSON.stringify(m.userId),
        ...(m.op === 'added' ? { data: cut(JSON.stringify(m.userInfo ?? null)) } : {}),
      });
    },
  };
  return tap;
}
