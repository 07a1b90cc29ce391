// The filter visitor of the publish pipeline's inbound side (channels/publisher.ts): the
// subscriptions that carry a tag filter, per channel, on this shard.
//
// A filtered socket is never on the channel's native uWS topic (ws/subscribe.ts), so
// uWS's publish of the channel reaches only the unfiltered subscribers. The filtered ones
// are reached in one of two ways, both looked up by the (key, value) pairs an event
// carries, never by testing every filter:
//   native  a filter that is exactly "key is one of these values" (eq, in, or of eq/in on
//           one key: filter/compile.ts `postings`, `exact`) puts the socket on one uWS
//           topic per pair, `<channel topic>\0<key length>:<key><value>`, plus the
//           channel's `\0*` topic for protocol messages. An event publishes natively to
//           the pair topic of each such key it carries: one key has one value per event,
//           so no socket gets it twice. This is uWS's own fan-out, which coalesces a
//           socket's messages into one write per loop turn; a ws.send per message and
//           socket costs ~30× more per delivery (bench/filters/, docs/performance.md).
//   index   any other filter goes into the channel's ChannelMatcher (filter/matcher.ts):
//           candidates by pair, the rest tested, each match sent with ws.send.
// The tags come from the frame header (bus/messages.ts): the message is never parsed.
//   untagged frame → no filtered socket (spec: events without tags match no filter)
//   TAGS_ALL       → every filtered socket (subscription_count, member events)
// The stage never takes a frame over: uWS's native publish of the channel follows.

import type { TemplatedApp } from 'uWebSockets.js';
import { TAGS_ALL, type PublishFrame } from '../bus/messages';
import type { CompiledFilter } from '../filter/compile';
import { ChannelMatcher, type MatchEntry } from '../filter/matcher';
import { parseTags } from '../filter/tags';
import type { Meters } from '../metrics/meters';
import type { InboundStage } from './publisher';

/** What the stage needs of a socket (a uWS WebSocket). */
export interface FilteredSocket {
  getUserData(): { closed: boolean; id: string };
  /** uWS: 0 backpressure (queued), 1 sent, 2 dropped. */
  send(message: Uint8Array, isBinary: boolean): number;
  subscribe(topic: string): boolean;
  unsubscribe(topic: string): boolean;
  isSubscribed(topic: string): boolean;
  publish(topic: string, message: Uint8Array, isBinary: boolean): boolean;
}

/** A filtered subscription: on native pair topics, or in the channel's index. */
export type FilterHandle<S> = { native: string[] } | { entry: MatchEntry<S> };

export interface FilteredSubscriptions<S extends FilteredSocket> extends InboundStage {
  /** Registers a socket's filter for the channel's topic; keep the handle to remove it. */
  add(topic: string, ws: S, filter: CompiledFilter): FilterHandle<S>;
  remove(topic: string, ws: S, handle: FilterHandle<S>): void;
  /** Filtered subscriptions of a topic on this shard (tests). */
  count(topic: string): number;
}

interface ChannelFilters<S> {
  /** Keys with native pair-topic subscribers, and how many subscriptions use each. */
  nativeKeys: Map<string, number>;
  nativeCount: number;
  index: ChannelMatcher<S>;
}

export interface FilteredDeps<S> {
  uws: Pick<TemplatedApp, 'publish' | 'numSubscribers'> | null;
  sockets: ReadonlyMap<string, S>;
  meters: Meters;
}

export function pairTopic(topic: string, key: string, value: string): string {
  return topic + '\0' + key.length + ':' + key + value;
}
const allTopic = (topic: string) => topic + '\0*';

/** The one key of a filter that is exactly "key ∈ values", else null. */
function nativeKey(f: CompiledFilter): string | null {
  if (!f.exact || f.postings === null || f.postings.length === 0) return null;
  const key = f.postings[0][0];
  return f.postings.every((p) => p[0] === key) ? key : null;
}

