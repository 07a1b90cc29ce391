// The built-in defaults, read off the schema (schema.ts: each key's `default`).
// `defaultConfig()` returns a fresh, mutable tree (everything but `apps`) that the loader
// merges config.yaml, env and overrides into. An app's limits default to global values
// (`x-default-from` in AppSchema), resolved in apps.ts; `appDefaults()` lists them.

import { AppSchema, ConfigFileSchema, GlobalSchema, type AppConfig, type GlobalConfig } from './schema';
import { defaultsOf } from './issues';

export { MAX_WORKERS, WEBHOOK_EVENT_TYPES, type GlobalConfig } from './schema';

export function defaultConfig(): GlobalConfig {
  return defaultsOf(GlobalSchema) as GlobalConfig;
}

/**
 * The raw tree the loader merges into: the global defaults plus the two places apps
 * can be listed. Its shape is also the list of known YAML keys (typo protection).
 */
export function defaultRawTree(): Record<string, unknown> {
  return defaultsOf(ConfigFileSchema) as Record<string, unknown>;
}

export type AppLimitDefaults = Omit<AppConfig, 'id' | 'key' | 'secret'>;

/** Per-app defaults, derived from the (validated) global config. Fresh object each call. */
export function appDefaults(g: GlobalConfig): AppLimitDefaults {
  const out: Record<string, unknown> = {};
  for (const [f, s] of Object.entries(AppSchema.properties) as [string, Record<string, unknown>][]) {
    if (f === 'id' || f === 'key' || f === 'secret') continue;
    const from = s['x-default-from'];
    out[f] = typeof from === 'string' ? from.split('.').reduce<unknown>((o, p) => (o as Record<string, unknown>)[p], g) : structuredClone(s.default);
  }
  return out as AppLimitDefaults;
}
