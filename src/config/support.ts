// Options the config accepts (they are all in the spec) but whose engine part is not in
// this build yet. Setting one is refused at startup with the key named, rather than
// silently running without it (e.g. a redis adapter quietly behaving as a single node).

import { defaultConfig } from './defaults';
import type { Config } from './types';
import { ConfigError, type ConfigIssue } from './validate';

export function unsupportedIssues(c: Config): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const no = (key: string, what: string) =>
    issues.push({ key, message: `${key}: ${what} is not available in this build of ringcast yet` });
  if (c.adapter.driver !== 'local') no('adapter.driver', `the ${c.adapter.driver} adapter (multi-node)`);
  if (c.cache.driver === 'redis' || c.cache.driver === 'redis-cluster') no('cache.driver', `the ${c.cache.driver} cache driver`);
  if (c.queue.driver !== 'sync') no('queue.driver', `the ${c.queue.driver} queue driver`);
  if (c.tag_filtering.enabled) no('tag_filtering.enabled', 'tag filtering');
  // Every Redis client is one pipelined ioredis connection per thread: there is no pool to size.
  const pool = defaultConfig().database;
  if (c.database.pooling.enabled) no('database.pooling.enabled', 'a Redis connection pool (each thread uses one pipelined connection)');
  for (const [key, v, d] of [
    ['database.pooling.min', c.database.pooling.min, pool.pooling.min], ['database.pooling.max', c.database.pooling.max, pool.pooling.max],
    ['database.redis.pool_min', c.database.redis.pool_min, pool.redis.pool_min], ['database.redis.pool_max', c.database.redis.pool_max, pool.redis.pool_max],
  ] as const) {
    if (v !== d) no(key, 'sizing a Redis connection pool (each thread uses one pipelined connection)');
  }
  c.apps.forEach((app, i) => {
    if (app.webhooks.length > 0) no(`apps[${i}].webhooks`, 'webhook delivery');
  });
  return issues;
}

/** Throws a ConfigError naming every option set that this build cannot honour. */
export function assertSupported(c: Config): void {
  const issues = unsupportedIssues(c);
  if (issues.length > 0) throw ConfigError.fromIssues(issues);
}
