// The history store factory (history.driver): one backend per file behind HistoryStore
// (types.ts). Config validation refuses the drivers that are not in this build, so every
// value that reaches here has a backend.

import type { Config } from '../config/types';
import type { MetricsSink } from '../metrics/types';
import { MemoryHistoryStore } from './memory';
import type { HistoryStore } from './types';

const MIB = 1024 * 1024;

/** This shard's store: memory keeps budget / shards, so the shards' budgets add up to the process's. */
export function createHistoryStore(config: Config, shards: number, metrics: MetricsSink): HistoryStore {
  switch (config.history.driver) {
    case 'memory':
      return new MemoryHistoryStore({
        budgetBytes: Math.floor((config.history.memory_budget_mb * MIB) / shards),
        metaTtlMs: config.history.meta_ttl * 1000,
        events: { evicted: (app, messages) => metrics.inc('history_evictions_total', { app_id: app }, messages) },
      });
    default:
      throw new Error(`history.driver ${config.history.driver} is not in this build of ringcast`);
  }
}
