// The one native publish that skips a socket (a publish's socket_id): used by the publish
// pipeline (channels/publisher.ts), the filter stage (channels/filtered.ts) and the delta
// fan-out (delta/deliver.ts).
//
// uWS skips the publishing socket natively when the publish is made through it
// (`ws.publish`). That is only possible, and only needed, when the socket is still open
// (uWS throws on any call to a closed socket: "Invalid access of closed uWS.WebSocket") and
// subscribed to the topic: a socket never subscribed to any topic has no subscriber record,
// and `ws.publish` would publish nothing at all (e.g. a presence joiner whose member_added
// goes out before its own subscribe). Otherwise the app publishes to everyone.

import type { Fanout } from './fanout';
import type { ConnSocket } from './conn';

/** What the exclusion needs of the excluded socket (a uWS WebSocket). */
export type ExcludedSocket = Pick<ConnSocket, 'getUserData' | 'isSubscribed' | 'publish'>;

/** What it needs of the shard's fan-out (channels/fanout.ts): the uWS App, and the HTTP fallback sessions with it. */
export type TopicPublisher = Fanout;

/**
 * Publishes `message` to `topic`, skipping `sender` (undefined: nobody skipped). Returns
 * how many sockets it was handed to when `count` (messages_sent_total counts what is
 * handed to uWS), else 0: numSubscribers is a native call, made only for the metrics.
 */
export function publishExcept(uws: TopicPublisher, topic: string, message: string | Uint8Array, sender: ExcludedSocket | undefined, count: boolean): number {
  if (sender !== undefined && !sender.getUserData().closed && sender.isSubscribed(topic)) {
    uws.publishFrom(sender, topic, message);
    return count ? uws.numSubscribers(topic) - 1 : 0;
  }
  uws.publish(topic, message, false);
  return count ? uws.numSubscribers(topic) : 0;
}
