// The delta sequencer's backpressure (sequencer.ts rule 3): a frame a shard's full ring
// and spill refuse waits in that shard's backlog, in order (later frames for the shard
// queue behind it), and is written again every RETRY_MS. While any backlog waits the
// sequencer's bus is held (it reads nothing), so the shards' publishes to it fill its
// ring and spill and are refused: the API answers 503, nothing delivered. Past
// MAX_BACKLOG frames (what was read and computed before the hold) a frame is lost.

import type { ControlMsg } from '../bus/messages';
import { BusFullError } from '../bus/errors';

/** Frames the backlogs of full shards hold at most. */
export const MAX_BACKLOG = 8192;
/** ms between attempts to write a backlog. */
const RETRY_MS = 2;
/** ms the bus is held at each attempt (held again while a backlog waits). */
const HOLD_MS = 100;

export interface BacklogDeps {
  /** Writes to a shard; throws BusFullError when its ring and spill are full. */
  control(to: number, msg: ControlMsg): void;
  /** Stop reading the bus for `ms` (0: read again now). */
  hold?(ms: number): void;
  /** A frame that will not be written (its shard's clients resynchronise). */
  lost(err: unknown, shard: number, msg: ControlMsg): void;
}

export function createBacklog(deps: BacklogDeps) {
  /** Per shard, the frames its full ring refused, in order. */
  const backlog = new Map<number, ControlMsg[]>();
  let waiting = 0;
  let timer: NodeJS.Timeout | null = null;

  function send(targets: Iterable<number>, msg: ControlMsg): void {
    for (const s of targets) {
      const q = backlog.get(s);
      if (q !== undefined) {
        wait(s, q, msg);
        continue;
      }
      try {
        deps.control(s, msg);
      } catch (err) {
        if (err instanceof BusFullError) wait(s, [], msg);
        else deps.lost(err, s, msg);
      }
    }
  }

  function wait(s: number, q: ControlMsg[], msg: ControlMsg): void {
    if (waiting >= MAX_BACKLOG) return deps.lost(new BusFullError(s), s, msg);
    if (q.length === 0) backlog.set(s, q);
    q.push(msg);
    waiting++;
    deps.hold?.(HOLD_MS);
    timer ??= setTimeout(retry, RETRY_MS);
  }

  function retry(): void {
    timer = null;
    for (const [s, q] of backlog) {
      let i = 0;
      for (; i < q.length; i++) {
        try {
          deps.control(s, q[i]);
        } catch (err) {
          if (err instanceof BusFullError) break;
          deps.lost(err, s, q[i]);
        }
      }
      q.splice(0, i);
      waiting -= i;
      if (q.length === 0) backlog.delete(s);
    }
    if (backlog.size > 0) {
      deps.hold?.(HOLD_MS);
      timer = setTimeout(retry, RETRY_MS);
    } else {
      deps.hold?.(0);
    }
  }

  return {
    send,
    /** Shard `s` was replaced: its backlog goes (its clients start over). */
    forget(s: number): void {
      const q = backlog.get(s);
      if (q === undefined) return;
      waiting -= q.length;
      backlog.delete(s);
    },
    /** Frames waiting. */
    size: () => waiting,
  };
}
