// The building blocks of schema.ts: one function per kind of setting, each returning a
// TypeBox schema that carries everything the rest of config/ derives from it:
//
//   default          the built-in default (defaults.ts)
//   description      what the key does (docs/configuration.md, editors' hover text)
//   x-env            the environment variable that overrides it (env.ts)
//   x-env-ours       true: a variable of ringcast's own, not one of the spec's
//   x-rule           the message rule when the value is invalid, where the one derived
//                    from the type (issues.ts ruleOf) would not say enough
//   x-default-doc    how the reference shows a default computed at start (workers) or
//                    written differently (the octal mode); the JSON Schema then has none
//   x-default-from   (app settings) the global key whose value is the default
//   x-unknown        (mappings) the message for a key the mapping does not have
//
// Transform nodes turn what a user may write into the typed value (`"660"` → 0o660,
// `"h:7000"` → {host, port}, `""` → null, -1 → null); `StaticDecode` gives those types.

import { FormatRegistry, Type, type TProperties, type TSchema, type TUnsafe } from '@sinclair/typebox';
import { parseCidr } from './cidr';
import { parseHostPort, parseOctalMode } from './checker';

export interface Doc {
  /** What the key does. */
  doc: string;
  /** Environment variable that overrides it. */
  env?: string;
  /** The variable is ringcast's own (not in the spec). */
  ours?: boolean;
  /** Message rule on an invalid value (`must be …`). */
  rule?: string;
  /** The reference's text for a default that the JSON Schema cannot hold. */
  defaultDoc?: string;
}

export function meta(d: Doc): Record<string, unknown> {
  const m: Record<string, unknown> = { description: d.doc };
  if (d.env) m['x-env'] = d.env;
  if (d.ours) m['x-env-ours'] = true;
  if (d.rule) m['x-rule'] = d.rule;
  if (d.defaultDoc) m['x-default-doc'] = d.defaultDoc;
  return m;
}

type IntDoc = Doc & { max?: number };

/** An integer ≥ min (≤ max when given). */
export function int(def: number, min: number, d: IntDoc) {
  const { max, ...rest } = d;
  return Type.Integer({ minimum: min, ...(max !== undefined ? { maximum: max } : {}), default: def, ...meta(rest) });
}

/** A TCP port: 0..65535 (0 = any free port), or 1..65535 for a server to connect to. */
export function port(def: number, d: Doc, min = 0) {
  return int(def, min, { ...d, max: 65535 });
}

/** An integer ≥ min, or null (usually: off / unlimited / derived). */
export function intOrNull(def: number | null, min: number, d: IntDoc) {
  const { max, ...rest } = d;
  return Type.Union([Type.Integer({ minimum: min, ...(max !== undefined ? { maximum: max } : {}) }), Type.Null()],
    { default: def, ...meta(rest) });
}

export function bool(def: boolean, d: Doc) {
  return Type.Boolean({ default: def, ...meta(d) });
}

/** A string with at least one non-blank character. */
export function str(def: string, d: Doc) {
  return Type.String({ pattern: '\\S', default: def, ...meta(d) });
}

/** A string, possibly empty. */
export function text(def: string, d: Doc) {
  return Type.String({ default: def, ...meta(d) });
}

/** A string or null; an empty string counts as null (not set). */
export function optStr(d: Doc) {
  return Type.Transform(Type.Union([Type.String(), Type.Null()], { default: null, ...meta({ rule: 'must be a string or null', ...d }) }))
    .Decode((v) => (v === '' ? null : v))
    .Encode((v) => v);
}

/**
 * One of a fixed list of strings, or (`others`) a value of another form: one flat union,
 * which messages read as one list of choices. Typed `T | X` (TypeBox cannot infer a
 * union from a list that is not a tuple).
 */
