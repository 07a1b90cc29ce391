// The filter visitor of the publish pipeline's inbound side (channels/publisher.ts): the
// subscriptions that carry a tag filter, per channel, on this shard.
//
// A filtered socket is not subscribed to the channel's native uWS topic (ws/subscribe.ts),
// so uWS's publish reaches only the unfiltered subscribers; this stage sends to each
// filtered socket whose filter matches the frame's tags, found through the channel's index
// (filter/matcher.ts) rather than by testing every filter. The tags come from the frame
// header (bus/messages.ts): the message itself is never parsed here.
//   untagged frame      → no filtered socket (spec: events without tags match no filter)
//   TAGS_ALL            → every filtered socket (subscription_count, member events)
//   tags                → the matching filtered sockets
// The stage never takes a frame over: uWS's native publish follows for the others.

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
}

export interface FilteredSubscriptions<S extends FilteredSocket> extends InboundStage {
  /** Files a socket's filter under the channel's topic; keep the entry to remove it. */
  add(topic: string, ws: S, filter: CompiledFilter): MatchEntry<S>;
  remove(topic: string, entry: MatchEntry<S>): void;
  /** Filtered subscriptions of a topic on this shard (tests, metrics). */
  count(topic: string): number;
}

export function createFilteredSubscriptions<S extends FilteredSocket>(meters: Meters): FilteredSubscriptions<S> {
  const byTopic = new Map<string, ChannelMatcher<S>>();
  // Per-delivery state, read by the one visit function (no closure per frame).
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

  return {
    add(topic, ws, filter) {
      let m = byTopic.get(topic);
      if (!m) byTopic.set(topic, (m = new ChannelMatcher<S>()));
      return m.add(ws, filter);
    },
    remove(topic, entry) {
      const m = byTopic.get(topic);
      if (!m) return;
      m.remove(entry);
      if (m.size === 0) byTopic.delete(topic);
    },
    count(topic) {
      return byTopic.get(topic)?.size ?? 0;
    },
    deliver(f: PublishFrame, topic: string): boolean {
      const tags = f.tags;
      if (tags === undefined || tags === null) return false;
      const m = byTopic.get(topic);
      if (m === undefined) return false;
      // A send can close a socket at its backpressure limit, and its close handler publish
      // (presence member_removed) into this stage again: the outer delivery's state is kept.
      const outer = { message, except, sent };
      message = f.message;
      except = f.except;
      sent = 0;
      try {
        if (tags === TAGS_ALL) {
          m.forEach(visit);
        } else {
          const t = parseTags(tags);
          m.match(t.tags, t.pairs, visit);
        }
        if (meters.enabled && sent > 0) meters.delivered(f.app, f.message, sent);
      } finally {
        ({ message, except, sent } = outer);
      }
      return false;
    },
  };
}
