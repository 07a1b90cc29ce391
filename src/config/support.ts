// Options the config accepts (they are all in the spec) but that ringcast's design has no
// use for. Setting one is refused at startup with the key named and the reason, rather
// than silently running without it. (Every option of the spec's own parts is built.)

import { defaultConfig } from './defaults';
import type { Config } from './types';
import { ConfigError, type ConfigIssue } from './checker';

export function unsupportedIssues(c: Config): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  // Options of other servers' designs that ringcast's does not have: refused with the reason
  // rather than accepted and ignored.
  const never = (key: string, why: string) => issues.push({ key, message: `${key}: ${why}` });
  const d = defaultConfig();
  const oneConnection = 'ringcast keeps one command and one subscriber connection per backend and process: ' +
    'one connection is what keeps a node\'s publishes in order, so it has no connection pool to size';
  if (c.database.pooling.enabled) never('database.pooling.enabled', oneConnection);
  if (c.database.pooling.min !== d.database.pooling.min) never('database.pooling.min', oneConnection);
  if (c.database.pooling.max !== d.database.pooling.max) never('database.pooling.max', oneConnection);
  if (c.database.redis.pool_min !== d.database.redis.pool_min) never('database.redis.pool_min', oneConnection);
  if (c.database.redis.pool_max !== d.database.redis.pool_max) never('database.redis.pool_max', oneConnection);
  if (c.adapter.buffer_multiplier_per_cpu !== d.adapter.buffer_multiplier_per_cpu) {
    never('adapter.buffer_multiplier_per_cpu', 'the adapter has no per-CPU buffer: each publish goes to the backend connection at once, ' +
      'and while the backend is down it is dropped and counted (adapter_errors_total), never queued');
  }
  return issues;
}

/** Throws a ConfigError naming every option set that this build cannot honour. */
export function assertSupported(c: Config): void {
  const issues = unsupportedIssues(c);
  if (issues.length > 0) throw ConfigError.fromIssues(issues);
}
