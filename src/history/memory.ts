// history.driver memory: the messages of the history channels this shard owns, in this
// shard's memory. Per channel a window of consecutive serials (oldest first) bounded by
// the pattern's `size` and `ttl`; per shard a byte budget (history.memory_budget_mb /
// workers: the shards' budgets add up to the process's) past which the messages of the
// channel written least recently are dropped whole (its numbering stays: the next message
// goes on at the next serial). A channel's epoch and last serial outlive its messages for
// meta_ttl after its last activity and while it has subscribers (docs/protocol.md); a restart
// of the shard loses them, so every epoch starts with this store's random tag and a lost
// numbering is never continued under the same epoch.
//
// A channel that never had a message holds nothing: its position is derived, not stored
// (any number of subscribes to names nobody publishes on leave no entry). Its epoch is
// the store's tag, the meta_ttl period of now and the generation of its hash bucket; the
// first message creates the entry under that same epoch, so a position read while it was
// empty goes on. A numbering dropped after meta_ttl idle is created again in a later period;
// one dropped at the channel cap (max_channels) bumps its bucket's generation: either way a
// new epoch. Entries count in the byte budget (META_BYTES each) and are at most max_channels
// per store; past it the entry written least recently is forgotten (messages and numbering).
//
//   channels: Map (insertion order = least recently written first)
//     key "app channel" ─▶ { epoch, last, first, msgs[head…], bytes, touched }
//     msgs[head + i].serial === first + i       (no gap in what is stored)

import { randomBytes } from 'node:crypto';
import type { ChannelHistorySetting } from '../config/types';
import type { HistoryStore, PageQuery, Position, StoreEvents, StoredMessage } from './types';

interface Log {
  app: string;
  epoch: string;
  /** Last serial given. */
  last: number;
  msgs: StoredMessage[];
  /** Index of the oldest kept message in msgs. */
  head: number;
  bytes: number;
  /** Last append or position read (ms): meta_ttl counts from here. */
  touched: number;
  ttlMs: number;
}

/** Bytes counted per stored message besides its text (object, array slot). */
const ENTRY_OVERHEAD = 64;
/** Bytes counted per channel entry besides its name (the Log, its Map slot, its key). */
const META_BYTES = 200;
/** Hash buckets of the generations of forgotten numberings (a Uint32Array: 64 KiB). */
const BUCKETS = 16_384;

export interface MemoryStoreOptions {
  /** Bytes of message text this store may keep. */
  budgetBytes: number;
  metaTtlMs: number;
  /** Channel entries this store keeps at most (history.max_channels_per_shard). */
  maxChannels?: number;
  events?: StoreEvents;
}

export class MemoryHistoryStore implements HistoryStore {
  private readonly logs = new Map<string, Log>();
  /** Random per store (per shard start): epochs of a lost numbering never repeat. */
  private readonly tag = randomBytes(4).toString('hex');
  private readonly gens = new Uint32Array(BUCKETS);
  private bytes = 0;
  private messages = 0;

  constructor(private readonly o: MemoryStoreOptions) {}

  /** The epoch of a channel without an entry (see top). */
  private derived(key: string, nowMs: number): string {
    const g = this.gens[bucketOf(key)];
    return this.tag + '.' + Math.floor(nowMs / this.o.metaTtlMs).toString(36) + (g === 0 ? '' : '.' + g.toString(36));
  }

  private log(app: string, channel: string, nowMs: number): Log {
    const key = app + ' ' + channel;
    let l = this.logs.get(key);
    if (l === undefined) {
      const max = this.o.maxChannels ?? Infinity;
      while (this.logs.size >= max) this.forget(this.logs.keys().next().value!);
      l = { app, epoch: this.derived(key, nowMs), last: 0, msgs: [], head: 0, bytes: 0, touched: nowMs, ttlMs: 0 };
      this.logs.set(key, l);
      this.bytes += metaBytes(key);
    }
    return l;
  }

  /** Drops a channel's entry (its messages and numbering); `bump`: the next one of the channel takes a new epoch in this period. */
  private forget(key: string, bump = true): void {
    const l = this.logs.get(key)!;
    this.logs.delete(key);
    const n = l.msgs.length - l.head;
    this.add(l, -n, -l.bytes);
    this.bytes -= metaBytes(key);
    if (bump) {
      this.gens[bucketOf(key)]++;
      this.o.events?.forgotten?.(l.app);
    }
  }

  append(app: string, channel: string, s: ChannelHistorySetting, message: string, nowMs: number, tags?: string): Position {
    const key = app + ' ' + channel;
    const l = this.log(app, channel, nowMs);
    // most recently written last: the budget evicts from the front
    this.logs.delete(key);
    this.logs.set(key, l);
    l.touched = nowMs;
    l.ttlMs = s.ttl * 1000;
    const serial = ++l.last;
    const m: StoredMessage = { serial, message, timeMs: nowMs };
    if (tags !== undefined) m.tags = tags;
    l.msgs.push(m);
    this.add(l, 1, sizeOf(m));
    this.expire(l, nowMs);
    while (l.msgs.length - l.head > s.size) this.dropOldest(l);
    this.compact(l);
    if (this.bytes > this.o.budgetBytes) this.evict(l);
    return { epoch: l.epoch, serial };
  }

