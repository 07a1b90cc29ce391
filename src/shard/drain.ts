// A shard's paced drain, the first part of a stop: /up answers 503 (a balancer stops
// sending), new WebSocket upgrades and new HTTP fallback sessions answer 503, and after
// `unreadyMs` the shard's clients are asked to reconnect (close 4200, which pusher-js
// answers by reconnecting at once) evenly over `windowMs`, so the other nodes take them
// at a steady rate instead of all in the same second. Connections that arrive meanwhile
// (a balancer that has not noticed yet) are closed in the next step. Then the stop goes
// on as before (shard/shutdown.ts): the listener closes and what is left is cut.

import { CloseMessage, ErrorCode } from '../protocol/codes';
import type { Socket } from '../ws/types';

/** How often the pacer closes its next share of the clients. */
export const DRAIN_STEP_MS = 50;

export interface DrainDeps {
  sockets: ReadonlyMap<string, Socket>;
  clock: {
    now(): number;
    setTimeout(fn: () => void, ms: number): unknown;
  };
  /** The drain ended: every socket that was open got its 4200. */
  done(): void;
}

export interface Drain {
  /** Starts the drain (idempotent). */
  run(unreadyMs: number, windowMs: number): void;
  /** Stops pacing (the shard stops or crashes meanwhile). */
  cancel(): void;
  /** When run() was called (clock ms), or null. */
  readonly startedAt: number | null;
}

export function createDrain(deps: DrainDeps): Drain {
  let startedAt: number | null = null;
  let cancelled = false;
  return {
    get startedAt() {
      return startedAt;
    },
    run(unreadyMs, windowMs) {
      if (startedAt !== null) return;
      startedAt = deps.clock.now();
      deps.clock.setTimeout(() => pace(windowMs), unreadyMs);
    },
    cancel() {
      cancelled = true;
    },
  };

  function pace(windowMs: number): void {
    if (cancelled) return;
    const total = deps.sockets.size;
    const start = deps.clock.now();
    let closed = 0;
    const step = () => {
      if (cancelled) return;
      const elapsed = deps.clock.now() - start;
      // the share due by now; whatever arrived after the start goes at the window's end
      const due = elapsed >= windowMs ? Infinity : Math.floor((total * elapsed) / windowMs);
      for (const ws of deps.sockets.values()) {
        if (closed >= due) break;
        closed++;
        // end() runs the close handler at once, which takes the socket out of the map
        ws.end(ErrorCode.ShuttingDown, CloseMessage[ErrorCode.ShuttingDown]);
      }
      if (elapsed >= windowMs || deps.sockets.size === 0) return deps.done(); // nobody left: no need to wait
      deps.clock.setTimeout(step, Math.min(DRAIN_STEP_MS, windowMs - elapsed));
    };
    step();
  }
}
