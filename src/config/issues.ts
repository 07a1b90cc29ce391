// What config/ reads off a schema node (schema.ts): the problems of a value as ringcast's
// messages (`<key> <rule>, got <value> (from <source>)`), the value decoded as far as it
// is valid, and the defaults.
//
// TypeBox finds the problems (Value.Errors); the message's rule comes from the failing
// node: its `x-rule`, else one derived from its type and bounds (ruleOf), so that
// `port: -1` reads "port must be an integer between 0 and 65535, got -1". A union reports
// for the variant the value's type selects (an object: its own keys' problems), a mapping
// reports unknown keys with its `x-unknown` text and a "did you mean" hint.

import { TransformKind, type TSchema } from '@sinclair/typebox';
import { Value, ValueErrorType } from '@sinclair/typebox/value';
import { suggest, type Checker } from './checker';

type Node = TSchema & Record<string, unknown>;
type Path = (string | number)[];

/** `apps[1].webhooks[0].url` from its parts, after `base` (a key, or '' at the root). */
export function keyOf(base: string, path: Path): string {
  return path.reduce<string>((k, p) => (typeof p === 'number' ? `${k}[${p}]` : k ? `${k}.${p}` : p), base);
}

/** The rule text of a node: "must be …". */
export function ruleOf(s: Node): string {
  if (typeof s['x-rule'] === 'string') return s['x-rule'];
  if ('const' in s) return `must be one of ${String(s.const)}`; // a one-choice union is its literal
  const anyOf = s.anyOf as Node[] | undefined;
  if (anyOf) {
    const nonNull = anyOf.filter((v) => v.type !== 'null');
    const orNull = nonNull.length < anyOf.length ? ' or null' : '';
    if (nonNull.every((v) => 'const' in v)) return `must be one of ${nonNull.map((v) => String(v.const)).join(', ')}${orNull}`;
    return nonNull.length === 1 ? ruleOf(nonNull[0]) + orNull : 'must match one of its allowed forms';
  }
  switch (s.type) {
    case 'integer': {
      const min = s.minimum as number;
      if (s.maximum !== undefined) return `must be an integer between ${min} and ${s.maximum as number}`;
      return min === 1 ? 'must be a positive integer' : min === 0 ? 'must be a non-negative integer' : `must be an integer ≥ ${min}`;
    }
    case 'boolean': return 'must be a boolean (true or false)';
    case 'string': return s.pattern === '\\S' ? 'must be a non-empty string' : 'must be a string';
    case 'array': return 'must be a list of non-empty strings';
    default: return 'must be a mapping of settings';
  }
}

function jsonType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v === 'number' ? 'number' : typeof v;
}

function accepts(s: Node, t: string): boolean {
  const type: unknown = s.type === 'integer' ? 'number' : s.type;
  return type === t;
}

/**
 * Adds every problem of `value` against `schema` to the checker, keys rendered by `key`
 * (the key path, or an env var name for the default app's fields).
 */
export function check(c: Checker, schema: TSchema, value: unknown, key: (path: Path) => string, base: Path = []): void {
  const seen = new Set<string>();
  for (const e of Value.Errors(schema, value)) {
    if (seen.has(e.path)) continue;
    seen.add(e.path);
    const path = [...base, ...pointer(e.path, value)];
    const s = e.schema as Node;
    if (s['x-at-parent']) { // a bad entry of a mapping is the mapping's problem (webhook headers)
      const parent = key(path.slice(0, -1));
      if (c.ok(parent)) c.fail(parent, ruleOf(s), pick(value, e.path.replace(/\/[^/]*$/, '')));
      continue;
    }
    if (e.type === ValueErrorType.ObjectAdditionalProperties) {
      const name = String(path[path.length - 1]);
      const known = Object.keys((s.properties as object | undefined) ?? {});
      const unknown = typeof s['x-unknown'] === 'string' ? s['x-unknown'] : 'is not a known setting';
      c.fail(key(path), unknown + (known.length > 0 ? suggest(name, known) : ''), undefined, false);
      continue;
    }
    if (e.type === ValueErrorType.Union) {
      const t = jsonType(e.value);
      const fits = (s.anyOf as Node[]).filter((v) => accepts(v, t));
      if (fits.length === 1 && (t === 'object' || t === 'array')) {
        check(c, fits[0], e.value, key, path);
        continue;
      }
      if (fits.length > 0 && fits.every((v) => 'const' in v)) {
        c.fail(key(path), `must be one of ${fits.map((v) => String(v.const)).join(', ')}`, e.value);
        continue;
      }
    }
    c.fail(key(path), ruleOf(s), e.value);
  }
}

/** A JSON pointer of Value.Errors as path parts: numbers where the value is a list. */
function pointer(p: string, root: unknown): Path {
  const out: Path = [];
  let cur = root;
  for (const raw of p.split('/').slice(1)) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    const item = Array.isArray(cur) ? Number(part) : part;
    out.push(item);
    cur = cur !== null && typeof cur === 'object' ? (cur as Record<string | number, unknown>)[item] : undefined;
  }
  return out;
}

/** The value at a JSON pointer. */
function pick(root: unknown, p: string): unknown {
  return p.split('/').slice(1).reduce<unknown>((o, k) => (o as Record<string, unknown>)[k.replace(/~1/g, '/').replace(/~0/g, '~')], root);
}

interface Transform { Decode: (v: unknown) => unknown }

/**
 * The value decoded as far as it is valid: each transform node whose value passes its
 * check is decoded ("660" → 0o660), an invalid one is left as it was (its key has an
 * issue already). So rules across keys can read a typed tree even when a key failed.
 */
export function decode(schema: TSchema, value: unknown): unknown {
  const s = schema as Node;
  let out = value;
  if (s.anyOf) {
    const variant = (s.anyOf as Node[]).find((v) => Value.Check(v, value));
    if (variant) out = decode(variant, value);
  } else if (s.type === 'object' && value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const v = value as Record<string, unknown>;
    const o: Record<string, unknown> = {};
    if (s.properties) {
      for (const [k, p] of Object.entries(s.properties as Record<string, Node>)) if (v[k] !== undefined) o[k] = decode(p, v[k]);
    } else {
      const item = Object.values(s.patternProperties as Record<string, Node>)[0];
      for (const [k, x] of Object.entries(v)) o[k] = decode(item, x);
    }
    out = o;
  } else if (s.type === 'array' && Array.isArray(value)) {
    out = value.map((x) => decode(s.items as Node, x));
  }
  const t = (s as unknown as Record<symbol, unknown>)[TransformKind] as Transform | undefined;
  return t && Value.Check(s, value) ? t.Decode(out) : out;
}

/** The defaults of a section (every key) or a leaf; a fresh copy each call. */
export function defaultsOf(schema: TSchema): unknown {
  const s = schema as Node;
  if (s.type === 'object' && s.properties && !('default' in s)) {
    const o: Record<string, unknown> = {};
    for (const [k, p] of Object.entries(s.properties as Record<string, Node>)) {
      if ('default' in p) o[k] = structuredClone(p.default);
      else if (p.type === 'object' && p.properties) o[k] = defaultsOf(p);
    }
    return o;
  }
  return structuredClone(s.default);
}

/** Every leaf below a section with its dotted path, in schema order (sections are walked). */
export function leaves(schema: TSchema, prefix = ''): [path: string, node: Node][] {
  const out: [string, Node][] = [];
  for (const [k, p] of Object.entries((schema as Node).properties as Record<string, Node>)) {
    if (p['x-section']) out.push(...leaves(p, `${prefix}${k}.`));
    else out.push([prefix + k, p]);
  }
  return out;
}
