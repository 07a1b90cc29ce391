// Tag filters (the spec's "Tag filtering"; wire shape in docs/protocol.md): a tree sent as
// `filter` in pusher:subscribe data, validated once here at subscription time.
//
//   {"op":"and"|"or","nodes":[…]}   {"op":"not","nodes":[one]}
//   {"key":k,"cmp":c,"val":v}       {"key":k,"cmp":"in"|"nin","vals":[…]}
//
// `cmp` takes the short spellings (eq neq in nin ex nex sw ew ct gt gte lt lte) and the
// spec's long names (exists, notExists, startsWith, endsWith, contains). Every field is
// checked strictly (unknown fields, wrong types, empty sets): a filter that does not mean
// what its author thinks is refused with a message naming the node, rather than silently
// matching nothing. No regular expressions anywhere (spec rule 4).

export type Cmp = 'eq' | 'neq' | 'in' | 'nin' | 'ex' | 'nex' | 'sw' | 'ew' | 'ct' | 'gt' | 'gte' | 'lt' | 'lte';

export type FilterNode =
  | { op: 'and' | 'or'; nodes: FilterNode[] }
  | { op: 'not'; node: FilterNode }
  | { op: 'cmp'; cmp: 'eq' | 'neq' | 'sw' | 'ew' | 'ct'; key: string; val: string }
  | { op: 'cmp'; cmp: 'in' | 'nin'; key: string; vals: string[] }
  | { op: 'cmp'; cmp: 'ex' | 'nex'; key: string }
  | { op: 'cmp'; cmp: 'gt' | 'gte' | 'lt' | 'lte'; key: string; num: number };

/** `values`: the `in` / `nin` values of the whole filter (limits.max_filter_values). */
export type ParseResult = { ok: true; filter: FilterNode; nodes: number; values: number } | { ok: false; error: string };

const CMP_NAMES: Readonly<Record<string, Cmp>> = {
  eq: 'eq', neq: 'neq', in: 'in', nin: 'nin', ex: 'ex', nex: 'nex', sw: 'sw', ew: 'ew', ct: 'ct',
  gt: 'gt', gte: 'gte', lt: 'lt', lte: 'lte',
  exists: 'ex', notExists: 'nex', startsWith: 'sw', endsWith: 'ew', contains: 'ct',
};
const STRING_CMPS = new Set<Cmp>(['eq', 'neq', 'sw', 'ew', 'ct']);
const NUMERIC_CMPS = new Set<Cmp>(['gt', 'gte', 'lt', 'lte']);
const LOGICAL_FIELDS = new Set(['op', 'nodes']);
const LEAF_FIELDS = new Set(['key', 'cmp', 'val', 'vals']);

class Invalid extends Error {}

/**
 * Parses a decimal number the way numeric operators read tag values: optional sign,
 * digits with an optional fraction (or a leading '.'), optional exponent. No whitespace,
 * no hex, no 'Infinity' (Number() would take all of those). null when it is not one.
 */
export function parseNumber(s: string): number | null {
  const n = s.length;
  let i = 0;
  if (i < n && (s.charCodeAt(i) === 43 || s.charCodeAt(i) === 45)) i++; // + -
  let digits = 0;
  while (i < n && isDigit(s.charCodeAt(i))) { i++; digits++; }
  if (i < n && s.charCodeAt(i) === 46) { // .
    i++;
    while (i < n && isDigit(s.charCodeAt(i))) { i++; digits++; }
  }
  if (digits === 0) return null;
  if (i < n && (s.charCodeAt(i) === 101 || s.charCodeAt(i) === 69)) { // e E
    i++;
    if (i < n && (s.charCodeAt(i) === 43 || s.charCodeAt(i) === 45)) i++;
    let exp = 0;
    while (i < n && isDigit(s.charCodeAt(i))) { i++; exp++; }
    if (exp === 0) return null;
  }
  if (i !== n) return null;
  const v = Number(s);
  return Number.isFinite(v) ? v : null;
}

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * Validates `raw` (the parsed `filter` of a subscribe) into a FilterNode. `maxNodes` is
 * tag_filtering.max_nodes: every object of the tree (logical or comparison) counts one.
 * `maxValues` is limits.max_filter_values: the `in` / `nin` values of every node together.
 */
