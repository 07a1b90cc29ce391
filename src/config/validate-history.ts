// History, rewind, recovery and idempotent publish (PROTOCOL.md "History, rewind and
// recovery"): the config keys of this feature in one block, so that they port as one piece
// (global `history`, `idempotency`; per app `channel_history`).

import { isMapping, suggest, type Checker } from './checker';
import type { ChannelHistorySetting, HistoryConfig, IdempotencyConfig } from './types';

const DRIVERS = ['memory', 'redis', 'redis-cluster'] as const;
const CHANNEL_FIELDS = ['size', 'ttl', 'rewind'];
/** A channel's `size` upper bound: a replay or REST page reads at most this many from one channel. */
export const MAX_HISTORY_SIZE = 100_000;

export function historyDefaults(): { history: HistoryConfig; idempotency: IdempotencyConfig } {
  return {
    history: { driver: 'memory', meta_ttl: 86_400, max_recover: 1000, memory_budget_mb: 256 },
    idempotency: { window_seconds: 120, max_keys: 100_000 },
  };
}

export function validateHistoryGlobal(c: Checker, g: (p: string) => unknown): { history: HistoryConfig; idempotency: IdempotencyConfig } {
  const driver = c.oneOf('history.driver', g('history.driver'), DRIVERS);
  if (driver === 'redis' || driver === 'redis-cluster') {
    c.fail('history.driver', 'must be memory: the redis and redis-cluster history drivers are not in this build of ringcast', driver);
  }
  return {
    history: {
      driver,
      meta_ttl: c.int('history.meta_ttl', g('history.meta_ttl'), 1),
      max_recover: c.int('history.max_recover', g('history.max_recover'), 1, { max: MAX_HISTORY_SIZE }),
      memory_budget_mb: c.int('history.memory_budget_mb', g('history.memory_budget_mb'), 1, { max: 1024 * 1024 }),
    },
    idempotency: {
      window_seconds: c.int('idempotency.window_seconds', g('idempotency.window_seconds'), 1, { max: 86_400 }),
      max_keys: c.int('idempotency.max_keys', g('idempotency.max_keys'), 1, { max: 10_000_000 }),
    },
  };
}

/** An app's `channel_history`: channel pattern → {size, ttl, rewind}. */
export function validateChannelHistory(c: Checker, key: string, v: unknown): Record<string, ChannelHistorySetting> {
  if (v === undefined || v === null) return {};
  if (!isMapping(v)) {
    c.fail(key, 'must be a mapping of channel pattern to {size, ttl, rewind}', v);
    return {};
  }
  const out: Record<string, ChannelHistorySetting> = {};
  for (const [pattern, s] of Object.entries(v)) {
    const pk = `${key}.${pattern}`;
    if (!/^(\*|\*?[^*\s]+|[^*\s]+\*)$/.test(pattern)) {
      c.fail(pk, "has an invalid pattern: use an exact channel name, 'prefix-*', '*-suffix' or '*'", undefined, false);
    }
    if (!isMapping(s)) {
      c.fail(pk, 'must be a mapping {size, ttl, rewind}', s);
      continue;
    }
    for (const f of Object.keys(s)) {
      if (!CHANNEL_FIELDS.includes(f)) c.fail(`${pk}.${f}`, `is not a known history setting${suggest(f, CHANNEL_FIELDS)}`, undefined, false);
    }
    const size = c.int(`${pk}.size`, s.size, 1, { max: MAX_HISTORY_SIZE });
    const ttl = c.int(`${pk}.ttl`, s.ttl, 1, { rule: 'must be a positive integer (seconds)' });
    const rewind = s.rewind === undefined ? 0 : c.int(`${pk}.rewind`, s.rewind, 0, { max: MAX_HISTORY_SIZE });
    if (c.ok(`${pk}.size`, `${pk}.rewind`) && rewind > size) c.fail(`${pk}.rewind`, `must be ≤ size (${size})`, rewind);
    out[pattern] = { size, ttl, rewind };
  }
  return out;
}