export function choice<const T extends string, X = never>(values: readonly T[], others: TSchema[] = [], opts: Record<string, unknown> = {}): TUnsafe<T | X> {
  return Type.Union([...values.map((v) => Type.Literal(v)), ...others], opts) as unknown as TUnsafe<T | X>;
}

/** One of a fixed list of strings, with a default. */
export function oneOf<const T extends string>(values: readonly T[], def: T, d: Doc): TUnsafe<T> {
  return choice<T>(values, [], { default: def, ...meta(d) });
}

/** A list of non-blank strings. */
export function strList(def: string[], d: Doc) {
  // a bad entry is reported as the list's problem, with the whole list shown
  return Type.Array(Type.String({ pattern: '\\S', 'x-rule': 'must be a list of non-empty strings', 'x-at-parent': true }), { default: def, ...meta(d) });
}

/** A list of IP addresses and CIDR ranges, and `unix` (http.trusted_proxies). */
export function cidrList(d: Doc) {
  const rule = 'must be a list of IP addresses or CIDR ranges such as 10.0.0.0/8, 192.168.1.10 or fd00::/8 (or unix)';
  return Type.Array(Type.String({ format: 'ringcast-cidr', 'x-rule': rule, 'x-at-parent': true }), { default: [], ...meta({ rule, ...d }) });
}

/** "host:port" ("[::1]:7000" for IPv6), as parseHostPort reads it. */
const HOST_PORT = '^\\s*(?:\\[[^\\]]+\\]|[^:\\s]+):\\d{1,5}\\s*$';

const HostPort = Type.Transform(Type.Union([
  Type.String({ pattern: HOST_PORT }),
  Type.Object({ host: Type.String({ pattern: '\\S', description: 'Host name or address.' }), port: Type.Integer({ minimum: 1, maximum: 65535, description: 'Port.' }) },
    { additionalProperties: false, 'x-unknown': 'is not host or port' }),
], { 'x-rule': 'must be a "host:port" string or a {host, port} mapping' }))
  .Decode((v) => (typeof v === 'string' ? parseHostPort(v) as { host: string; port: number } : { host: v.host, port: v.port }))
  .Encode((v) => v);

/** A list of servers, each "host:port" or {host, port}. */
export function hostPorts(d: Doc) {
  return Type.Array(HostPort, { default: [], ...meta({ rule: 'must be a list of host:port strings or {host, port} mappings', ...d }) });
}

/** A Unix file mode: an integer, or octal digits as chmod takes them ("660", "0660", "0o660"). */
export function fileMode(def: number, d: Doc) {
  return Type.Transform(Type.Union([
    Type.Integer({ minimum: 0, maximum: 0o7777 }),
    Type.String({ pattern: '^\\s*(?:0[oO]?)?[0-7]{1,4}\\s*$' }),
  ], { default: def, 'x-env-kind': 'mode', ...meta({ rule: 'must be an octal file mode such as "660" or 0o660', ...d }) }))
    .Decode((v) => (typeof v === 'string' ? parseOctalMode(v) as number : v))
    .Encode((v) => v);
}

/** A mapping of settings (a section of config.yaml); every key has a default. */
export function section<T extends TProperties>(props: T, doc: string) {
  return Type.Object(props, { additionalProperties: false, description: doc, 'x-section': true });
}

/** The checks a pattern cannot make (the JSON Schema keeps the pattern, editors skip the format). */
FormatRegistry.Set('ringcast-cidr', (s) => typeof parseCidr(s) !== 'string');
FormatRegistry.Set('ringcast-http-url', (s) => s === '' || httpUrl(s, ['http:', 'https:']));
FormatRegistry.Set('ringcast-webhook-url', (s) => /^lambda:\/\/\S+$/.test(s) || (/^https?:\/\//i.test(s) && httpUrl(s, ['http:', 'https:'])));

function httpUrl(s: string, protocols: string[]): boolean {
  try {
    const u = new URL(s);
    return protocols.includes(u.protocol) && u.hostname !== '';
  } catch {
    return false;
  }
}
