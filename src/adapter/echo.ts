// The node's own heartbeat as a probe of its transport. Every backend hands a node its own
// publishes back (transport.ts), so a heartbeat sent while the backend says it is up and
// not back within ECHO_TIMEOUT_MS means the node is deaf: connected, and not receiving
// what is published on its subjects. A client library can be left so: ioredis only logs a
// resubscribe that Redis refused after a reconnect (NOPERM while an ACL denied the
// channel), and a Redis Cluster's sharded subscribers have known states that never
// subscribe again. A deaf node hears neither the other nodes' publishes nor their
// heartbeats, so it would stay cut off until restarted; instead its transport is renewed
// (Transport.renew: new connections, every subject subscribed anew), counted in
// cluster_transport_renewals_total and logged.
//
// The check runs every ECHO_CHECK_MS and acts on the second check in a row that finds the
// probe overdue: after an event-loop stall the timers run before the socket is read, and
// the echo may be waiting there.

export const ECHO_TIMEOUT_MS = 5000;
export const ECHO_CHECK_MS = 1000;

export interface EchoWatchDeps {
  isUp(): boolean;
  /** Renews the transport; resolves once every subject is subscribed again. */
  renew(): Promise<void>;
  /** Sends a heartbeat (a probe); false when it could not be sent. */
  probe(): boolean;
  /** The probe sent `overdueMs` ago has not come back: about to renew. */
  onDeaf(overdueMs: number): void;
  onRenewFailed(err: unknown): void;
  now?: () => number;
}

export class EchoWatch {
  /** When the first heartbeat since the last echo was sent (null: none waiting). */
  private sentAt: number | null = null;
  private suspect = false;
  private renewing = false;
  private readonly now: () => number;

  constructor(private readonly deps: EchoWatchDeps) {
    this.now = deps.now ?? Date.now;
  }

  /** A heartbeat of this node went out. */
  sent(): void {
    if (this.sentAt === null) this.sentAt = this.now();
  }

  /** A heartbeat of this node came back. */
  echoed(): void {
    this.sentAt = null;
    this.suspect = false;
  }

  /** The backend went down or came back: what was sent before says nothing now. */
  reset(): void {
    this.echoed();
  }

  check(): void {
    const sentAt = this.sentAt;
    if (this.renewing || !this.deps.isUp() || sentAt === null || this.now() - sentAt < ECHO_TIMEOUT_MS) {
      this.suspect = false;
      return;
    }
    if (!this.suspect) {
      this.suspect = true;
      return;
    }
    this.reset();
    this.renewing = true;
    this.deps.onDeaf(this.now() - sentAt);
    this.deps.renew().then(
      () => {
        this.renewing = false;
        // a probe of the new connections (their coming up sends one too)
        if (this.deps.isUp() && this.deps.probe()) this.sent();
      },
      (err: unknown) => {
        this.renewing = false;
        this.deps.onRenewFailed(err);
      },
    );
  }
}
