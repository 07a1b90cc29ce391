// NATS core pub/sub as the cluster transport (the official `nats` client). One connection
// both publishes and subscribes; NATS keeps per-publisher order on a subject. The client
// reconnects by itself forever and re-creates the subscriptions; while it is disconnected
// a publish is refused at once (the client would otherwise buffer without a bound), and
// so is one past NATS_MAX_PENDING_BYTES held for a server that does not read (hung).

import type { ConnectionOptions, NatsConnection, Subscription } from 'nats';
import type { Config } from '../config/types';
import { AdapterUnavailable, StateCell, withTimeout, type Transport } from './transport';

type NatsConfig = Config['adapter']['nats'];

/**
 * The most bytes the client may hold for the server (its outbound buffer and its socket's)
 * before a publish is refused; past half of it the shards answer API publishes 503
 * (primary/cluster.ts, Transport.backlog). A server that takes publishes drains them within
 * milliseconds: only a hung or saturated one fills it.
 */
export const NATS_MAX_PENDING_BYTES = 8 * 1024 * 1024;

/** The client's internals read for pending(): nats 2.x's protocol handler and its Node socket. */
interface NatsInternals {
  protocol?: { outbound?: { size(): number }; transport?: { socket?: { writableLength?: number } } };
}

/**
 * The options of every NATS connection of ringcast (the transport here, the idempotency
 * window's in history/idempotency-nats.ts): adapter.nats's servers and credentials, a
 * reconnect that never gives up, and a dead server noticed within two 2 s pings.
 */
export function natsConnectOptions(cfg: NatsConfig, name: string, timeoutMs: number): ConnectionOptions {
  return {
    servers: cfg.servers,
    user: cfg.user ?? undefined,
    pass: cfg.password ?? undefined,
    token: cfg.token ?? undefined,
    name,
    timeout: timeoutMs,
    reconnect: true,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    reconnectJitter: 100,
    pingInterval: 2000,
    maxPingOut: 2,
  };
}

class NatsTransport implements Transport {
  readonly name = 'nats' as const;
  /** Per publisher only (transport.ts). */
  readonly ordered = false;
  readonly where: string;
  private nc: NatsConnection | null = null;
  private readonly state = new StateCell();
  private closed = false;
  private readonly subs = new Map<string, Subscription>();

  constructor(private readonly cfg: NatsConfig) {
    this.where = cfg.servers.join(', ');
  }

  async connect(timeoutMs: number): Promise<void> {
    // loaded here, not at start: a process without a NATS adapter never loads the client
    const { connect, Events } = await import('nats');
    const nc = await withTimeout(connect(natsConnectOptions(this.cfg, 'ringcast', timeoutMs)), timeoutMs, this).catch((err: Error) => {
      throw err instanceof AdapterUnavailable ? err : new AdapterUnavailable('nats', this.where, err.message);
    });
    this.nc = nc;
    this.state.set(true);
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === Events.Disconnect) this.state.set(false);
        else if (s.type === Events.Reconnect) this.state.set(true);
      }
    })();
    void nc.closed().then(() => this.state.set(false));
  }

  /** Bytes the client holds for the server: its outbound buffer and its socket's. */
  pending(): number {
    const p = (this.nc as unknown as NatsInternals | null)?.protocol;
    return (p?.outbound?.size() ?? 0) + (p?.transport?.socket?.writableLength ?? 0);
  }

  backlog(): number {
    if (!this.nc || !this.state.get()) return 0;
    return this.pending() / NATS_MAX_PENDING_BYTES;
  }

  publish(subject: string, data: Uint8Array): boolean {
    if (!this.nc || !this.state.get()) return false;
    // a hung server: the client would buffer without a bound until its pings time out
    if (this.pending() >= NATS_MAX_PENDING_BYTES) return false;
    try {
      this.nc.publish(subject, data);
      return true;
    } catch {
      return false; // closed or draining
    }
  }

  subscribe(subject: string, handler: (data: Uint8Array) => void): Promise<void> {
    if (!this.nc) return Promise.reject(new Error('nats transport: subscribe before connect'));
    this.subs.get(subject)?.unsubscribe();
    this.subs.set(subject, this.nc.subscribe(subject, { callback: (err, msg) => { if (!err) handler(msg.data); } }));
    // the server has the subscription once it answers the PING behind it: one PING for
    // the subscriptions made in one turn (a storm of first subscribers of buckets)
    return this.flushSoon();
  }

  private flushing: Promise<void> | null = null;

  private flushSoon(): Promise<void> {
    if (this.flushing) return this.flushing;
    const nc = this.nc!;
    this.flushing = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      this.flushing = null;
      return nc.flush();
    });
    return this.flushing;
  }

  async unsubscribe(subject: string): Promise<void> {
    const sub = this.subs.get(subject);
    if (!sub) return;
    this.subs.delete(subject);
    sub.unsubscribe();
  }

  isUp(): boolean {
    return this.state.get();
  }

  onState(listener: (up: boolean) => void): void {
    this.state.on(listener);
  }

  async close(): Promise<void> {
    if (this.closed || !this.nc) return;
    this.closed = true;
    // flush first: a last message (the cluster's `bye`) would otherwise be dropped
    if (this.state.get()) await withTimeout(this.nc.flush(), 1000, this).catch(() => undefined);
    await this.nc.close().catch(() => undefined);
  }
}

export function createNatsTransport(cfg: NatsConfig): Transport {
  return new NatsTransport(cfg);
}
