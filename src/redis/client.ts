// The one Redis client factory of ringcast: every port that talks to Redis (the cluster
// adapter, the rate limiter, the shared cache, the webhook queue) builds its clients
// here, so they share one retry policy, one connect timeout, a command timeout, and one
// way to name the target in logs and errors (never a password).
//
// A role says how a client behaves: `queue` lets commands wait for a connection (a
// subscriber's SUBSCRIBE must; so do the webhook queue's commands); without it a command
// while disconnected fails at once, and so does a retry (maxRetriesPerRequest 0).
// Every client gets a command timeout (a hung server keeps its TCP connection while
// answering nothing) unless its role names none: a blocking consumer's BLMOVE waits on
// purpose.

import type { Cluster, Redis } from 'ioredis';
import type { Config, RedisConfig } from '../config/types';
import { redisTarget, redisWhere } from '../config/redis';

type IORedis = typeof import('ioredis');
let lib: IORedis | null = null;

/**
 * ioredis, loaded when a thread builds its first client: loading it takes a thread 0.1–0.2 s
 * of CPU, and most threads of most configs never talk to Redis.
 */
function ioredis(): IORedis {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (lib ??= require('ioredis') as IORedis);
}

/** A Redis Cluster client (its `nodes()` are the node clients), not a single server's. */
export function isCluster(c: Redis | Cluster): c is Cluster {
  return c.isCluster;
}

export const CONNECT_TIMEOUT_MS = 2000;
/** A command's default time to answer before it fails. */
export const COMMAND_TIMEOUT_MS = 1000;
/** Reconnect after 50 ms, 100 ms, … up to 1 s between attempts; for a server and for each node of a cluster. */
export const retryDelay = (times: number): number => Math.min(50 * times, 1000);

export type RedisClusterConfig = Config['database']['redis_cluster'];

export interface RedisRole {
  /** CLIENT SETNAME: `ringcast-<name>`. */
  name: string;
  queue: boolean;
  /** ms a command may take before it fails; null: no timeout (blocking commands). Default COMMAND_TIMEOUT_MS. */
  commandTimeoutMs?: number | null;
  /** Connect on the first command or connect() rather than at once. */
  lazy?: boolean;
  /**
   * A subscriber whose owner subscribes again on every 'ready' and handles a refusal
   * (false turns ioredis's autoResubscribe off): ioredis's own resubscribe after a
   * reconnect has no error handler, so a refusal (NOPERM: an ACL that denies the channel)
   * would be an unhandled rejection, which ends the process.
   */
  ownResubscribe?: boolean;
}

function commandTimeout(role: RedisRole): { commandTimeout?: number } {
  const ms = role.commandTimeoutMs === undefined ? COMMAND_TIMEOUT_MS : role.commandTimeoutMs;
  return ms === null ? {} : { commandTimeout: ms };
}

/** The last error a client (or, for a cluster, one of its nodes) met, and the config keys of its credentials. */
const failures = new WeakMap<Redis | Cluster, { error: string | null; keys: string }>();

function track<C extends Redis | Cluster>(client: C, keys: string): C {
  const f = { error: null as string | null, keys };
  failures.set(client, f);
  // a Cluster's "Failed to refresh slots cache." carries the node's own error (lastNodeError)
  const note = (err: Error & { lastNodeError?: Error }) => { f.error = err.lastNodeError?.message ?? err.message; };
  client.on('error', note);
  // a Cluster's own 'error' says only "Failed to refresh slots cache."; the node's says why
  if (isCluster(client)) client.on('node error', note);
  client.on('ready', () => { f.error = null; });
  return client;
}

/** Redis's answers to credentials it refuses (requirepass, ACL users, a Sentinel's requirepass). */
const AUTH_REFUSED = /WRONGPASS|NOAUTH|invalid password|invalid username-password|AUTH failed|ERR AUTH/i;

/**
 * Why a client that should be connected is not, for a startup error: the credentials
 * refused (naming the config keys to check), else the last connection error, else null.
 */
export function redisFailure(client: Redis | Cluster): string | null {
  const f = failures.get(client);
  if (!f?.error) return null;
  return AUTH_REFUSED.test(f.error) ? `Redis refused the credentials: check ${f.keys} (${f.error})` : f.error;
}

/** The startup error's text: `cannot reach Redis at <where> within <ms> ms (<why>)`. */
export function redisUnreachable(client: Redis | Cluster, where: string, timeoutMs: number): string {
  const why = redisFailure(client);
  return `cannot reach Redis at ${where} within ${timeoutMs} ms` + (why ? ` (${why})` : '');
}

/** A client for one Redis or a Sentinel-managed master, from `database.redis`. */
export function redisClient(cfg: RedisConfig, role: RedisRole): Redis {
  const keys = cfg.sentinels.length > 0
    ? 'database.redis.sentinel_password (the Sentinels) and database.redis.username / password (the master)'
    : 'database.redis.username / password';
  return track(new (ioredis().Redis)({
    ...redisTarget(cfg),
    enableOfflineQueue: role.queue,
    connectTimeout: CONNECT_TIMEOUT_MS,
    ...commandTimeout(role),
    maxRetriesPerRequest: role.queue ? null : 0,
    retryStrategy: retryDelay,
    connectionName: `ringcast-${role.name}`,
    lazyConnect: role.lazy === true,
    autoResubscribe: role.ownResubscribe !== true,
  }), keys);
}

/** A Redis Cluster client from `database.redis_cluster`; `sharded`: it subscribes with SSUBSCRIBE. */
export function redisClusterClient(cfg: RedisClusterConfig, role: RedisRole & { sharded?: boolean }): Cluster {
  return track(new (ioredis().Cluster)(cfg.nodes, {
    enableOfflineQueue: role.queue,
    shardedSubscribers: role.sharded === true,
    clusterRetryStrategy: retryDelay,
    // Without this a restarted master is only found again through MOVED / a slot refresh.
    clusterNodeRetryStrategy: retryDelay,
    slotsRefreshTimeout: CONNECT_TIMEOUT_MS,
    lazyConnect: role.lazy === true,
    redisOptions: {
      username: cfg.username ?? undefined,
      password: cfg.password ?? undefined,
      connectTimeout: CONNECT_TIMEOUT_MS,
      ...commandTimeout(role),
      maxRetriesPerRequest: role.queue ? null : 0,
      connectionName: `ringcast-${role.name}`,
    },
  }), 'database.redis_cluster.username / password');
}

/** Where a `database.redis` client connects, for logs and errors. */
export { redisWhere };

/** Where a `database.redis_cluster` client connects, for logs and errors. */
export function redisClusterWhere(cfg: RedisClusterConfig): string {
  return `cluster ${cfg.nodes.map((n) => `${n.host}:${n.port}`).join(', ')}`;
}

/**
 * Resolves once an ioredis client is connected; rejects with `unreachable()` after
 * timeoutMs (the startup wait of the rate limiter, the shared cache and the history store).
 */
export function whenReady(client: Redis | Cluster, timeoutMs: number, unreachable: () => Error): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onReady = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      client.off('ready', onReady);
      reject(unreachable());
    }, timeoutMs);
    client.once('ready', onReady);
  });
}