export function parseFilter(raw: unknown, maxNodes: number, maxValues = Infinity): ParseResult {
  let count = 0;
  let values = 0;
  function node(v: unknown, path: string): FilterNode {
    if (++count > maxNodes) throw new Invalid(`filter has more than ${maxNodes} nodes (tag_filtering.max_nodes)`);
    if (!isObject(v)) throw new Invalid(`${path} must be an object`);
    if (v.op !== undefined) return logical(v, path);
    if (v.key !== undefined || v.cmp !== undefined) return leaf(v, path);
    throw new Invalid(`${path} needs either "op" (and, or, not) or "key" and "cmp"`);
  }
  function logical(v: Record<string, unknown>, path: string): FilterNode {
    for (const f of Object.keys(v)) if (!LOGICAL_FIELDS.has(f)) throw new Invalid(`${path} has an unknown field ${JSON.stringify(f)} (an "op" node takes only "nodes")`);
    const op = v.op;
    if (op !== 'and' && op !== 'or' && op !== 'not') throw new Invalid(`${path}.op must be "and", "or" or "not"`);
    if (!Array.isArray(v.nodes)) throw new Invalid(`${path}.nodes must be an array of filter nodes`);
    if (op === 'not') {
      if (v.nodes.length !== 1) throw new Invalid(`${path}: "not" takes exactly one node, got ${v.nodes.length}`);
      return { op, node: node(v.nodes[0], `${path}.nodes[0]`) };
    }
    if (v.nodes.length === 0) throw new Invalid(`${path}: "${op}" needs at least one node`);
    return { op, nodes: v.nodes.map((c, i) => node(c, `${path}.nodes[${i}]`)) };
  }
  function leaf(v: Record<string, unknown>, path: string): FilterNode {
    for (const f of Object.keys(v)) if (!LEAF_FIELDS.has(f)) throw new Invalid(`${path} has an unknown field ${JSON.stringify(f)}`);
    if (typeof v.key !== 'string' || v.key.length === 0) throw new Invalid(`${path}.key must be a non-empty string`);
    const key = v.key;
    const cmp = typeof v.cmp === 'string' && Object.hasOwn(CMP_NAMES, v.cmp) ? CMP_NAMES[v.cmp] : undefined;
    if (cmp === undefined) {
      throw new Invalid(`${path}.cmp must be one of ${Object.keys(CMP_NAMES).join(', ')}${typeof v.cmp === 'string' ? `, not ${JSON.stringify(v.cmp)}` : ''}`);
    }
    if (cmp === 'in' || cmp === 'nin') {
      if (v.val !== undefined) throw new Invalid(`${path}: "${cmp}" takes "vals" (an array), not "val"`);
      if (!Array.isArray(v.vals) || v.vals.length === 0) throw new Invalid(`${path}.vals must be a non-empty array of strings`);
      values += v.vals.length;
      if (values > maxValues) throw new Invalid(`filter has more than ${maxValues} "in" / "nin" values (limits.max_filter_values)`);
      v.vals.forEach((s, i) => { if (typeof s !== 'string') throw new Invalid(`${path}.vals[${i}] must be a string (tag values are strings)`); });
      return { op: 'cmp', cmp, key, vals: v.vals as string[] };
    }
    if (v.vals !== undefined) throw new Invalid(`${path}: "${cmp}" takes "val", not "vals"`);
    if (cmp === 'ex' || cmp === 'nex') {
      if (v.val !== undefined) throw new Invalid(`${path}: "${cmp}" takes no value`);
      return { op: 'cmp', cmp, key };
    }
    if (STRING_CMPS.has(cmp)) {
      if (typeof v.val !== 'string') throw new Invalid(`${path}.val must be a string for "${cmp}" (tag values are strings)`);
      return { op: 'cmp', cmp: cmp as 'eq', key, val: v.val };
    }
    if (NUMERIC_CMPS.has(cmp)) {
      const num = typeof v.val === 'number' ? (Number.isFinite(v.val) ? v.val : null) : typeof v.val === 'string' ? parseNumber(v.val) : null;
      if (num === null) throw new Invalid(`${path}.val must be a number (or a decimal number in a string) for "${cmp}"`);
      return { op: 'cmp', cmp: cmp as 'gt', key, num };
    }
    throw new Invalid(`${path}.cmp ${cmp} is not handled`); // unreachable: every Cmp is above
  }
  try {
    const filter = node(raw, 'filter');
    return { ok: true, filter, nodes: count, values };
  } catch (err) {
    if (err instanceof Invalid) return { ok: false, error: err.message };
    // Only a tree nested past the stack (max_nodes set very high) gets here.
    if (err instanceof RangeError) return { ok: false, error: 'filter is nested too deeply' };
    throw err;
  }
}
