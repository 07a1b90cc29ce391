// The filtered subscribers of one channel, indexed so that an event is matched without
// testing every filter: a filter with postings (compile.ts: eq, in, and/or of them) is
// filed under each of its (key, value) pairs, and an event looks up only the pairs it
// carries. With 10,000 subscribers filtering `eq` over 100 values, an event tagged with
// one value visits its 100 subscribers and tests none. Filters without postings (gt,
// neq, not, …) are kept aside and tested against every tagged event.

import type { CompiledFilter, Tags } from './compile';

export interface MatchEntry<T> {
  readonly sub: T;
  readonly filter: CompiledFilter;
  /** The match() call that last visited this entry (an `or` can file it under several pairs). */
  seen: number;
}

export class ChannelMatcher<T> {
  /** key → value → entries filed under that pair. */
  private readonly byPair = new Map<string, Map<string, Set<MatchEntry<T>>>>();
  /** Entries without postings: tested on every tagged event. */
  private readonly rest = new Set<MatchEntry<T>>();
  private stamp = 0;
  private count = 0;

  get size(): number {
    return this.count;
  }

  add(sub: T, filter: CompiledFilter): MatchEntry<T> {
    const e: MatchEntry<T> = { sub, filter, seen: 0 };
    this.count++;
    if (filter.postings === null) {
      this.rest.add(e);
      return e;
    }
    for (const [k, v] of filter.postings) {
      let values = this.byPair.get(k);
      if (!values) this.byPair.set(k, (values = new Map<string, Set<MatchEntry<T>>>()));
      let set = values.get(v);
      if (!set) values.set(v, (set = new Set<MatchEntry<T>>()));
      set.add(e); // a pair listed twice files the entry once
    }
    return e;
  }

  remove(e: MatchEntry<T>): void {
    if (e.filter.postings === null) {
      if (this.rest.delete(e)) this.count--;
      return;
    }
    let found = false;
    for (const [k, v] of e.filter.postings) {
      const values = this.byPair.get(k);
      const set = values?.get(v);
      if (!set || !set.delete(e)) continue;
      found = true;
      if (set.size === 0) {
        values!.delete(v);
        if (values!.size === 0) this.byPair.delete(k);
      }
    }
    if (found) this.count--;
  }

  /**
   * Calls visit once for each entry whose filter matches `tags`; `pairs` are the tags'
   * own [key, value] pairs (Object.entries(tags), computed once per event by the caller).
   */
  match(tags: Tags, pairs: readonly (readonly [string, string])[], visit: (sub: T) => void): void {
    const stamp = ++this.stamp;
    if (this.byPair.size > 0) {
      for (let i = 0; i < pairs.length; i++) {
        const set = this.byPair.get(pairs[i][0])?.get(pairs[i][1]);
        if (set === undefined) continue;
        for (const e of set) {
          if (e.seen === stamp) continue;
          e.seen = stamp;
          if (e.filter.exact || e.filter.test(tags)) visit(e.sub);
        }
      }
    }
    for (const e of this.rest) if (e.filter.test(tags)) visit(e.sub);
  }

  /** Every entry once (messages that reach every subscriber: member events, counts). */
  forEach(visit: (sub: T) => void): void {
    const stamp = ++this.stamp;
    for (const values of this.byPair.values()) {
      for (const set of values.values()) {
        for (const e of set) {
          if (e.seen === stamp) continue;
          e.seen = stamp;
          visit(e.sub);
        }
      }
    }
    for (const e of this.rest) visit(e.sub);
  }
}
