// Environment variable overrides, declared on the schema (schema.ts `x-env`; names are
// exactly the spec's, plus ours marked `x-env-ours`). Each variable is parsed here,
// strictly, as its key's type reads it: a value that does not parse is a ConfigError
// whose key is the variable name. Range and enum rules are left to the
// validation pass, which then names the config key and says "(from env NAME)".
// An empty variable counts as unset (docker-compose `PORT=` style).

import { ConfigError, parseHostPort, parseOctalMode } from './checker';
import type { EnvApp } from './apps';
import { AppSchema, AppStoreSchema, GlobalSchema } from './schema';
import { leaves } from './issues';

export type Kind = 'str' | 'num' | 'numOrNull' | 'bool' | 'list' | 'nodes' | 'mode';

/** How an env var's text is read, from the schema node of its key. */
export function envKind(s: Record<string, unknown>): Kind {
  if (typeof s['x-env-kind'] === 'string') return s['x-env-kind'] as Kind;
  if (s.type === 'integer') return 'num';
  if (s.type === 'boolean') return 'bool';
  if (s.type === 'array') return (s.items as Record<string, unknown>).anyOf ? 'nodes' : 'list';
  const anyOf = (s.anyOf ?? []) as Record<string, unknown>[];
  if (anyOf.some((v) => v.type === 'integer')) return anyOf.some((v) => v.type === 'null') ? 'numOrNull' : 'num';
  return 'str';
}

function envTable(entries: [string, Record<string, unknown>][]): Record<string, readonly [string, Kind]> {
  const out: Record<string, readonly [string, Kind]> = {};
  for (const [path, s] of entries) if (typeof s['x-env'] === 'string') out[s['x-env']] = [path, envKind(s)];
  return out;
}

/** env var → [dotted config path, how to parse it], from the schema's `x-env`. */
export const ENV_VARS: Readonly<Record<string, readonly [string, Kind]>> = envTable([...leaves(GlobalSchema), ...leaves(AppStoreSchema, 'app_manager.')]);

/** Default app env vars → app field (AppSchema's `x-env`). The first three are required together. */
export const APP_ENV_VARS: Readonly<Record<string, readonly [string, Kind]>> =
  envTable(Object.entries(AppSchema.properties));
const REQUIRED_APP_VARS = ['SERVICE_DEFAULT_APP_ID', 'SERVICE_DEFAULT_APP_KEY', 'SERVICE_DEFAULT_APP_SECRET'];

export interface EnvSetting {
  /** Dotted config path, e.g. `rate_limiter.api.max_requests`. */
  path: string;
  value: unknown;
  /** The env var it came from. */
  name: string;
}

export interface EnvOverrides {
  settings: EnvSetting[];
  app: EnvApp | null;
}

const TRUE = ['true', '1', 'yes'];
const FALSE = ['false', '0', 'no'];
const NULLS = ['null', 'none', 'off'];

export function parseEnv(env: NodeJS.ProcessEnv): EnvOverrides {
  const settings: EnvSetting[] = [];
  for (const [name, [path, kind]] of Object.entries(ENV_VARS)) {
    const raw = env[name];
    if (raw === undefined || raw === '') continue;
    settings.push({ path, value: parseValue(name, raw, kind), name });
  }
  return { settings, app: parseDefaultApp(env) };
}

function parseDefaultApp(env: NodeJS.ProcessEnv): EnvApp | null {
  const set = Object.keys(APP_ENV_VARS).filter((n) => env[n] !== undefined && env[n] !== '');
  if (set.length === 0) return null;
  const missing = REQUIRED_APP_VARS.filter((n) => !set.includes(n));
  if (missing.length > 0) {
    throw new ConfigError(
      missing[0],
      `${missing.join(', ')} ${missing.length > 1 ? 'are' : 'is'} not set, but ${set.join(', ')} ${set.length > 1 ? 'are' : 'is'}: ` +
        'the default app needs all of SERVICE_DEFAULT_APP_ID, SERVICE_DEFAULT_APP_KEY and SERVICE_DEFAULT_APP_SECRET',
    );
  }
  const app: EnvApp = { value: {}, keys: {} };
  for (const name of set) {
    const [field, kind] = APP_ENV_VARS[name];
    app.value[field] = parseValue(name, env[name] as string, kind);
    app.keys[field] = name;
  }
  return app;
}

function parseValue(name: string, raw: string, kind: Kind): unknown {
  const s = raw.trim();
  switch (kind) {
    case 'str':
      return raw;
    case 'numOrNull':
      if (NULLS.includes(s.toLowerCase())) return null;
      return num(name, raw, ', null or off');
    case 'num':
      return num(name, raw, '');
    case 'bool': {
      const l = s.toLowerCase();
      if (TRUE.includes(l)) return true;
      if (FALSE.includes(l)) return false;
      throw bad(name, raw, 'must be a boolean: true/false, 1/0 or yes/no');
    }
    case 'list':
      return list(raw);
    case 'nodes':
      return list(raw).map((item) => {
        const hp = parseHostPort(item);
        if (!hp) throw bad(name, raw, `must be a comma-separated list of host:port (bad entry ${JSON.stringify(item)})`);
        return hp;
      });
    case 'mode': {
      const m = parseOctalMode(s);
      if (m === undefined) throw bad(name, raw, 'must be an octal file mode such as 660 or 0o660');
      return m;
    }
  }
}

function num(name: string, raw: string, extra: string): number {
  const s = raw.trim();
  if (!/^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(s)) throw bad(name, raw, `must be a number${extra}`);
  return Number(s);
}

function list(raw: string): string[] {
  return raw.split(',').map((x) => x.trim()).filter((x) => x !== '');
}

function bad(name: string, raw: string, rule: string): ConfigError {
  const shown = /SECRET|PASSWORD|TOKEN/.test(name) ? 'a hidden value' : JSON.stringify(raw);
  return new ConfigError(name, `${name} ${rule}, got ${shown}`);
}
