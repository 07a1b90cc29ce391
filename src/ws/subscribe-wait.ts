// Where a subscribe waits for the backend before it is joined (ws/subscribe.ts): in a
// cluster, the node's subscription of the channel's bucket (channels/bucket-gate.ts,
// adapter/buckets.ts), and with history.driver redis a history channel's numbered subject
// (history/redis-subjects.ts). Interest first (it holds the bucket on the primary), then
// the waits, then the subscription itself; what was held for the wait is let go once the
// subscription has its own (track). A subscribe that waited is checked again (`recheck`:
// the history bounds, others may have asked meanwhile), and an unsubscribe meanwhile
// cancels it (waitingOf; kept beside the socket's data, which uWS keeps fast only up to
// USER_DATA_FIELDS fields).

import type { BucketGate } from '../channels/bucket-gate';
import type { Interest } from '../channels/interest';
import type { NumberedSubjects } from '../history/redis-subjects';
import type { SocketData } from './types';

/** A connection's subscribes waiting for the backend, by channel (a token per subscribe). */
const waiting = new WeakMap<SocketData, Map<string, object>>();

/** The channels a connection's subscribes wait for (they count toward limits.max_subscriptions_per_connection). */
export function waitingOf(d: SocketData): ReadonlyMap<string, object> | undefined {
  return waiting.get(d);
}

/** An unsubscribe: the connection's subscribe of the channel waiting for the backend is cancelled. */
export function cancelWaiting(d: SocketData, channel: string): void {
  waiting.get(d)?.delete(channel);
}

/** `join` once the backend has what the subscription needs; null when nothing is waited for (join at once). */
export function waitForBackend(
  deps: { interest: Interest; buckets?: BucketGate | null; numbered?: NumberedSubjects | null },
  d: SocketData, app: string, channel: string, recheck: () => boolean, join: () => void,
): (() => void) | null {
  const gate = deps.buckets ?? null;
  const numbered = deps.numbered ?? null;
  if (gate === null && numbered === null) return null;
  return () => {
    deps.interest.add(app, channel);
    const k = numbered ? numbered.hold(app, channel) : -1;
    const token = {};
    let mine = waiting.get(d);
    if (mine === undefined) waiting.set(d, (mine = new Map<string, object>()));
    mine.set(channel, token);
    const go = () => {
      try {
        if (mine.get(channel) !== token) return; // unsubscribed meanwhile
        mine.delete(channel);
        if (!d.closed && !d.channels.has(channel) && recheck()) join();
      } finally {
        deps.interest.remove(app, channel);
        if (k >= 0) numbered!.release(k);
      }
    };
    const subject = k >= 0 ? () => numbered!.after(k, go) : go;
    if (gate) gate.after(app, channel, subject);
    else subject();
  };
}
