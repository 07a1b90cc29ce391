// The rules that tie several keys together (or look outside the config, like a readable
// PEM file): run after the schema check (issues.ts) on the tree decoded as far as it is
// valid, each guarded by `c.ok(...)` so a key that already failed is not judged again.
// A rule on one key alone belongs in schema.ts instead.

import { accessSync, constants as fsc, statSync } from 'node:fs';
import type { Checker } from './checker';
import { hookCaRule } from './hooks';
import type { GlobalConfig } from './schema';

/** The rules below and in apps.ts / support.ts, one line each (docs/configuration.md). */
export const RULES: readonly string[] = [
  '`ssl.cert_path` and `ssl.key_path` name readable PEM files when `ssl.enabled` is true.',
  '`ssl.redirect_http` needs `ssl.enabled: true`, and then `ssl.http_port` differs from `port`.',
  '`log.colors_enabled` applies to `log.output_format: human` only.',
  '`metrics.port` differs from `port` when `metrics.enabled` is true; a wildcard `metrics.host` (0.0.0.0, ::) needs `metrics.token`.',
  '`console.port` differs from `port` and, with metrics on, from `metrics.port`; `console.token` has at least 16 characters, and is set when `console.enabled` is true unless `console.allow_app_secret` is true.',
  '`adapter.cluster_health.heartbeat_interval_ms` ≤ `node_timeout_ms` / 3 when cluster health is enabled.',
  '`database.redis_cluster.nodes` lists at least one node when `adapter.driver`, `cache.driver`, `rate_limiter.driver` or `history.driver` is redis-cluster; `adapter.nats.servers` lists at least one server when `adapter.driver` is nats.',
  '`adapter.buckets` is a power of two.',
  '`history.driver` is redis or redis-cluster when `adapter.driver` is not local and an app has `channel_history`.',
  '`delta_compression.cluster_coordination` needs `adapter.driver` redis, redis-cluster or nats.',
  '`database.redis.pool_min` ≤ `database.redis.pool_max`; `database.pooling.min` ≤ `database.pooling.max`.',
  "`cors.origin` does not contain '*' when `cors.credentials` is true (browsers reject it).",
  '`bus.max_spill_bytes` ≥ 2 × `event_limits.max_payload_in_kb` KiB, so that the largest event can queue.',
  'An app\'s `channel_history` rewind ≤ size.',
  '`hook_client.ca_path` names a readable PEM file of CA certificates, or is null.',
  '`limits.http_body_bytes_in_flight` ≥ `http.request_limit_in_mb` MiB, so that the largest request can be read.',
  '`webhooks.retry.initial_delay_ms` ≤ `webhooks.retry.max_delay_ms`; `webhooks.signature_header` differs from `webhooks.key_header` (in any case).',
  'Apps: ids and keys are unique; webhook header names are HTTP header names and their values hold no CR, LF or NUL; a `lambda://` URL names a function ARN; `app_manager.driver: memory` is refused.',
  'Refused when changed from the default (src/config/support.ts): `database.pooling.*`, `database.redis.pool_min`, `database.redis.pool_max`, `adapter.buffer_multiplier_per_cpu`.',
];

/** History channels in a cluster: one store for every node (memory is per process). */
export function clusterHistoryRule(c: Checker, cfg: GlobalConfig, apps: readonly { channel_history?: unknown }[]): void {
  if (cfg.adapter.driver === 'local' || cfg.history.driver !== 'memory' || !c.ok('adapter.driver', 'history.driver')) return;
  if (!apps.some((a) => a.channel_history && Object.keys(a.channel_history).length > 0)) return;
  c.fail('history.driver', `must be redis or redis-cluster with adapter.driver ${cfg.adapter.driver} and apps with channel_history: memory numbers and keeps each node's own history, so other nodes' events would miss recovering subscriptions (set history.driver: redis or redis-cluster)`, 'memory');
}

