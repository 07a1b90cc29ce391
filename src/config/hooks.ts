// Backend hooks (docs/protocol.md "Backend hooks", src/hooks/): an app's `hooks` block, checked
// and resolved after the schema (apps.ts; the schema takes it as a mapping), and the rule on
// the global `hook_client.ca_path`. The rest of `hook_client` is in schema.ts.
//
//   hooks:
//     url: https://backend.example/ringcast-hooks   # default endpoint of every hook
//     timeout_ms: 1000                              # per call
//     on_failure: deny                              # deny | allow
//     connect:      {enabled: false}                # each: enabled, url, timeout_ms, on_failure, channels, events
//     subscribe:    {enabled: false, channels: ["*"]}
//     client_event: {enabled: false, channels: ["*"], events: ["client-*"]}
//     publish:      {enabled: false, channels: ["*"]}

import { readFileSync } from 'node:fs';
import { isMapping, suggest, type Checker } from './checker';

// --- types ---
export type HookKind = 'connect' | 'subscribe' | 'client_event' | 'publish';
export type HookFailurePolicy = 'deny' | 'allow';

/** One hook of an app, every value resolved (the hook's own, else the app's `hooks` default). */
export interface HookSettings {
  enabled: boolean;
  url: string;
  timeout_ms: number;
  on_failure: HookFailurePolicy;
  /** Channel patterns (as channel_delta_compression: exact, 'prefix*', '*suffix', '*'); [] for connect. */
  channels: string[];
  /** Event name patterns (client_event, publish); [] for connect and subscribe. */
  events: string[];
}

/** An app's `hooks`: the shared defaults as written, and each hook resolved. */
export interface AppHooks {
  url: string | null;
  timeout_ms: number;
  on_failure: HookFailurePolicy;
  connect: HookSettings;
  subscribe: HookSettings;
  client_event: HookSettings;
  publish: HookSettings;
}


export const HOOK_KINDS: readonly HookKind[] = ['connect', 'subscribe', 'client_event', 'publish'];
const POLICIES: readonly HookFailurePolicy[] = ['deny', 'allow'];
const TOP_FIELDS = ['url', 'timeout_ms', 'on_failure', ...HOOK_KINDS];
const HOOK_FIELDS = ['enabled', 'url', 'timeout_ms', 'on_failure', 'channels', 'events'];
/** Which pattern lists a hook takes, and their defaults. */
const PATTERNS: Record<HookKind, { channels: string[] | null; events: string[] | null }> = {
  connect: { channels: null, events: null },
  subscribe: { channels: ['*'], events: null },
  client_event: { channels: ['*'], events: ['client-*'] },
  publish: { channels: ['*'], events: ['*'] },
};
/** As channel_delta_compression: an exact name, 'prefix*', '*suffix' or '*'. */
const PATTERN = /^(\*|\*?[^*\s]+|[^*\s]+\*)$/;
const DEFAULT_TIMEOUT_MS = 1000;
const MAX_TIMEOUT_MS = 60_000;

/** The scalar checks of this block (the schema takes it as an opaque mapping). */
function cInt(c: Checker, key: string, v: unknown, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) c.fail(key, `must be an integer between ${min} and ${max}`, v);
  return v as number;
}

function cOneOf<T extends string>(c: Checker, key: string, v: unknown, values: readonly T[]): T {
  if (typeof v !== 'string' || !values.includes(v as T)) c.fail(key, `must be one of ${values.join(', ')}`, v);
  return v as T;
}

function cBool(c: Checker, key: string, v: unknown): boolean {
  if (typeof v !== 'boolean') c.fail(key, 'must be a boolean (true or false)', v);
  return v as boolean;
}

function hookUrl(c: Checker, key: string, v: unknown): string | null {
  if (v === undefined || v === null) return null;
  let ok = false;
  try {
    ok = typeof v === 'string' && /^https?:$/.test(new URL(v).protocol) && new URL(v).hostname !== '';
  } catch { /* not a URL */ }
  if (!ok) c.fail(key, 'must be an http:// or https:// URL', v);
  return v as string;
}

function timeout(c: Checker, key: string, v: unknown, dflt: number): number {
  return v === undefined ? dflt : cInt(c, key, v, 1, MAX_TIMEOUT_MS);
}

