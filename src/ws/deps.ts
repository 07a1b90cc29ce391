import type { Logger } from 'pino';
import type { TemplatedApp } from 'uWebSockets.js';
import type { AppRegistry } from '../apps/registry';
import type { Config } from '../config/types';
import type { ChannelDirectory } from '../channels/directory';
import type { Interest } from '../channels/interest';
import type { BucketGate } from '../channels/bucket-gate';
import type { Publisher } from '../channels/publisher';
import type { CacheChannels } from '../channels/cache';
import type { FilteredSubscriptions } from '../channels/filtered';
import type { ConnectionCounters } from '../channels/counters';
import type { PresenceShadows } from '../channels/rebuild';
import type { MetricsSink } from '../metrics/types';
import type { ShardWebhooks } from '../webhooks/shard';
import type { RateLimiter } from '../ratelimit/types';
import type { Tap } from '../console/tap';
import type { Backpressure } from './backpressure';
import type { Socket, SocketData } from './types';
import type { Watchlists } from './watchlist';
import type { DeltaShard } from '../delta/shard';
import type { WsHooks } from '../hooks/connection';
import type { NumberedSubjects } from '../history/redis-subjects';
import type { HistoryShard } from '../history/shard';

/** What the WebSocket handlers need, built once in shard/worker.ts. */
export interface WsDeps {
  config: Config;
  apps: AppRegistry;
  shardId: number;
  /** Every message to a channel's subscribers goes out through it (channels/publisher.ts). */
  publisher: Publisher;
  /** Subscription notices to, and questions for, the channels' owners (channels/directory.ts). */
  directory: ChannelDirectory;
  /** This shard's bit of interest routing: kept in step with the sockets' subscription records. */
  interest: Interest;
  /** In a cluster: a bucket's first subscriber waits for the node's backend subscription (channels/bucket-gate.ts). */
  buckets?: BucketGate | null;
  counters: ConnectionCounters;
  /** This shard's open sockets by socket_id. */
  sockets: Map<string, Socket>;
  uws: TemplatedApp;
  log: Logger;
  metrics: MetricsSink;
  /** Slow-consumer watch (websocket.max_bytes / max_messages / on_backpressure). */
  backpressure: Backpressure;
  /** The rate limiter; driver `none` also turns off the per-connection window (rate_limiter.websocket). */
  limiter: RateLimiter;
  /** What this shard's clients know of each presence channel (kept for a shard restart: channels/rebuild.ts). */
  shadows?: PresenceShadows;
  /** Cache channels: null (or absent) with cache.driver `none` (channels/cache.ts). */
  cache?: CacheChannels | null;
  /** Watchlists of signed-in sockets (apps with enable_watchlist_events; ws/watchlist.ts). */
  watchlists?: Watchlists;
  /** The live console's event tap (connections open / close); null or absent when the console is off. */
  tap?: Tap | null;
  /** Tag filtering: the filtered subscriptions of this shard (channels/filtered.ts); absent when disabled. */
  filters?: FilteredSubscriptions<Socket> | null;
  /** Webhook reports to the primary (client_event, cache_miss); null (or absent) when no app has webhooks. */
  webhooks?: ShardWebhooks | null;
  /** Delta compression (delta/shard.ts); null (or absent) with delta_compression.enabled false. */
  delta?: DeltaShard<Socket> | null;
  /** Backend hooks (hooks/connection.ts): connect, subscribe, client_event; null (or absent) when no app has hooks. */
  hooks?: WsHooks<Socket, SocketData> | null;
  /** History channels (history/shard.ts): rewind, recover, serial topics; null (or absent) when not wired. */
  history?: HistoryShard | null;
  /** history.driver redis / redis-cluster: the numbered subjects a history channel's subscription holds, by interest (history/redis-subjects.ts). */
  numbered?: NumberedSubjects | null;
  /** True once the shard is shutting down: closing sockets need not tell the owners. */
  stopping(): boolean;
  /**
   * In a cluster with adapter.when_down refuse: why a client event cannot be sent now (the
   * backend is down or not taking publishes), else null; absent when it always can.
   */
  clusterRefuses?: () => string | null;
  /** Next socket_id of this shard. */
  nextSocketId(): string;
  /** Outgoing event name with the configured prefix. */
  out(canonical: string): string;
}
