import type { Logger } from 'pino';
import type { AppRegistry } from '../apps/registry';
import type { ChannelInfo } from '../bus/messages';
import type { CacheChannels } from '../channels/cache';
import type { AppConfig, Config } from '../config/types';
import type { Fanout } from '../shard/fanout';
import type { MetricsSink } from '../metrics/types';
import type { RateLimiter } from '../ratelimit/types';

/** What the HTTP API needs, built once in shard/worker.ts. */
export interface ApiDeps {
  config: Config;
  apps: AppRegistry;
  fanout: Fanout;
  log: Logger;
  metrics: MetricsSink;
  /** Rate limits of the limited endpoints (see http/ratelimit.ts). */
  limiter: RateLimiter;
  /** Cache channels: null (or absent) with cache.driver `none` (channels/cache.ts). */
  cache?: CacheChannels | null;
  /** True once the shard is shutting down: answers close their connection. */
  stopping(): boolean;
  /** Asks the channel's owner shard. */
  channelInfo(app: AppConfig, channel: string): Promise<ChannelInfo>;
  /** Scatter-gather over every shard: occupied channels with this prefix. */
  channelList(app: AppConfig, prefix: string): Promise<[string, number | null][]>;
  /** Closes (4009) every socket signed in as this user, on every shard. Throws BusFullError. */
  terminateUser(app: AppConfig, userId: string): void;
  /** Presence members of a channel as [user_id, user_info]. */
  members(app: AppConfig, channel: string): Promise<[unknown, unknown][]>;
}