function patterns(c: Checker, key: string, v: unknown, dflt: string[]): string[] {
  if (v === undefined) return [...dflt];
  if (!Array.isArray(v) || v.length === 0 || v.some((p) => typeof p !== 'string')) {
    c.fail(key, "must be a non-empty list of patterns (an exact name, 'prefix*', '*suffix' or '*')", v);
    return [];
  }
  (v as string[]).forEach((p, i) => {
    if (!PATTERN.test(p)) c.fail(`${key}[${i}]`, "is not a pattern: use an exact name, 'prefix*', '*suffix' or '*'", p);
  });
  return [...(v as string[])];
}

function unknownFields(c: Checker, key: string, v: Record<string, unknown>, known: string[], what: string): void {
  for (const f of Object.keys(v)) {
    if (!known.includes(f)) c.fail(`${key}.${f}`, `is not a known ${what} setting${suggest(f, known)}`, undefined, false);
  }
}

/** An app's `hooks` block, each hook resolved against the block's defaults. */
export function appHooks(c: Checker, key: string, v: unknown): AppHooks | null {
  if (!isMapping(v)) {
    c.fail(key, `must be a mapping with ${TOP_FIELDS.join(', ')}`, v);
    return null;
  }
  unknownFields(c, key, v, TOP_FIELDS, 'hooks');
  const url = hookUrl(c, `${key}.url`, v.url);
  const timeoutMs = timeout(c, `${key}.timeout_ms`, v.timeout_ms, DEFAULT_TIMEOUT_MS);
  const onFailure = v.on_failure === undefined ? 'deny' : cOneOf(c, `${key}.on_failure`, v.on_failure, POLICIES);
  const out = { url, timeout_ms: timeoutMs, on_failure: onFailure } as AppHooks;
  for (const kind of HOOK_KINDS) out[kind] = hook(c, `${key}.${kind}`, kind, v[kind], out, `${key}.url`);
  return out;
}

function hook(c: Checker, key: string, kind: HookKind, v: unknown, top: Pick<AppHooks, 'url' | 'timeout_ms' | 'on_failure'>, topUrlKey: string): HookSettings {
  const p = PATTERNS[kind];
  const off: HookSettings = { enabled: false, url: top.url ?? '', timeout_ms: top.timeout_ms, on_failure: top.on_failure, channels: p.channels ?? [], events: p.events ?? [] };
  if (v === undefined || v === null) return off;
  if (!isMapping(v)) {
    c.fail(key, `must be a mapping with ${HOOK_FIELDS.filter((f) => (f !== 'channels' || p.channels) && (f !== 'events' || p.events)).join(', ')}`, v);
    return off;
  }
  unknownFields(c, key, v, HOOK_FIELDS, 'hook');
  if (p.channels === null && v.channels !== undefined) c.fail(`${key}.channels`, `does not apply to the ${kind} hook (it has no channel)`, undefined, false);
  if (p.events === null && v.events !== undefined) c.fail(`${key}.events`, `does not apply to the ${kind} hook (it has no event name)`, undefined, false);
  // as docs/protocol.md writes the defaults ({enabled: false}): a hook runs only when enabled: true
  const enabled = v.enabled === undefined ? false : cBool(c, `${key}.enabled`, v.enabled);
  const url = hookUrl(c, `${key}.url`, v.url) ?? top.url;
  if (enabled && url === null && c.ok(`${key}.url`, topUrlKey)) {
    c.fail(`${key}.url`, `is required when the hook is enabled (or set ${topUrlKey}, the default of every hook)`, undefined, false);
  }
  return {
    enabled,
    url: url ?? '',
    timeout_ms: timeout(c, `${key}.timeout_ms`, v.timeout_ms, top.timeout_ms),
    on_failure: v.on_failure === undefined ? top.on_failure : cOneOf(c, `${key}.on_failure`, v.on_failure, POLICIES),
    channels: p.channels === null ? [] : patterns(c, `${key}.channels`, v.channels, p.channels),
    events: p.events === null ? [] : patterns(c, `${key}.events`, v.events, p.events),
  };
}

/** hook_client.ca_path: a readable PEM file of CA certificates, or null. */
export function hookCaRule(c: Checker, path: string | null): void {
  readablePem(c, 'hook_client.ca_path', path);
}

function readablePem(c: Checker, key: string, path: string | null): string | null {
  if (path === null || !c.ok(key)) return path;
  try {
    if (!readFileSync(path, 'utf8').includes('-----BEGIN CERTIFICATE-----')) c.fail(key, 'must name a PEM file of CA certificates', path);
  } catch (err) {
    c.fail(key, `must name a readable PEM file (${(err as NodeJS.ErrnoException).code ?? 'unreadable'})`, path);
  }
  return path;
}
