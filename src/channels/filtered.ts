// The filter visitor of the publish pipeline's inbound side (channels/publisher.ts): the
// subscriptions that carry a tag filter, per channel, on this shard.
//
// A filtered socket is never on the channel's native uWS topic (ws/subscribe.ts), so
// uWS's publish of the channel reaches only the unfiltered subscribers. Every filtered
// socket is reached through native topics too, found by the (key, value) pairs an event
// carries, never by testing every subscriber's filter:
//   pairs   a filter that is exactly "key is one of these values" (eq, in, or of eq/in on
//           one key: filter/compile.ts `postings`, `exact`) puts the socket on one topic
//           per pair, `<topic>\0<key length>:<key><value>`. An event publishes to the pair
//           topic of each such key it carries: one value per key, so never twice.
//   shared  any other filter: the sockets with an equal filter (CompiledFilter.key) share
//           one topic `<topic>\0f<filter>`, and the channel's ChannelMatcher
//           (filter/matcher.ts) holds one entry per distinct filter: candidates by pair,
//           then tested; filters without postings tested per tagged event. Each matching
//           filter is one native publish, whatever its number of subscribers.
//   all     every filtered socket is also on `<topic>\0*`, for TAGS_ALL frames
//           (subscription_count, member events).
// Why native topics and not ws.send per socket: a uWS call made from JavaScript outside a
// uWS callback (the bus drains on Node's loop) costs ~10 µs of CPU here, so one per
// delivery was 15x the CPU of the channel's own fan-out (bench/filters/,
// docs/benchmarks.md). The tags come from the frame header (bus/messages.ts): the
// message is never parsed here. An untagged frame reaches no filtered socket (spec:
// events without tags match no filter). The stage never takes a frame over: uWS's native
// publish of the channel follows.

import { TAGS_ALL, type PublishFrame } from '../bus/messages';
import type { CompiledFilter } from '../filter/compile';
import { ChannelMatcher, type MatchEntry } from '../filter/matcher';
import { parseTags } from '../filter/tags';
import type { Meters } from '../metrics/meters';
import { publishExcept } from './exclude';
import type { Fanout } from './fanout';
import type { InboundStage } from './publisher';
import type { ConnSocket } from './conn';

/** What the stage needs of a socket (a uWS WebSocket). */
export type FilteredSocket = Pick<ConnSocket<{ closed: boolean; id: string }>, 'getUserData' | 'subscribe' | 'unsubscribe' | 'isSubscribed' | 'publish'>;

/** A filtered subscription: on native pair topics (of one key), or on its filter's shared topic. */
export type FilterHandle = { native: string[]; key: string } | { filter: string };

/** One distinct filter of the index: its subscribers share a native topic. */
interface SharedFilter {
  topic: string;
  refs: number;
}

export interface FilteredSubscriptions<S extends FilteredSocket> extends InboundStage {
  /** Registers a socket's filter for the channel's topic; keep the handle to remove it. */
  add(topic: string, ws: S, filter: CompiledFilter): FilterHandle;
  remove(topic: string, ws: S, handle: FilterHandle): void;
  /** Slow consumers (ws/backpressure.ts): takes the subscription off its native topics, or back on. */
  pause(topic: string, ws: S, handle: FilterHandle, paused: boolean): void;
  /** Filtered subscriptions of a topic on this shard (tests). */
  count(topic: string): number;
}

interface ChannelFilters {
  /** Keys with native pair-topic subscribers, and how many subscriptions use each. */
  nativeKeys: Map<string, number>;
  nativeCount: number;
  /** The other filters, one entry per distinct filter (CompiledFilter.key). */
  index: ChannelMatcher<SharedFilter>;
  distinct: Map<string, MatchEntry<SharedFilter>>;
  indexCount: number;
}

export interface FilteredDeps<S> {
  uws: Fanout | null;
  sockets: ReadonlyMap<string, S>;
  meters: Meters;
}

export function pairTopic(topic: string, key: string, value: string): string {
  return topic + '\0' + key.length + ':' + key + value;
}
const allTopic = (topic: string) => topic + '\0*';
const filterTopic = (topic: string, filterKey: string) => topic + '\0f' + filterKey;

/**
 * Most native pair topics one subscription is put on. A filter with more pairs shares its
 * filter's topic instead (one native topic per distinct filter, whatever its values), so a
 * long `in` list costs no native topic per value (limits.max_filter_values bounds the rest).
 */
export const MAX_NATIVE_PAIRS = 64;

