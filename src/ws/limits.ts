// Per-connection and per-process bounds of the WebSocket side (config `limits`, README
// "Limits and hostile clients"): the frame budget every frame passes through, and the
// process-wide connection cap checked when a connection opens.

import { createFrameBudget, FrameVerdict } from '../limits/frames';
import { metersFor } from '../metrics/meters';
import { ErrorCode } from '../protocol/codes';
import { Ev } from '../protocol/events';
import { errorFrame } from '../protocol/frames';
import type { WsDeps } from './deps';
import { sendFrame } from './send';
import type { Socket, SocketData } from './types';

export interface WsLimits {
  /** Charges a frame to the socket's budget; true when it is not to be handled (dropped, or the socket closed). */
  overBudget(ws: Socket, d: SocketData, now: number): boolean;
  /** Takes a slot of limits.max_connections; the refusal when the process is full. */
  admit(): { code: number; message: string } | null;
  /**
   * Counts connection `socketId` against its client address (limits.max_connections_per_ip);
   * the refusal when the address has its share already. ConnectionCounters.releaseAddress gives it back.
   */
  admitAddress(socketId: string, ip: string): { code: number; message: string } | null;
  /** Gives the slot back (a connection that was admitted closed). */
  release(): void;
}

export function createWsLimits(deps: Pick<WsDeps, 'config' | 'metrics' | 'counters' | 'out'>): WsLimits {
  const { frames_per_second: rate, frame_burst: burst, max_connections: maxConnections, max_connections_per_ip: perIp } = deps.config.limits;
  const budget = createFrameBudget(rate, burst);
  const meters = metersFor(deps.metrics);
  const addressRefusal = Object.freeze({ code: ErrorCode.OverCapacity, message: `Over capacity: at most ${perIp} connections from one address (limits.max_connections_per_ip); close one or retry later` });
  const refusal = Object.freeze({ code: ErrorCode.OverCapacity, message: `Over capacity: this server accepts at most ${maxConnections} connections (limits.max_connections); retry later` });

  return {
    overBudget(ws, d, now) {
      const r = budget.charge(d.frameTat, now);
      d.frameTat = r.tat;
      switch (r.verdict) {
        case FrameVerdict.Ok:
          return false;
        case FrameVerdict.FirstDrop: {
          meters.app(d.app!.id).rateLimited('frames').inc();
          const secs = budget.waitSeconds(r.tat, now);
          sendFrame(meters, ws, d.app!.id, Ev.Error, errorFrame(deps.out(Ev.Error), ErrorCode.RateLimited,
            `Too many frames: at most ${rate} per second (bursts of ${burst}, limits.frames_per_second / frame_burst); frames are dropped for ${secs} s, and the connection is closed (4100) if they keep coming`));
          return true;
        }
        case FrameVerdict.Drop:
          meters.app(d.app!.id).rateLimited('frames').inc();
          return true;
        case FrameVerdict.Close:
          meters.app(d.app!.id).connectionError('frame_flood').inc();
          ws.cork(() => {
            sendFrame(meters, ws, d.app!.id, Ev.Error, errorFrame(deps.out(Ev.Error), ErrorCode.OverCapacity,
              `Over capacity: frames kept coming past the frame budget (${rate} per second, bursts of ${burst})`));
            ws.end(ErrorCode.OverCapacity, 'Over capacity: too many frames');
          });
          return true;
        default:
          return true; // closing already
      }
    },
    admit() {
      return deps.counters.tryAcquireNode(maxConnections) ? null : refusal;
    },
    admitAddress(socketId, ip) {
      if (deps.counters.tryAcquireAddress(socketId, ip, perIp)) return null;
      deps.metrics.inc('connections_refused_per_ip_total', { transport: 'ws' });
      return addressRefusal;
    },
    release() {
      deps.counters.releaseNode();
    },
  };
}
