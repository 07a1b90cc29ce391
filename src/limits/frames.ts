// The per-connection frame budget (limits.frames_per_second, limits.frame_burst): how
// fast one socket may send frames of any kind, on by default, whatever the rate limiter
// driver. A generic cell rate algorithm: one number per connection, the "theoretical
// arrival time" (TAT) of its next frame, kept in the socket's user data.
//
//   each frame    tat = max(tat, now) + 1000 / rate          (ms)
//   ahead         tat − now: how far the socket is ahead of its rate
//   ahead ≤ B     within budget (B = burst × 1000 / rate: `burst` frames at once)
//   ahead ≤ 2B    over: the frame is dropped; the first one gets pusher:error 4301
//   ahead > 2B    still sending after `burst` more frames: closed with 4100 (back off)
//
// A dropped frame is charged too, so a client that ignores the error and keeps flooding
// reaches the close after `burst` more frames; one that pauses is within budget again
// after (ahead − B) ms. An honest client (a burst of subscribes at connect, one ping
// every activity_timeout) never gets near B.

export const FrameVerdict = { Ok: 0, FirstDrop: 1, Drop: 2, Close: 3, Closing: 4 } as const;
export type FrameVerdict = (typeof FrameVerdict)[keyof typeof FrameVerdict];

export interface FrameBudget {
  /** Charges one frame to the holder of `tat` (ms); returns the verdict and the new tat. */
  charge(tat: number, now: number): { verdict: FrameVerdict; tat: number };
  /** Seconds until a socket `ahead` ms ahead of its rate is within budget again (≥ 1). */
  waitSeconds(tat: number, now: number): number;
}

export function createFrameBudget(framesPerSecond: number, burst: number): FrameBudget {
  const interval = 1000 / framesPerSecond;
  const tolerance = burst * interval;
  const result = { verdict: FrameVerdict.Ok as FrameVerdict, tat: 0 };
  return {
    charge(tat, now) {
      const before = Math.max(tat, now) - now;
      const ahead = before + interval;
      result.tat = now + ahead;
      if (ahead <= tolerance) result.verdict = FrameVerdict.Ok;
      else if (ahead <= 2 * tolerance) result.verdict = before <= tolerance ? FrameVerdict.FirstDrop : FrameVerdict.Drop;
      else result.verdict = before <= 2 * tolerance ? FrameVerdict.Close : FrameVerdict.Closing;
      return result;
    },
    waitSeconds(tat, now) {
      return Math.max(1, Math.ceil((tat - now - tolerance) / 1000));
    },
  };
}
