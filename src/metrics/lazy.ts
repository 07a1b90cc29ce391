// A thread's Prometheus registry, with prom-client loaded only when metrics are on: loading
// it (with the @opentelemetry/api it requires) takes each thread about 0.1 s of CPU at start.

import type { PromMetrics } from './registry';

/** A registry for this thread when `metrics.enabled`, else null (nothing loaded). */
export function threadMetrics(metrics: { enabled: boolean; prefix: string }): PromMetrics | null {
  if (!metrics.enabled) return null;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const registry = require('./registry') as typeof import('./registry');
  return new registry.PromMetrics(metrics.prefix);
}
