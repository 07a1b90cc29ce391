// The startup line: where the server listens and what it runs with, for the operator.
// Apps are listed by id (never a key's secret); the public URL uses `domain`.

import type { Config } from '../config/types';

export interface Listening {
  port: number;
  metricsPort: number | null;
  redirectPort: number | null;
}

export function startupSummary(config: Config, l: Listening): Record<string, unknown> {
  const tls = config.ssl.enabled;
  const addresses: string[] = [`${tls ? 'https' : 'http'}://${config.host}:${l.port} (API, ${tls ? 'wss' : 'ws'}://…/app/<key>)`];
  if (config.unix_socket.enabled) addresses.push(`unix:${config.unix_socket.path} (shard 0)`);
  if (l.redirectPort !== null) addresses.push(`http://${config.host}:${l.redirectPort} (301 to https)`);
  if (l.metricsPort !== null) addresses.push(`http://${config.metrics.host}:${l.metricsPort}/metrics`);
  return {
    addresses,
    public_url: `${tls ? 'wss' : 'ws'}://${config.domain}:${l.port}/app/<key>`,
    shards: config.workers,
    adapter: config.adapter.driver,
    drivers: {
      cache: config.cache.driver,
      queue: config.queue.driver,
      rate_limiter: config.rate_limiter.enabled ? config.rate_limiter.driver : 'off',
      metrics: config.metrics.enabled ? config.metrics.driver : 'off',
    },
    apps: config.apps.map((a) => (a.enabled ? a.id : `${a.id} (disabled)`)),
  };
}
