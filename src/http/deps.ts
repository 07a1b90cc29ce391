import type { Logger } from 'pino';
import type { AppRegistry } from '../apps/registry';
import type { CacheChannels } from '../channels/cache';
import type { ChannelDirectory } from '../channels/directory';
import type { Publisher } from '../channels/publisher';
import type { Config } from '../config/types';
import type { MetricsSink } from '../metrics/types';
import type { RateLimiter } from '../ratelimit/types';
import type { PublishHooks } from '../hooks/publish';
import type { RestHistory } from '../history/rest';
import type { IdemReply, IdemRoute } from '../history/idempotency';
import type { Tracing } from '../tracing/tracer';

/** What the HTTP API needs, built once in shard/worker.ts. */
export interface ApiDeps {
  config: Config;
  apps: AppRegistry;
  /** Every API event goes out through it (channels/publisher.ts). */
  publisher: Publisher;
  /** Channel questions (info, list, members) and terminate_connections (channels/directory.ts). */
  directory: ChannelDirectory;
  log: Logger;
  metrics: MetricsSink;
  /** Rate limits of the limited endpoints (see http/ratelimit.ts). */
  limiter: RateLimiter;
  /** Cache channels: null (or absent) with cache.driver `none` (channels/cache.ts). */
  cache?: CacheChannels | null;
  /** In a cluster: whether the adapter's backend is reachable (absent: a single node). */
  clusterUp?: () => boolean;
  /** In a cluster: whether the backend's publisher is past half its backlog cap (API publishes answer 503, nothing delivered). */
  clusterBusy?: () => boolean;
  /** In a cluster with adapter.when_down refuse: whether the backend is down (API publishes answer 503, nothing delivered). */
  clusterDown?: () => boolean;
  /** cache.driver redis / redis-cluster: whether its Redis is reachable (absent: no shared cache). */
  cacheUp?: () => boolean;
  /** app_manager.driver postgres, mysql, dynamodb: whether the app store's last read succeeded (absent: array). */
  appStoreUp?: () => boolean;
  /** history.driver redis / redis-cluster: whether its Redis can number and deliver now (absent: the memory driver). */
  historyUp?: () => boolean;
  /** Backend publish hook (hooks/publish.ts); null (or absent) when no app has hooks. */
  hooks?: PublishHooks | null;
  /** REST history (history/rest.ts); absent: the route answers 404 like an unknown route. */
  history?: RestHistory;
  /**
   * Idempotent publish: the key's owner shard keeps the first answer (history/idempotency.ts),
   * or Redis with a redis / redis-cluster adapter (history/idempotency-redis.ts), or a NATS
   * JetStream key-value bucket with a nats adapter (history/idempotency-nats.ts).
   */
  idempotency?: {
    claim(app: string, key: string, route: IdemRoute): Promise<IdemReply>;
    done(app: string, key: string, status: number, body: unknown, route: IdemRoute): void;
    release(app: string, key: string): void;
  };
  /** OpenTelemetry traces (tracing/tracer.ts); null or absent: off. */
  tracing?: Tracing | null;
  /** True once the shard is shutting down: answers close their connection. */
  stopping(): boolean;
  /** A paced drain is under way (shard/drain.ts): /up answers 503. */
  draining?(): boolean;
}
