// The history store factory of the memory driver (history.driver memory): the store behind
// HistoryStore (types.ts) that each owner shard keeps. The redis and redis-cluster drivers
// number and keep in Redis without an owner shard (history/redis.ts, shard/history.ts).

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
        maxChannels: config.history.max_channels_per_shard,
        events: {
          evicted: (app, messages) => metrics.inc('history_evictions_total', { app_id: app }, messages),
          forgotten: (app) => metrics.inc('history_channels_forgotten_total', { app_id: app }),
        },
      });
    default:
      throw new Error(`history.driver ${config.history.driver} has no owner-shard store (history/redis.ts numbers in Redis)`);
  }
}
