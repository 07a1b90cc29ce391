// A shard's stop (SIGTERM, RunningServer.stop(), or a listener that could not open),
// bounded by shutdown_grace_period whatever the clients do.
//
// Why it is not "close every client, then wait for the socket map to empty": uWS runs a
// WebSocket's close handler synchronously inside end(), which takes it out of the map
// at once (ws/connection.ts), and the handle is invalid from then on. The TCP socket
// itself stays in uWS until the client answers the close frame, and a client that does
// not read (a frozen process, a dead network) never does: uWS then drops it on its own
// timer, measured 14.6–15.1 s after end(). Idle HTTP keep-alive connections likewise
// stay until uWS's 10 s idle timer. A thread that still holds a uWS socket cannot be
// terminated (the process aborts: docs/architecture.md, "Shutdown"), so it lingered,
// and SIGTERM took ~15 s whatever the grace period. The only handle that still reaches
// those sockets is the App: App.close() (in the native binding, missing from its
// TypeScript types) closes every socket it holds, WebSocket or HTTP, and runs the
// onAborted of any request still waiting for its answer.
//
// A paced drain (shard/drain.ts) may come first and use up to half of the grace period;
// the cut then comes at half of what it left.
//
// So: close the listener, end every WebSocket with 4200 (queued frames go first, then
// the close frame), hand the bus, the limiter and the thread's port back at once, and
// arm an unref'd timer that closes whatever the App still holds at half the grace
// period. When every client finished its close handshake earlier, nothing is left to
// keep the thread's loop alive and it ends without waiting for the timer.

import type { RateLimiter } from '../ratelimit';
import { CloseMessage, ErrorCode } from '../protocol/codes';
import type { Socket } from '../ws/types';
import type { ShardEvent } from './init';

export interface ShutdownDeps {
  /** The shard's open WebSockets (the close handler deletes each one). */
  sockets: ReadonlyMap<string, Socket>;
  /** Stops accepting connections (us_listen_socket_close; a no-op when not listening). */
  closeListener(): void;
  /** Closes every socket the uWS App still holds, WebSocket or HTTP (App.close()). */
  closeAll(): void;
  bus: { stop(): void };
  limiter: Pick<RateLimiter, 'close'>;
  /** Posts the final lifecycle event to the primary. */
  post(e: ShardEvent): void;
  /** Lets the thread end once nothing else holds it (parentPort.close()). */
  endThread(): void;
  /** shutdown_grace_period, ms: the whole stop fits in it. */
  graceMs: number;
  clock: { setTimeout(fn: () => void, ms: number): { unref(): unknown } };
  log: { warn(obj: object, msg: string): void };
}

export interface Shutdown {
  /**
   * Starts the stop (idempotent); `final` is posted once the shard has let go of the bus.
   * `spentMs`: what a paced drain (shard/drain.ts) already took of the grace period.
   */
  run(final: ShardEvent, spentMs?: number): void;
  /** When the remaining sockets are (or were) cut, in ms after run(). */
  readonly cutAfterMs: number;
}

/** The share of the grace period given to clients to finish their close handshake. */
export const CUT_SHARE = 0.5;

export function createShutdown(deps: ShutdownDeps): Shutdown {
  let cutAfterMs = Math.floor(deps.graceMs * CUT_SHARE);
  let started = false;
  return {
    get cutAfterMs() {
      return cutAfterMs;
    },
    run(final, spentMs = 0) {
      if (started) return;
      started = true;
      // half of what the drain left of the grace period
      cutAfterMs = Math.floor(Math.max(0, deps.graceMs - spentMs) * CUT_SHARE);
      deps.closeListener();
      for (const ws of [...deps.sockets.values()]) {
        // Ended sockets leave the map (and this loop's copy holds no ended one twice).
        ws.end(ErrorCode.ShuttingDown, CloseMessage[ErrorCode.ShuttingDown]);
      }
      // unref'd: only uWS sockets still open keep the loop (and so this timer) alive.
      deps.clock.setTimeout(() => {
        deps.log.warn({ afterMs: cutAfterMs }, 'shutdown: cutting the connections still open (clients that did not finish the close handshake, idle keep-alive HTTP)');
        deps.closeAll();
      }, cutAfterMs).unref();
      deps.bus.stop();
      void deps.limiter.close(); // an open Redis socket would keep this thread alive
      deps.post(final);
      deps.endThread();
    },
  };
}