  rollback(app: string, channel: string): void {
    const l = this.logs.get(app + ' ' + channel);
    if (l === undefined || l.last === 0) return;
    const m = l.msgs[l.msgs.length - 1];
    if (m !== undefined && l.msgs.length > l.head && m.serial === l.last) {
      l.msgs.pop();
      this.add(l, -1, -sizeOf(m));
    }
    l.last--;
  }

  position(app: string, channel: string, nowMs: number): Position {
    const key = app + ' ' + channel;
    const l = this.logs.get(key);
    if (l === undefined) return { epoch: this.derived(key, nowMs), serial: 0 };
    l.touched = Math.max(l.touched, nowMs);
    return { epoch: l.epoch, serial: l.last };
  }

  since(app: string, channel: string, after: number, nowMs: number): StoredMessage[] | null {
    const l = this.logs.get(app + ' ' + channel);
    if (l === undefined) return after === 0 ? [] : null;
    this.expire(l, nowMs);
    if (after >= l.last) return [];
    const first = l.msgs.length > l.head ? l.msgs[l.head].serial : l.last + 1;
    if (after + 1 < first) return null;
    return l.msgs.slice(l.head + (after + 1 - first));
  }

  last(app: string, channel: string, n: number, nowMs: number): StoredMessage[] {
    const l = this.logs.get(app + ' ' + channel);
    if (l === undefined || n <= 0) return [];
    this.expire(l, nowMs);
    return l.msgs.slice(Math.max(l.head, l.msgs.length - n));
  }

  page(app: string, channel: string, q: PageQuery, nowMs: number): { items: StoredMessage[]; more: boolean } {
    const l = this.logs.get(app + ' ' + channel);
    if (l === undefined) return { items: [], more: false };
    this.expire(l, nowMs);
    const kept = l.msgs.length - l.head;
    if (kept === 0) return { items: [], more: false };
    const first = l.msgs[l.head].serial;
    // serials lo … hi (inclusive) match the bounds
    const lo = Math.max(first, q.after + 1);
    const hi = Math.min(l.last, q.before - 1);
    if (lo > hi) return { items: [], more: false };
    const at = (serial: number) => l.msgs[l.head + serial - first];
    const items: StoredMessage[] = [];
    if (q.direction === 'forwards') {
      for (let s = lo; s <= hi && items.length < q.limit; s++) items.push(at(s));
      return { items, more: lo + items.length <= hi };
    }
    for (let s = hi; s >= lo && items.length < q.limit; s--) items.push(at(s));
    return { items, more: hi - items.length >= lo };
  }

  sweep(nowMs: number, hasSubscribers: (app: string, channel: string) => boolean): void {
    for (const [key, l] of this.logs) {
      this.expire(l, nowMs);
      this.compact(l);
      if (l.msgs.length === l.head && nowMs - l.touched >= this.o.metaTtlMs && !hasSubscribers(l.app, key.slice(l.app.length + 1))) {
        // idle for meta_ttl: a channel created again is in a later meta_ttl period, a new epoch
        this.forget(key, false);
      }
    }
  }

  stats(): { channels: number; messages: number; bytes: number } {
    return { channels: this.logs.size, messages: this.messages, bytes: this.bytes };
  }

  private add(_l: Log, messages: number, bytes: number): void {
    _l.bytes += bytes;
    this.bytes += bytes;
    this.messages += messages;
  }

  private dropOldest(l: Log): void {
    const m = l.msgs[l.head];
    l.head++;
    this.add(l, -1, -sizeOf(m));
  }

  private expire(l: Log, nowMs: number): void {
    while (l.msgs.length > l.head && l.msgs[l.head].timeMs + l.ttlMs <= nowMs) this.dropOldest(l);
  }

  /** Gives back the array slots of dropped messages once they are half of it. */
  private compact(l: Log): void {
    if (l.head === l.msgs.length) {
      l.msgs = [];
      l.head = 0;
    } else if (l.head > 32 && l.head * 2 > l.msgs.length) {
      l.msgs = l.msgs.slice(l.head);
      l.head = 0;
    }
  }

  /** Over budget: drops the messages of the channels written least recently, never `keep`'s newest. */
  private evict(keep: Log): void {
    for (const [key, l] of this.logs) {
      if (this.bytes <= this.o.budgetBytes) return;
      if (l === keep) break;
      const n = l.msgs.length - l.head;
      if (n === 0) {
        // the entries count too: one without messages is forgotten (a new epoch next time)
        this.forget(key);
        continue;
      }
      const b = l.bytes;
      this.add(l, -n, -b);
      l.msgs = [];
      l.head = 0;
      this.o.events?.evicted(l.app, n, b);
    }
    // still over: the newest channel alone is bigger than the budget; keep its last message
    while (this.bytes > this.o.budgetBytes && keep.msgs.length - keep.head > 1) {
      const bytes = sizeOf(keep.msgs[keep.head]);
      this.dropOldest(keep);
      this.o.events?.evicted(keep.app, 1, bytes);
    }
    this.compact(keep);
  }
}

function metaBytes(key: string): number {
  return META_BYTES + 2 * key.length;
}

/** FNV-1a of the key, to a bucket of the generations. */
function bucketOf(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return (h >>> 0) % BUCKETS;
}

function sizeOf(m: StoredMessage): number {
  return 2 * (m.message.length + (m.tags?.length ?? 0)) + ENTRY_OVERHEAD;
}
