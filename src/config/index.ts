// loadConfig: defaults → config.yaml → env → overrides → one validation pass → frozen.
//
// Every layer is merged into one raw tree shaped like config.yaml. The tree's known
// keys come from the defaults (defaults.ts, read off schema.ts), so a key the defaults
// do not have is a typo and an error. The validation pass checks the tree against the
// schema (issues.ts), decodes it, then applies the rules across keys (rules.ts) and the
// apps' checks (apps.ts). `origins` remembers which layer last set each key, so a
// validation message can end with "(from env PORT)" or "(from /etc/ringcast.yaml)".

import { readFileSync } from 'node:fs';
import { isScalar, parseDocument } from 'yaml';
import type { AppConfig, Config } from './types';
import { defaultRawTree } from './defaults';
import { parseEnv } from './env';
import { Checker, ConfigError, isMapping, show, suggest } from './checker';
import { AppStoreSchema, GlobalSchema, type AppStoreConfig, type GlobalConfig } from './schema';
import { check, decode, keyOf } from './issues';
import { clusterHistoryRule, globalRules } from './rules';
import { validateApps } from './apps';
import { deepFreeze } from './freeze';

export { ConfigError } from './checker';
export { deepFreeze } from './freeze';
export type { ConfigIssue } from './checker';
export { defaultConfig } from './defaults';
export type { Config, AppConfig } from './types';

export type DeepPartial<T> = T extends readonly unknown[] ? T
  : T extends object ? { [K in keyof T]?: DeepPartial<T[K]> | null } : T;

/** An app as written in YAML: id/key/secret required, every limit optional. */
export type AppInput = { id: string | number; key: string | number; secret: string }
  & Partial<Omit<AppConfig, 'id' | 'key' | 'secret' | 'webhooks' | 'hooks'>>
  & { webhooks?: { url: string; event_types: string[]; headers?: Record<string, string> }[] }
  /** Backend hooks as written: every part optional (config/hooks.ts resolves them). */
  & { hooks?: AppConfig['hooks'] | Record<string, unknown> };

/** A plain object in the same shape as config.yaml. */
export type ConfigInput = DeepPartial<GlobalConfig> & {
  apps?: AppInput[] | null;
  app_manager?: (DeepPartial<AppStoreConfig> & { array?: { apps?: AppInput[] | null } | null }) | null;
};

export interface LoadConfigOptions {
  /** Path of a YAML config file; null/undefined = none. */
  file?: string | null;
  /** Defaults to process.env; pass {} in tests to ignore the real environment. */
  env?: NodeJS.ProcessEnv;
  /** Merged last (tests). */
  overrides?: ConfigInput;
}

export function loadConfig(opts: LoadConfigOptions = {}): Config {
  const tree = defaultRawTree();
  const origins = new Map<string, string>();
  if (opts.file) merge(tree, readYaml(opts.file), '', origins, opts.file);

  const env = parseEnv(opts.env ?? process.env);
  for (const s of env.settings) {
    const parts = s.path.split('.');
    const last = parts.pop() as string;
    const section = parts.reduce((o, p) => o[p] as Record<string, unknown>, tree);
    section[last] = s.value;
    origins.set(s.path, `env ${s.name}`);
  }

  if (opts.overrides) merge(tree, structuredClone(opts.overrides), '', origins, 'overrides');

  const c = new Checker(origins);
  const { apps: _apps, app_manager: _am, ...globalTree } = tree;
  check(c, GlobalSchema, globalTree, (p) => keyOf('', p));
  const global = decode(GlobalSchema, globalTree) as GlobalConfig;
  globalRules(c, global);
  const { array: _array, ...storeTree } = tree.app_manager as Record<string, unknown>;
  check(c, AppStoreSchema, storeTree, (p) => keyOf('app_manager', p));
  const appManager = decode(AppStoreSchema, storeTree) as AppStoreConfig;
  const apps = validateApps(c, tree, global, env.app);
  clusterHistoryRule(c, global, apps);
  c.throwIfAny();
  return deepFreeze({ ...global, apps, app_manager: appManager });
}

function readYaml(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(file, `cannot read config file ${file}: ${(err as Error).message}`);
  }
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(file, `invalid YAML in ${file}: ${doc.errors[0].message.trim()}`);
  }
  // `permission_mode: 660` means octal, as with chmod; YAML would read decimal 660.
  // Keep the digits as written (a string) and let validation parse them as octal.
  const mode = doc.getIn(['unix_socket', 'permission_mode'], true);
  if (isScalar(mode) && typeof mode.value === 'number' && mode.format !== 'OCT' && mode.format !== 'HEX') {
    mode.value = mode.source ?? String(mode.value);
  }
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    throw new ConfigError(file, `invalid YAML in ${file}: ${(err as Error).message}`);
  }
  if (data === null || data === undefined) return {};
  if (!isMapping(data)) throw new ConfigError(file, `${file} must hold a YAML mapping of settings, got ${show(data)}`);
  return data;
}

/**
 * Merges `src` into the section `dst` (a mapping from the defaults). Keys unknown to the
 * defaults are errors; sections recurse (null = leave the section as is); leaves,
 * lists included, are replaced whole.
 */
function merge(dst: Record<string, unknown>, src: Record<string, unknown>, prefix: string,
  origins: Map<string, string>, source: string): void {
  const known = Object.keys(dst);
  for (const [k, v] of Object.entries(src)) {
    const path = prefix + k;
    if (!Object.prototype.hasOwnProperty.call(dst, k)) {
      throw new ConfigError(path, `${path} is not a known setting${suggest(k, known)} (from ${source})`);
    }
    if (v === undefined) continue;
    if (isMapping(dst[k])) {
      if (v === null) continue;
      if (!isMapping(v)) {
        throw new ConfigError(path, `${path} must be a mapping of settings, got ${show(v, path)} (from ${source})`);
      }
      merge(dst[k], v, path + '.', origins, source);
    } else if (v === null && (path === 'apps' || path === 'app_manager.array.apps')) {
      dst[k] = []; // `apps:` with every entry commented out
      origins.set(path, source);
    } else {
      dst[k] = v;
      origins.set(path, source);
    }
  }
}
