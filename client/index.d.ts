// Types of ringcast's client (client/index.js).
import type Pusher from 'pusher-js';
import type { Channel } from 'pusher-js';

/** A tag filter (docs/protocol.md, "Tag filtering"). */
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

/** A pusher_internal:recovery answer (docs/protocol.md, "History, rewind and recovery"). */
export interface RecoveryInfo {
  epoch: string;
  serial: number;
  recovered: boolean;
  missed: number;
  reason?: 'no_history' | 'epoch_changed' | 'too_old' | 'too_many' | 'invalid' | 'unavailable';
  error?: string;
}

export interface RecoveryOptions {
  /** A resume the server could not do: reload the channel from REST history. Also emitted on the channel as `ringcast:recovery_failed`. */
  onFailed?: (channel: string, info: RecoveryInfo) => void;
  /** Which channels ask for positions (default: all). */
  channels?: (name: string) => boolean;
}

export interface Recovery {
  /** channel → the position of the last message this client got. */
  readonly positions: Map<string, { epoch: string; serial: number }>;
  forget(channel: string): void;
  detach(): void;
}

/** Exact recovery (client/recovery.js): every (re)subscribe resumes after the last message received. */
export function withRecovery(pusher: Pusher, opts?: RecoveryOptions): Recovery;
