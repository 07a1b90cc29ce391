// A parsed filter turned into a predicate over an event's tags, plus what the channel
// index (filter/matcher.ts) needs to avoid running it: the (key, value) pairs one of
// which an event must carry for the filter to match ("postings"), and whether carrying
// one is already enough ("exact").
//
// Semantics (the spec's rules, and the choices it leaves open):
//  - an event without tags matches no filter, `nex` and `not` included (the caller never
//    asks: untagged events do not reach filtered subscribers at all);
//  - every comparison but `nex` needs the key present: `neq`, `nin`, `sw`, … on a missing
//    key are false. "Missing or different" is spelled `not eq`;
//  - numeric operators read the tag value with parseNumber (decimal only): a value that
//    is not a number makes them false;
//  - case-sensitive string comparisons; no regular expressions.

import { parseNumber, type FilterNode } from './parse';

/** An event's tags: own string properties (JSON.parse of the publish frame's tag section). */
export type Tags = Readonly<Record<string, string>>;

export interface CompiledFilter {
  test(tags: Tags): boolean;
  /**
   * (key, value) pairs such that a matching event carries at least one of them, or null
   * when no such finite set exists (e.g. `gt`, `neq`, `not`): then the filter is tested
   * against every tagged event of the channel.
   */
  postings: [string, string][] | null;
  /** True when carrying one of `postings` is the whole filter (no test needed). */
  exact: boolean;
  /** The parsed tree as JSON: equal filters (long or short spellings alike) have equal keys. */
  key: string;
  /** `in` / `nin` values of the tree (limits.max_filter_values_per_connection counts them). */
  values: number;
}

type Pred = (tags: Tags) => boolean;

/** The value of an own property only: a tag named "constructor" is not Object.prototype's. */
function tag(tags: Tags, key: string): string | undefined {
  return Object.hasOwn(tags, key) ? tags[key] : undefined;
}

function predicate(n: FilterNode): Pred {
  switch (n.op) {
    case 'and': {
      const ps = n.nodes.map(predicate);
      if (ps.length === 1) return ps[0];
      if (ps.length === 2) { const [a, b] = ps; return (t) => a(t) && b(t); }
      return (t) => { for (let i = 0; i < ps.length; i++) if (!ps[i](t)) return false; return true; };
    }
    case 'or': {
      const ps = n.nodes.map(predicate);
      if (ps.length === 1) return ps[0];
      return (t) => { for (let i = 0; i < ps.length; i++) if (ps[i](t)) return true; return false; };
    }
    case 'not': {
      const p = predicate(n.node);
      return (t) => !p(t);
    }
    case 'cmp':
      return leaf(n);
  }
}

function leaf(n: Extract<FilterNode, { op: 'cmp' }>): Pred {
  const key = n.key;
  switch (n.cmp) {
    case 'eq': { const val = n.val; return (t) => tag(t, key) === val; }
    case 'neq': { const val = n.val; return (t) => { const v = tag(t, key); return v !== undefined && v !== val; }; }
    case 'sw': { const val = n.val; return (t) => { const v = tag(t, key); return v !== undefined && v.startsWith(val); }; }
    case 'ew': { const val = n.val; return (t) => { const v = tag(t, key); return v !== undefined && v.endsWith(val); }; }
    case 'ct': { const val = n.val; return (t) => { const v = tag(t, key); return v !== undefined && v.includes(val); }; }
    case 'in': { const set = new Set(n.vals); return (t) => { const v = tag(t, key); return v !== undefined && set.has(v); }; }
    case 'nin': { const set = new Set(n.vals); return (t) => { const v = tag(t, key); return v !== undefined && !set.has(v); }; }
    case 'ex': return (t) => Object.hasOwn(t, key);
    case 'nex': return (t) => !Object.hasOwn(t, key);
    case 'gt': { const num = n.num; return (t) => { const x = numeric(t, key); return x !== null && x > num; }; }
    case 'gte': { const num = n.num; return (t) => { const x = numeric(t, key); return x !== null && x >= num; }; }
    case 'lt': { const num = n.num; return (t) => { const x = numeric(t, key); return x !== null && x < num; }; }
    case 'lte': { const num = n.num; return (t) => { const x = numeric(t, key); return x !== null && x <= num; }; }
  }
}

function numeric(tags: Tags, key: string): number | null {
  const v = tag(tags, key);
  return v === undefined ? null : parseNumber(v);
}

interface Postings {
  pairs: [string, string][];
  exact: boolean;
}

/**
 * eq → its pair; in → one pair per value; and → the child with the fewest pairs (any one
 * must hold); or → every child's pairs when each child has some; anything else → none.
 */
function postingsOf(n: FilterNode): Postings | null {
  switch (n.op) {
    case 'cmp':
      if (n.cmp === 'eq') return { pairs: [[n.key, n.val]], exact: true };
      if (n.cmp === 'in') return { pairs: [...new Set(n.vals)].map((v): [string, string] => [n.key, v]), exact: true };
      return null;
    case 'and': {
      let best: Postings | null = null;
      for (const c of n.nodes) {
        const p = postingsOf(c);
        if (p !== null && (best === null || p.pairs.length < best.pairs.length)) best = p;
      }
      return best === null ? null : { pairs: best.pairs, exact: best.exact && n.nodes.length === 1 };
    }
    case 'or': {
      const pairs: [string, string][] = [];
      let exact = true;
      for (const c of n.nodes) {
        const p = postingsOf(c);
        if (p === null) return null;
        pairs.push(...p.pairs);
        exact &&= p.exact;
      }
      return { pairs, exact };
    }
    case 'not':
      return null;
  }
}

function valuesOf(n: FilterNode): number {
  switch (n.op) {
    case 'cmp': return n.cmp === 'in' || n.cmp === 'nin' ? n.vals.length : 0;
    case 'not': return valuesOf(n.node);
    default: return n.nodes.reduce((sum, c) => sum + valuesOf(c), 0);
  }
}

export function compileFilter(n: FilterNode): CompiledFilter {
  const p = postingsOf(n);
  return { test: predicate(n), postings: p?.pairs ?? null, exact: p?.exact ?? false, key: JSON.stringify(n), values: valuesOf(n) };
}
