// Messages between the reconnect-storm bench (reconnect.ts) and its client processes
// (gen.ts), and which channels a client subscribes to. IPC uses the 'advanced'
// (structured clone) serialisation, so the per-client time arrays travel as typed arrays.

export interface StormInit {
  host: string;
  port: number;
  /** Request path of the upgrade. */
  path: string;
  /** Local (source) addresses, round-robin by client index; [] = the kernel's choice. */
  srcAddrs: string[];
  /** Upgrades in flight at once in this process during the first connect (the storm has no cap). */
  concurrency: number;
  /** Global index of this process's first client, and how many it holds. */
  firstIndex: number;
  count: number;
  layout: Layout;
  /** The server answers `recover` subscriptions with pusher_internal:recovery (not the bare ceiling). */
  recoveryAnswers: boolean;
  /** A client whose connection closed reconnects after U(0, jitterMs) ms. */
  jitterMs: number;
  /** A connection attempt that failed (refused, 503, closed before connection_established) is retried after U(0, retryMs) ms. */
  retryMs: number;
}

/** Which channels each client subscribes to (channelsOf). */
export interface Layout {
  /** Plain channels: subscription j of client g is `storm<j>-<g % plain>`. */
  plain: number;
  /** Subscriptions per client. */
  perClient: number;
  /** Every `specialEvery`-th client (0: none) has a rewind or a recover subscription as its second. */
  specialEvery: number;
  /** Rewind channels `storm-rw-<n>` and recover channels `storm-rc-<n>`, n < special. */
  special: number;
}

export type Kind = 'plain' | 'rewind' | 'recover';

export interface Sub {
  channel: string;
  kind: Kind;
}

export const REWIND_PATTERN = 'storm-rw-*';
export const RECOVER_PATTERN = 'storm-rc-*';

/** The subscriptions of client g: the second one of every specialEvery-th client is a rewind
 *  channel (even specials) or a recover subscription (odd ones); the rest are plain. */
export function channelsOf(l: Layout, g: number): Sub[] {
  const out: Sub[] = [];
  const special = l.specialEvery > 0 && g % l.specialEvery === 0 && l.perClient >= 2;
  for (let j = 0; j < l.perClient; j++) {
    if (j === 1 && special) {
      const s = g / l.specialEvery;
      const n = Math.floor(s / 2) % l.special;
      out.push(s % 2 === 0 ? { channel: `storm-rw-${n}`, kind: 'rewind' } : { channel: `storm-rc-${n}`, kind: 'recover' });
    } else {
      out.push({ channel: `storm${j}-${g % l.plain}`, kind: 'plain' });
    }
  }
  return out;
}

export type StormCommand =
  | { id: number; type: 'init'; init: StormInit }
  /** Connects every client and subscribes; answers when all are back (or at the timeout). */
  | { id: number; type: 'connect'; timeoutMs: number }
  /** Starts a new phase: every client's times are cleared; closes from now on are the storm. */
  | { id: number; type: 'arm' }
  /** Answers when every client is back in the current phase (or at the timeout). */
  | { id: number; type: 'wait'; timeoutMs: number }
  | { id: number; type: 'snapshot' }
  | { id: number; type: 'close' };

export interface StormStats {
  clients: number;
  /** Clients connected and with every subscription answered in the current phase. */
  back: number;
  established: number;
  /** Connection attempts in the current phase (the first of each client included). */
  attempts: number;
  /** Attempts that failed before connection_established, by cause. */
  failures: Record<string, number>;
  /** Closes of established connections, by close code (1006: no close frame). */
  closes: Record<string, number>;
  /** pusher:error codes, subscription errors. */
  errors: Record<string, number>;
  subsConfirmed: number;
  /** pusher_internal:recovery answers: `recovered` or the reason. */
  recovery: Record<string, number>;
  /** Message frames received (all channels), and those on rewind channels. */
  msgs: number;
  rewindMsgs: number;
  /** Recover subscriptions whose replayed serials were not consecutive from the asked position. */
  serialGaps: number;
  cpuUs: number;
}

export interface StormReply {
  id: number;
  type: 'ok' | 'done';
  timedOut?: boolean;
  stats: StormStats;
  /** Per client of this process, in the current phase: monotonic µs of connection_established
   *  and of the last subscription answer (0: not yet). */
  tEst?: Float64Array;
  tBack?: Float64Array;
}
