// Types of ringcast's client (client/index.js).
import type Pusher from 'pusher-js';
import type { Channel } from 'pusher-js';

/** A tag filter (PROTOCOL.md, "Tag filtering"). */
export type TagFilter =
  | { op: 'and' | 'or'; nodes: TagFilter[] }
  | { op: 'not'; nodes: [TagFilter] }
  | { key: string; cmp: 'eq' | 'neq' | 'sw' | 'ew' | 'ct' | 'startsWith' | 'endsWith' | 'contains'; val: string }
  | { key: string; cmp: 'in' | 'nin'; vals: string[] }
  | { key: string; cmp: 'ex' | 'nex' | 'exists' | 'notExists' }
  | { key: string; cmp: 'gt' | 'gte' | 'lt' | 'lte'; val: number | string };

export interface SubscribeOptions {
  filter?: TagFilter | null;
}

export interface RingcastClient {
  readonly pusher: Pusher;
  subscribe(channelName: string, options?: SubscribeOptions): Channel;
  unsubscribe(channelName: string): void;
}

export function ringcast(pusher: Pusher): RingcastClient;

export const Filter: {
  eq(key: string, val: string): TagFilter;
  neq(key: string, val: string): TagFilter;
  in(key: string, vals: string[]): TagFilter;
  nin(key: string, vals: string[]): TagFilter;
  exists(key: string): TagFilter;
  notExists(key: string): TagFilter;
  startsWith(key: string, val: string): TagFilter;
  endsWith(key: string, val: string): TagFilter;
  contains(key: string, val: string): TagFilter;
  gt(key: string, val: number | string): TagFilter;
  gte(key: string, val: number | string): TagFilter;
  lt(key: string, val: number | string): TagFilter;
  lte(key: string, val: number | string): TagFilter;
  and(...nodes: TagFilter[]): TagFilter;
  or(...nodes: TagFilter[]): TagFilter;
  not(node: TagFilter): TagFilter;
};
