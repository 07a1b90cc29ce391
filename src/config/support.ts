// Options the config accepts (they are all in the spec) but whose engine part is not in
// this build yet. Setting one is refused at startup with the key named, rather than
// silently running without it (e.g. a redis adapter quietly behaving as a single node).

import type { Config } from './types';
import { ConfigError, type ConfigIssue } from './validate';

export function unsupportedIssues(c: Config): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const no = (key: string, what: string) =>
    issues.push({ key, message: `${key}: ${what} is not available in this build of ringcast yet` });
  if (c.adapter.driver !== 'local') no('adapter.driver', `the ${c.adapter.driver} adapter (multi-node)`);
  if (c.cache.driver === 'redis' || c.cache.driver === 'redis-cluster') no('cache.driver', `the ${c.cache.driver} cache driver`);
  if (c.ssl.redirect_http) no('ssl.redirect_http', 'the HTTP→HTTPS redirect listener');
  if (c.unix_socket.enabled) no('unix_socket.enabled', 'listening on a Unix socket');
  if (c.tag_filtering.enabled) no('tag_filtering.enabled', 'tag filtering');
  return issues;
}

/** Throws a ConfigError naming every option set that this build cannot honour. */
export function assertSupported(c: Config): void {
  const issues = unsupportedIssues(c);
  if (issues.length > 0) throw ConfigError.fromIssues(issues);
}