/** The one key of a filter that is exactly "key ∈ values" (at most MAX_NATIVE_PAIRS of them), else null. */
function nativeKey(f: CompiledFilter): string | null {
  if (!f.exact || f.postings === null || f.postings.length === 0 || f.postings.length > MAX_NATIVE_PAIRS) return null;
  const key = f.postings[0][0];
  return f.postings.every((p) => p[0] === key) ? key : null;
}

export function createFilteredSubscriptions<S extends FilteredSocket>(deps: FilteredDeps<S>): FilteredSubscriptions<S> {
  const { uws, sockets, meters } = deps;
  const byTopic = new Map<string, ChannelFilters>();
  // The frame being delivered through the index, read by the one visit function.
  let frame: PublishFrame | null = null;
  let sent = 0;
  const visit = (shared: SharedFilter): void => {
    sent += publishNative(frame!, shared.topic);
  };

  /** Native publish to `t`, skipping the excluded socket (channels/exclude.ts). */
  function publishNative(f: PublishFrame, t: string): number {
    if (uws === null) return 0;
    return publishExcept(uws, t, f.message, f.except !== '' ? sockets.get(f.except) : undefined, meters.enabled);
  }

  function indexDeliver(f: PublishFrame, index: ChannelMatcher<SharedFilter>, tags: ReturnType<typeof parseTags>): number {
    // Kept across a nested delivery (a close handler publishing while this one runs).
    const outer = { frame, sent };
    frame = f;
    sent = 0;
    try {
      index.match(tags.tags, tags.pairs, visit);
      return sent;
    } finally {
      ({ frame, sent } = outer);
    }
  }

  return {
    add(topic, ws, filter) {
      let c = byTopic.get(topic);
      if (!c) byTopic.set(topic, (c = { nativeKeys: new Map(), nativeCount: 0, index: new ChannelMatcher<SharedFilter>(), distinct: new Map(), indexCount: 0 }));
      ws.subscribe(allTopic(topic));
      const key = nativeKey(filter);
      if (key === null) {
        let e = c.distinct.get(filter.key);
        if (!e) {
          e = c.index.add({ topic: filterTopic(topic, filter.key), refs: 0 }, filter);
          c.distinct.set(filter.key, e);
        }
        e.sub.refs++;
        c.indexCount++;
        ws.subscribe(e.sub.topic);
        return { filter: filter.key };
      }
      const native = filter.postings!.map(([k, v]) => pairTopic(topic, k, v));
      for (const t of native) ws.subscribe(t);
      c.nativeKeys.set(key, (c.nativeKeys.get(key) ?? 0) + 1);
      c.nativeCount++;
      return { native, key };
    },
    remove(topic, ws, handle) {
      const c = byTopic.get(topic);
      if (!c) return;
      // uWS drops a closed socket from every topic itself (and refuses calls on it).
      const open = !ws.getUserData().closed;
      if (open) ws.unsubscribe(allTopic(topic));
      if ('filter' in handle) {
        const e = c.distinct.get(handle.filter);
        if (!e) return;
        if (open) ws.unsubscribe(e.sub.topic);
        c.indexCount--;
        if (--e.sub.refs === 0) {
          c.index.remove(e);
          c.distinct.delete(handle.filter);
        }
      } else {
        if (open) for (const t of handle.native) ws.unsubscribe(t);
        const n = (c.nativeKeys.get(handle.key) ?? 1) - 1;
        if (n === 0) c.nativeKeys.delete(handle.key);
        else c.nativeKeys.set(handle.key, n);
        c.nativeCount--;
      }
      if (c.indexCount === 0 && c.nativeCount === 0) byTopic.delete(topic);
    },
    pause(topic, ws, handle, paused) {
      if (ws.getUserData().closed) return;
      const topics = 'filter' in handle ? [filterTopic(topic, handle.filter)] : handle.native;
      for (const t of [allTopic(topic), ...topics]) {
        if (paused) ws.unsubscribe(t);
        else ws.subscribe(t);
      }
    },
    count(topic) {
      const c = byTopic.get(topic);
      return c ? c.indexCount + c.nativeCount : 0;
    },
    deliver(f: PublishFrame, topic: string): boolean {
      const tags = f.tags;
      if (tags === undefined || tags === null) return false;
      const c = byTopic.get(topic);
      if (c === undefined) return false;
      let n = 0;
      if (tags === TAGS_ALL) {
        n = publishNative(f, allTopic(topic));
      } else {
        const parsed = parseTags(tags);
        const t = parsed.tags;
        for (const key of c.nativeKeys.keys()) {
          if (Object.hasOwn(t, key)) n += publishNative(f, pairTopic(topic, key, t[key]));
        }
        if (c.indexCount > 0) n += indexDeliver(f, c.index, parsed);
      }
      if (meters.enabled && n > 0) meters.delivered(f.app, f.message, n);
      return false;
    },
  };
}
