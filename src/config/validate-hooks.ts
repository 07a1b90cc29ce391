// Backend hooks (PROTOCOL.md "Backend hooks", src/hooks/): an app's `hooks` block and the
// global `hook_client` block. Kept apart from validate-apps.ts so that it ports as one piece.
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
import type { AppHooks, Config, HookFailurePolicy, HookKind, HookSettings } from './types';
import { isMapping, suggest, type Checker } from './checker';

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
  return v === undefined ? dflt : c.int(key, v, 1, { max: MAX_TIMEOUT_MS });
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
  const onFailure = v.on_failure === undefined ? 'deny' : c.oneOf(`${key}.on_failure`, v.on_failure, POLICIES);
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
  // as PROTOCOL.md writes the defaults ({enabled: false}): a hook runs only when enabled: true
  const enabled = v.enabled === undefined ? false : c.bool(`${key}.enabled`, v.enabled);
  const url = hookUrl(c, `${key}.url`, v.url) ?? top.url;
  if (enabled && url === null && c.ok(`${key}.url`, topUrlKey)) {
    c.fail(`${key}.url`, `is required when the hook is enabled (or set ${topUrlKey}, the default of every hook)`, undefined, false);
  }
  return {
    enabled,
    url: url ?? '',
    timeout_ms: timeout(c, `${key}.timeout_ms`, v.timeout_ms, top.timeout_ms),
    on_failure: v.on_failure === undefined ? top.on_failure : c.oneOf(`${key}.on_failure`, v.on_failure, POLICIES),
    channels: p.channels === null ? [] : patterns(c, `${key}.channels`, v.channels, p.channels),
    events: p.events === null ? [] : patterns(c, `${key}.events`, v.events, p.events),
  };
}

/** The global `hook_client` block (the shard-side HTTP client of every app's hooks). */
export function hookClient(c: Checker, g: (path: string) => unknown): Config['hook_client'] {
  const k = 'hook_client.';
  const ca = g(`${k}ca_path`);
  return {
    max_in_flight: c.int(`${k}max_in_flight`, g(`${k}max_in_flight`), 1, { max: 100_000 }),
    max_response_kb: c.int(`${k}max_response_kb`, g(`${k}max_response_kb`), 1, { max: 10_240 }),
    max_pending_per_connection: c.int(`${k}max_pending_per_connection`, g(`${k}max_pending_per_connection`), 1, { max: 10_000 }),
    breaker: {
      failures: c.int(`${k}breaker.failures`, g(`${k}breaker.failures`), 1, { max: 10_000 }),
      open_ms: c.int(`${k}breaker.open_ms`, g(`${k}breaker.open_ms`), 1, { max: 3_600_000 }),
    },
    ca_path: readablePem(c, `${k}ca_path`, c.optStr(`${k}ca_path`, ca)),
  };
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
