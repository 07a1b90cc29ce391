// `ringcast check-config [--config FILE]`: loads the configuration exactly as `start` would
// (defaults → file → environment), checks it, and prints the effective configuration as
// YAML with every secret masked, exit 0; or the validation errors on stderr, exit 78
// (EX_CONFIG). Options this build refuses (config/support.ts) count as errors, as at start.

import { stringify } from 'yaml';
import { ConfigError, loadConfig } from './config';
import { assertSupported } from './config/support';
import type { Config } from './config/types';

export const EX_CONFIG = 78;

/** Keys whose values are credentials; webhook headers (Authorization, tokens) are masked whole. */
const SECRET_KEY = /secret|password|token/i;
const MASK = '********';

/** A copy of `value` with every credential replaced by a mask (null and "" stay: they say "not set"). */
export function maskSecrets(value: unknown, key = ''): unknown {
  if (Array.isArray(value)) return value.map((v) => maskSecrets(v, key));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      out[k] = key === 'headers' ? (v === null || v === '' ? v : MASK) : maskSecrets(v, k);
    }
    return out;
  }
  if (typeof value === 'string') {
    if (SECRET_KEY.test(key) && value !== '') return MASK;
    // user:password@ in a URL (nats://user:pw@host, redis://:pw@host)
    return value.replace(/^([a-z][a-z0-9+.-]*:\/\/)([^/@\s]*)@/i, `$1${MASK}@`);
  }
  return value;
}

export function effectiveConfigYaml(config: Config, file: string | null): string {
  const head = `# ringcast effective configuration: defaults ← ${file ?? '(no file)'} ← environment; secrets masked\n`;
  const shown = maskSecrets(config) as { unix_socket: { permission_mode: number | string } };
  shown.unix_socket.permission_mode = `0o${config.unix_socket.permission_mode.toString(8)}`; // as chmod writes it
  return head + stringify(shown, { lineWidth: 0 });
}

export function checkConfig(file: string | null, env: NodeJS.ProcessEnv, out: (s: string) => void, err: (s: string) => void): number {
  let config: Config;
  try {
    config = loadConfig({ file, env });
    assertSupported(config);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    err(`ringcast: invalid configuration (${e.issues.length} error${e.issues.length === 1 ? '' : 's'}):\n`);
    for (const i of e.issues) err(`  - ${i.message}\n`);
    return EX_CONFIG;
  }
  out(effectiveConfigYaml(config, file));
  return 0;
}