export function createFilteredSubscriptions<S extends FilteredSocket>(deps: FilteredDeps<S>): FilteredSubscriptions<S> {
  const { uws, sockets, meters } = deps;
  const byTopic = new Map<string, ChannelFilters<S>>();
  // Per-delivery state of the index path, read by the one visit function.
  let message: Uint8Array = new Uint8Array(0);
  let except = '';
  let sent = 0;
  const visit = (ws: S): void => {
    const d = ws.getUserData();
    if (d.closed || (except !== '' && d.id === except)) return;
    // uWS bounds what a socket may queue (maxBackpressure): a send over it is dropped
    // natively, as a native publish would skip the socket.
    ws.send(message, false);
    sent++;
  };

  /** Native publish to `t`, skipping the excluded socket the way channels/publisher.ts does. */
  function publishNative(f: PublishFrame, t: string): number {
    if (uws === null) return 0;
    if (f.except !== '') {
      const sender = sockets.get(f.except);
      if (sender && !sender.getUserData().closed && sender.isSubscribed(t)) {
        sender.publish(t, f.message, false);
        return meters.enabled ? uws.numSubscribers(t) - 1 : 0;
      }
    }
    uws.publish(t, f.message, false);
    return meters.enabled ? uws.numSubscribers(t) : 0;
  }

  function indexDeliver(f: PublishFrame, index: ChannelMatcher<S>, tags: ReturnType<typeof parseTags> | typeof TAGS_ALL): number {
    // A send can close a socket at its backpressure limit, and its close handler publish
    // (presence member_removed) into this stage again: the outer delivery's state is kept.
    const outer = { message, except, sent };
    message = f.message;
    except = f.except;
    sent = 0;
    try {
      if (tags === TAGS_ALL) index.forEach(visit);
      else index.match(tags.tags, tags.pairs, visit);
      return sent;
    } finally {
      ({ message, except, sent } = outer);
    }
  }

  return {
    add(topic, ws, filter) {
      let c = byTopic.get(topic);
      if (!c) byTopic.set(topic, (c = { nativeKeys: new Map(), nativeCount: 0, index: new ChannelMatcher<S>() }));
      const key = nativeKey(filter);
      if (key === null) return { entry: c.index.add(ws, filter) };
      const native = [allTopic(topic), ...filter.postings!.map(([k, v]) => pairTopic(topic, k, v))];
      for (const t of native) ws.subscribe(t);
      c.nativeKeys.set(key, (c.nativeKeys.get(key) ?? 0) + 1);
      c.nativeCount++;
      return { native };
    },
    remove(topic, ws, handle) {
      const c = byTopic.get(topic);
      if (!c) return;
      if ('entry' in handle) {
        c.index.remove(handle.entry);
      } else {
        // uWS drops a closed socket from every topic itself (and refuses calls on it).
        if (!ws.getUserData().closed) for (const t of handle.native) ws.unsubscribe(t);
        const key = handle.native.length > 1 ? keyOfPairTopic(topic, handle.native[1]) : null;
        if (key !== null) {
          const n = (c.nativeKeys.get(key) ?? 1) - 1;
          if (n === 0) c.nativeKeys.delete(key);
          else c.nativeKeys.set(key, n);
        }
        c.nativeCount--;
      }
      if (c.index.size === 0 && c.nativeCount === 0) byTopic.delete(topic);
    },
    count(topic) {
      const c = byTopic.get(topic);
      return c ? c.index.size + c.nativeCount : 0;
    },
    deliver(f: PublishFrame, topic: string): boolean {
      const tags = f.tags;
      if (tags === undefined || tags === null) return false;
      const c = byTopic.get(topic);
      if (c === undefined) return false;
      const parsed = tags === TAGS_ALL ? TAGS_ALL : parseTags(tags);
      let n = 0;
      if (c.nativeCount > 0) {
        if (parsed === TAGS_ALL) {
          n += publishNative(f, allTopic(topic));
        } else {
          const t = parsed.tags;
          for (const key of c.nativeKeys.keys()) {
            if (Object.hasOwn(t, key)) n += publishNative(f, pairTopic(topic, key, t[key]));
          }
        }
      }
      if (c.index.size > 0) n += indexDeliver(f, c.index, parsed);
      if (meters.enabled && n > 0) meters.delivered(f.app, f.message, n);
      return false;
    },
  };
}

/** The key of a pair topic made by pairTopic(topic, key, value). */
function keyOfPairTopic(topic: string, t: string): string {
  const rest = t.slice(topic.length + 1);
  const colon = rest.indexOf(':');
  const len = Number(rest.slice(0, colon));
  return rest.slice(colon + 1, colon + 1 + len);
}
