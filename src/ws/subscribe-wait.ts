// Where a subscribe waits for the backend before it is joined (ws/subscribe.ts): in a
// cluster, the node's subscription of the channel's bucket (channels/bucket-gate.ts,
// adapter/buckets.ts), and with history.driver redis a history channel's numbered subject
// (history/redis-subjects.ts). Interest first (it holds the bucket on the primary), then
// the waits, then the subscription itself; what was held for the wait is let go once the
// subscription has its own (track). A subscribe that waited is checked again (`recheck`:
// the history bounds, others may have asked meanwhile), and an unsubscribe meanwhile
// cancels it (SocketData.waiting).

import type { BucketGate } from '../channels/bucket-gate';
import type { Interest } from '../channels/interest';
import type { NumberedSubjects } from '../history/redis-subjects';
import type { SocketData } from './types';

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
    (d.waiting ??= new Map()).set(channel, token);
    const go = () => {
      try {
        if (d.waiting?.get(channel) !== token) return; // unsubscribed meanwhile
        d.waiting.delete(channel);
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