/** Addresses that listen on every interface. */
const WILDCARD: ReadonlySet<string> = new Set(['0.0.0.0', '::', '[::]', '*', '']);

export function globalRules(c: Checker, cfg: GlobalConfig): void {
  if (cfg.ssl.enabled && c.ok('ssl.enabled')) {
    for (const k of ['cert_path', 'key_path'] as const) {
      const p = cfg.ssl[k];
      if (!c.ok(`ssl.${k}`)) continue;
      const why = unreadable(p);
      if (why) c.fail(`ssl.${k}`, `must name a readable PEM file when ssl.enabled is true (${why})`, p);
    }
    if (cfg.ssl.redirect_http && cfg.ssl.http_port === cfg.port && cfg.port !== 0) {
      c.fail('ssl.http_port', 'must differ from port when ssl.redirect_http is true', cfg.ssl.http_port);
    }
  }
  if (cfg.ssl.redirect_http === true && cfg.ssl.enabled !== true) {
    c.fail('ssl.redirect_http', 'needs ssl.enabled: true (it redirects plain HTTP to the HTTPS port)', true);
  }
  if (cfg.log.colors_enabled === true && cfg.log.output_format !== 'human') {
    c.fail('log.colors_enabled', 'applies to log.output_format human only (JSON lines carry no colour)', true);
  }
  if (cfg.metrics.enabled === true && cfg.metrics.port === cfg.port && cfg.port !== 0) {
    c.fail('metrics.port', 'must differ from port when metrics.enabled is true', cfg.metrics.port);
  }
  if (cfg.metrics.enabled === true && c.ok('metrics.host', 'metrics.token') && WILDCARD.has(cfg.metrics.host) && cfg.metrics.token === '') {
    c.fail('metrics.host', 'is a wildcard address: /metrics would be open on every interface without a token; set metrics.token (METRICS_TOKEN), or bind metrics.host to 127.0.0.1 or a private address', cfg.metrics.host);
  }
  if (cfg.console.enabled === true) consoleChecks(c, cfg);
  const h = cfg.adapter.cluster_health;
  const hk = 'adapter.cluster_health.';
  if (h.enabled === true && c.ok(`${hk}heartbeat_interval_ms`, `${hk}node_timeout_ms`) && h.heartbeat_interval_ms * 3 > h.node_timeout_ms) {
    c.fail(`${hk}heartbeat_interval_ms`, `must be ≤ node_timeout_ms / 3 (node_timeout_ms is ${h.node_timeout_ms})`, h.heartbeat_interval_ms);
  }
  const usesCluster = ([['adapter.driver', cfg.adapter.driver], ['cache.driver', cfg.cache.driver], ['rate_limiter.driver', cfg.rate_limiter.driver], ['history.driver', cfg.history.driver]] as const)
    .filter(([, d]) => d === 'redis-cluster').map(([k]) => k);
  if (usesCluster.length > 0 && c.ok('database.redis_cluster.nodes') && cfg.database.redis_cluster.nodes.length === 0) {
    c.fail('database.redis_cluster.nodes', `must list at least one host:port when ${usesCluster.join(', ')} is redis-cluster (or set REDIS_CLUSTER_NODES)`, undefined, false);
  }
  if (cfg.adapter.driver === 'nats' && c.ok('adapter.nats.servers') && cfg.adapter.nats.servers.length === 0) {
    c.fail('adapter.nats.servers', 'must list at least one server when adapter.driver is nats (or set NATS_SERVERS)', undefined, false);
  }
  if (c.ok('adapter.buckets') && (cfg.adapter.buckets & (cfg.adapter.buckets - 1)) !== 0) {
    c.fail('adapter.buckets', 'must be a power of two (1, 2, 4, … 65536)', cfg.adapter.buckets);
  }
  if (cfg.delta_compression.cluster_coordination === true && cfg.adapter.driver === 'local') {
    c.fail('delta_compression.cluster_coordination', 'needs adapter.driver redis, redis-cluster or nats (it is local)', undefined, false);
  }
  for (const [lo, hi] of [['database.redis.pool_min', 'database.redis.pool_max'], ['database.pooling.min', 'database.pooling.max']] as const) {
    const [a, b] = [lo, hi].map((k) => k.split('.').reduce<unknown>((o, p) => (o as Record<string, unknown>)[p], cfg)) as number[];
    if (c.ok(lo, hi) && a > b) c.fail(lo, `must be ≤ ${hi} (${b})`, a);
  }
  if (cfg.cors.credentials === true && cfg.cors.origin.includes('*')) {
    c.fail('cors.origin', "must not contain '*' when cors.credentials is true (browsers reject a wildcard origin with credentials); list the allowed origins", cfg.cors.origin);
  }
  const spillFloor = 2 * cfg.event_limits.max_payload_in_kb * 1024;
  if (c.ok('bus.max_spill_bytes', 'event_limits.max_payload_in_kb') && cfg.bus.max_spill_bytes < spillFloor) {
    // a publish frame bigger than half a ring always passes through the spill queue
    c.fail('bus.max_spill_bytes', `must be ≥ 2 × event_limits.max_payload_in_kb KiB (${spillFloor}) so that the largest event can queue`, cfg.bus.max_spill_bytes);
  }
  const bodyMax = cfg.http.request_limit_in_mb * 1024 * 1024;
  if (c.ok('limits.http_body_bytes_in_flight', 'http.request_limit_in_mb') && cfg.limits.http_body_bytes_in_flight < bodyMax) {
    c.fail('limits.http_body_bytes_in_flight', `must be ≥ http.request_limit_in_mb MiB (${bodyMax}) so that the largest request can be read`, cfg.limits.http_body_bytes_in_flight);
  }
  hookCaRule(c, cfg.hook_client.ca_path);
  const r = cfg.webhooks.retry;
  if (c.ok('webhooks.retry.initial_delay_ms', 'webhooks.retry.max_delay_ms') && r.initial_delay_ms > r.max_delay_ms) {
    c.fail('webhooks.retry.initial_delay_ms', `must be ≤ webhooks.retry.max_delay_ms (${r.max_delay_ms})`, r.initial_delay_ms);
  }
  if (c.ok('webhooks.key_header', 'webhooks.signature_header') && cfg.webhooks.key_header.toLowerCase() === cfg.webhooks.signature_header.toLowerCase()) {
    c.fail('webhooks.signature_header', 'must differ from webhooks.key_header', cfg.webhooks.signature_header);
  }
}

/** The console never shares the public port (nor the metrics one), and a token is not guessable by length. */
function consoleChecks(c: Checker, cfg: GlobalConfig): void {
  const { port, token } = cfg.console;
  if (c.ok('console.port') && port !== 0 && port === cfg.port) {
    c.fail('console.port', 'must differ from port: the console is never served on the public port', port);
  }
  if (c.ok('console.port') && port !== 0 && cfg.metrics.enabled === true && port === cfg.metrics.port) {
    c.fail('console.port', 'must differ from metrics.port (each has its own listener)', port);
  }
  if (c.ok('console.token') && token !== null && token.length < 16) {
    c.fail('console.token', 'must be at least 16 characters (or null with console.allow_app_secret: true)', undefined, false);
  }
  if (c.ok('console.token', 'console.allow_app_secret') && token === null && cfg.console.allow_app_secret !== true) {
    c.fail('console.token', 'is needed when console.enabled is true (CONSOLE_TOKEN; or set console.allow_app_secret: true to log in with app secrets)', null);
  }
}

function unreadable(path: string): string | null {
  if (path === '') return 'not set';
  try {
    accessSync(path, fsc.R_OK);
    return statSync(path).isFile() ? null : 'not a file';
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? 'unreadable';
  }
}
