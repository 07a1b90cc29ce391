// The sequencer's state: streams, their numbers and their bases. Pure (no thread, no bus):
// test/delta/streams.test.ts drives it directly.
//
//   channel ──▶ groups (one per conflation value; '' without a conflation key), FIFO
//                 │  at most max_conflation_keys: the oldest group goes first
//                 ├─ entries: the group's last messages, FIFO, at most max_messages_per_key
//                 └─ streams: one per event name: id, next seq, deltas since the last full,
//                             base = its latest entry while that is still kept
//
// Rules
//  1. A stream numbers its messages from 0; its base is always its previous message, so a
//     subscriber that holds seq N can take the delta to N+1 (base_index = N).
//  2. A message goes full when the stream has no base (first message, base evicted, group
//     or state expired), when `"delta": false` was published, every
//     full_message_interval deltas, or when it is shorter than min_message_size (the last
//     two unless `"delta": true` was published). The sequencer sends it full as well when
//     the pusher:delta message is not smaller than the full message on the wire (known only
//     once computed: it does not reset the interval).
//  3. Evicting a group or expiring it drops its streams: their ids are handed to the shards
//     with the channel's next message (`dropped`), which forget their subscriber sets. A
//     channel expired whole is forgotten with its list; its streams' ids are never reused
//     (a new stream gets a new id), and the shards drop idle streams by the same age.
//  4. delta_compression.cluster_coordination: a message may come with the stream position
//     the cluster agreed on (delta/coord.ts). It is the message's seq on every node, and
//     the interval is counted on it: full at every position p with p % (interval + 1) = 0,
//     so every node sends the same messages in full, a node that starts late included
//     (its first message goes full: no base, rule 2). A position not after the base's
//     (the numbering restarted: a new coordinator) goes full too. Without a position (the
//     backend or the coordinator did not answer) rule 2 decides, locally.

import { Force } from './wire';
import type { ChannelDelta } from './settings';

export interface Entry {
  stream: number;
  event: string;
  seq: number;
  /** The envelope as published (no `__` fields). */
  content: string;
}

interface Stream {
  id: number;
  event: string;
  nextSeq: number;
  sinceFull: number;
  base: Entry | null;
}

interface Group {
  entries: Entry[];
  streams: Map<string, Stream>;
  lastUsed: number;
}

interface ChannelState {
  groups: Map<string, Group>;
  dropped: number[];
  lastUsed: number;
}

export interface Decision {
  stream: number;
  seq: number;
  /** The base to compute the delta from; null: the message goes full (rule 2). */
  base: Entry | null;
  /** Stream ids the shards may forget (rule 3); empty most of the time. */
  dropped: number[];
}

export interface StreamOptions {
  fullMessageInterval: number;
  minMessageSize: number;
  maxStateAgeMs: number;
}

export interface CacheStates {
  /** conflation value → the latest message of each of the group's streams, oldest first. */
  states: Record<string, { content: string; seq: number }[]>;
  /** The streams whose latest message is among them (a syncing socket is in step with these). */
  streams: number[];
}

const NONE: number[] = [];

export class StreamTable {
  private readonly channels = new Map<string, ChannelState>();
  private nextId = 1;

  constructor(private readonly opts: StreamOptions) {}

  /** Numbers one message of (channel, event, value) and decides full or delta (rules 1–3). */
  next(key: string, event: string, value: string, envelope: string, bytes: number, ch: ChannelDelta, force: Force, now: number, position: number | null = null): Decision {
    let c = this.channels.get(key);
    if (c === undefined) {
      c = { groups: new Map(), dropped: [], lastUsed: now };
      this.channels.set(key, c);
    }
    c.lastUsed = now;
    let g = c.groups.get(value);
    if (g === undefined) {
      g = { entries: [], streams: new Map(), lastUsed: now };
      c.groups.set(value, g);
      while (c.groups.size > ch.maxConflationKeys) {
        const [oldest, og] = c.groups.entries().next().value!;
        c.groups.delete(oldest);
        for (const s of og.streams.values()) c.dropped.push(s.id);
      }
    }
    g.lastUsed = now;
    let s = g.streams.get(event);
    if (s === undefined) {
      s = { id: this.nextId++, event, nextSeq: 0, sinceFull: 0, base: null };
      g.streams.set(event, s);
    }
    const o = this.opts;
    let seq: number;
    let wantDelta: boolean;
    if (position === null) {
      seq = s.nextSeq++;
      wantDelta = s.base !== null && force !== Force.Full &&
        (force === Force.Delta || (s.sinceFull < o.fullMessageInterval && bytes >= o.minMessageSize));
    } else {
      // rule 4: the cluster's position is the seq, and the interval is counted on it
      seq = position;
      s.nextSeq = position + 1;
      const periodic = position % (o.fullMessageInterval + 1) === 0;
      wantDelta = s.base !== null && s.base.seq < position && force !== Force.Full &&
        (force === Force.Delta || (!periodic && bytes >= o.minMessageSize));
    }
    const base = wantDelta ? s.base : null;
    s.sinceFull = wantDelta ? s.sinceFull + 1 : 0;
    const entry: Entry = { stream: s.id, event, seq, content: envelope };
    s.base = entry;
    g.entries.push(entry);
    while (g.entries.length > ch.maxMessagesPerKey) {
      const gone = g.entries.shift()!;
      // the stream's base leaves the cache: its next message goes full
      for (const st of g.streams.values()) if (st.base === gone) st.base = null;
    }
    let dropped = NONE;
    if (c.dropped.length > 0) {
      dropped = c.dropped;
      c.dropped = [];
    }
    return { stream: s.id, seq, base, dropped };
  }

  /** What a socket subscribing now needs to take deltas from its first message (delta_cache_sync). */
  states(key: string): CacheStates {
    const out: CacheStates = { states: {}, streams: [] };
    const c = this.channels.get(key);
    if (c === undefined) return out;
    // Only each stream's latest message: all a client needs to take the next delta (the
    // older entries kept would cost every subscriber bandwidth for nothing).
    for (const [value, g] of c.groups) {
      const list: { content: string; seq: number }[] = [];
      for (const e of g.entries) {
        const s = g.streams.get(e.event);
        if (s?.base === e) {
          list.push({ content: e.content, seq: e.seq });
          out.streams.push(s.id);
        }
      }
      if (list.length > 0) out.states[value] = list;
    }
    return out;
  }

  /** Forgets groups unused for max_state_age_secs (their streams restart at 0, in full). */
  sweep(now: number): void {
    const limit = now - this.opts.maxStateAgeMs;
    for (const [key, c] of this.channels) {
      for (const [value, g] of c.groups) {
        if (g.lastUsed > limit) continue;
        c.groups.delete(value);
        for (const s of g.streams.values()) c.dropped.push(s.id);
      }
      // a channel with nothing kept and nothing to tell the shards goes entirely
      if (c.groups.size === 0 && c.lastUsed <= limit) this.channels.delete(key);
    }
  }

  /** Forgets a key's state at once (a tag filter no shard uses any more). */
  drop(key: string): void {
    this.channels.delete(key);
  }

  /** Channels with state (metrics, tests). */
  get size(): number {
    return this.channels.size;
  }
}
