// Errors the bus raises; each carries a stable code (callers map them to HTTP 503).

export class BusFullError extends Error {
  readonly code = 'RC_ERR_BUS_FULL';
  constructor(to: number) {
    super(`internal queue to thread ${to} is full`);
  }
}

export class BusTimeoutError extends Error {
  readonly code = 'RC_ERR_BUS_TIMEOUT';
  constructor(to: number, type: string) {
    super(`thread ${to} did not answer ${type} in time`);
  }
}

/** The peer was restarted (see Bus.rewire) before it answered: it never will. Answered like a timeout (503). */
export class BusPeerRestartedError extends BusTimeoutError {
  readonly peerRestarted = true;
  constructor(to: number, type: string) {
    super(to, type);
    this.message = `thread ${to} was restarted before it answered ${type}`;
  }
}
