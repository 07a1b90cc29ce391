// The cluster-wide idempotency window (docs/protocol.md "Idempotent publish": across nodes with
// a cluster adapter), used instead of the process-wide one (idempotency.ts) when
// adapter.driver is `redis` or `redis-cluster`: every node asks the same Redis, so a retry
// that reaches another node, or another shard, finds the first request's key.
//
// One key per (app, idempotency_key): `<key_prefix>idem:<app, URI-encoded>:<key>`.
//
//   claim    one script: SET NX PX PENDING_MS with a pending marker `P<token>` (this
//            request publishes: 'new'), else the key's value: a pending marker
//            ('pending': 503 retry, never a wait) or the first answer ('done'); either
//            names the route the key was first used on (`P<e|b>…`, the answer's `r`), and
//            a claim on the other route is a 'conflict' (422).
//            Two nodes racing on one key: Redis runs one script at a time, one of them wins.
//   done     a 2xx answer: SET `D<json>` PX window, unless another request holds the key
//            by now (our pending marker lapsed). Retried every DONE_RETRY_MS while the
//            marker would still stand (PENDING_MS), so a short Redis outage after the
//            publish still records the answer.
//   release  anything else (a 503 delivered nothing): delete the key if it still holds
//            our pending marker, so the retry publishes once.
//
// Redis unreachable or slow (a claim waits at most COMMAND_TIMEOUT_MS for a connection,
// a command fails after COMMAND_TIMEOUT_MS when Redis is hung): a claim fails, the request is answered 503 naming Redis
// and nothing is delivered (never a publish that the window did not see). A `done` that
// never reaches Redis leaves the pending marker, which lapses after PENDING_MS; a retry
// after that publishes again: the one case of a second delivery, logged and counted
// (idempotency_errors_total{op="done"}).

import type { Cluster, Redis } from 'ioredis';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Config } from '../config/types';
import type { MetricsSink } from '../metrics/types';
import { COMMAND_TIMEOUT_MS, redisClient, redisClusterClient, redisClusterWhere, redisFailure, redisWhere, whenReady } from '../redis/client';
import { PENDING_MS, idempotencyDown, routeLetter, storedAnswer, storedReply, writeAnswer, type ClusterIdempotency } from './idempotency';

// KEYS[1] key; ARGV[1] pending marker, ARGV[2] its PX. '' = new; else the key's value.
const CLAIM = `if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return '' end
return redis.call('GET', KEYS[1])`;
// KEYS[1] key; ARGV[1] our pending marker, ARGV[2] the answer, ARGV[3] the window's PX.
const DONE = `local v = redis.call('GET', KEYS[1])
if v == false or v == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 end
return 0`;
// KEYS[1] key; ARGV[1] our pending marker.
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

type Scripted = (Redis | Cluster) & {
  idemClaim(key: string, marker: string, px: number): Promise<string>;
  idemDone(key: string, marker: string, answer: string, px: number): Promise<number>;
  idemRelease(key: string, marker: string): Promise<number>;
};

export interface RedisIdempotencyDeps {
  config: Pick<Config, 'adapter' | 'database' | 'idempotency'>;
  log: Logger;
  metrics: MetricsSink;
}

/** The window's Redis key of an app's idempotency_key (the app id encoded: it may hold ':'). */
export function idemKey(prefix: string, app: string, key: string): string {
  return `${prefix}idem:${encodeURIComponent(app)}:${key}`;
}

export function createRedisIdempotency(deps: RedisIdempotencyDeps): ClusterIdempotency {
  const { config, log, metrics } = deps;
  const role = { name: 'idempotency', queue: false, commandTimeoutMs: COMMAND_TIMEOUT_MS };
  let client: Redis | Cluster;
  let prefix: string;
  let where: string;
  if (config.adapter.driver === 'redis-cluster') {
    const c = config.database.redis_cluster;
    client = redisClusterClient(c, role);
    prefix = c.key_prefix;
    where = redisClusterWhere(c);
  } else {
    const c = config.database.redis;
    client = redisClient(c, role);
    prefix = c.key_prefix;
    where = redisWhere(c);
  }
  client.defineCommand('idemClaim', { numberOfKeys: 1, lua: CLAIM });
  client.defineCommand('idemDone', { numberOfKeys: 1, lua: DONE });
  client.defineCommand('idemRelease', { numberOfKeys: 1, lua: RELEASE });
  const redis = client as Scripted;
  let down = false;
  // ioredis emits 'error' for every failed attempt: without a listener it would kill the thread
  client.on('error', (err: Error) => {
    if (!down) log.warn({ err: err.message, redis: where }, 'idempotency: Redis unreachable; publishes with an idempotency_key are refused (503)');
    down = true;
  });
  client.on('ready', () => {
    if (down) log.info({ redis: where }, 'idempotency: Redis reachable again');
    down = false;
  });

  const windowMs = config.idempotency.window_seconds * 1000;
  /** The pending markers of the claims this shard holds, by app\0key. */
  const markers = new Map<string, string>();
  const failed = (op: 'claim' | 'done' | 'release') => metrics.inc('idempotency_errors_total', { op });

  return {
    async claim(app, key, route = 'events') {
      const marker = 'P' + routeLetter(route) + randomBytes(12).toString('base64url');
      let v: string;
      try {
        // still connecting (a shard just started) or reconnecting: wait as long as a command may take
        if (client.status !== 'ready') await whenReady(client, COMMAND_TIMEOUT_MS, () => new Error(`not connected within ${COMMAND_TIMEOUT_MS} ms`));
        v = await redis.idemClaim(idemKey(prefix, app, key), marker, PENDING_MS);
      } catch (err) {
        failed('claim');
        const why = redisFailure(client) ?? (err as Error).message;
        throw idempotencyDown('Redis', where, why);
      }
      if (v === '') {
        markers.set(app + '\0' + key, marker);
        return { state: 'new' };
      }
      return storedReply(v, route);
    },
    done(app, key, status, body, route = 'events') {
      const id = app + '\0' + key;
      const marker = markers.get(id) ?? '';
      markers.delete(id);
      const answer = storedAnswer(route, status, body);
      writeAnswer(() => redis.idemDone(idemKey(prefix, app, key), marker, answer, windowMs), {
        failed: () => failed('done'),
        lost: (err) => log.error({ err: (err as Error).message, redis: where, app_id: app },
          'idempotency: the answer of a delivered publish never reached Redis; a retry after its pending marker lapses publishes again'),
      });
    },
    release(app, key) {
      const id = app + '\0' + key;
      const marker = markers.get(id);
      markers.delete(id);
      if (marker === undefined) return;
      // lost: the pending marker lapses after PENDING_MS (retries get 503 meanwhile)
      redis.idemRelease(idemKey(prefix, app, key), marker).catch(() => failed('release'));
    },
    close: () => client.quit().then(() => undefined, () => { client.disconnect(); }),
  };
}
