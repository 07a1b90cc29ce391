// Where a shard's native publishes go: uWS topics reach its WebSockets; an HTTP fallback
// session is not a uWS socket, so it is reached in JavaScript (fallback/hub.ts wraps this).
// The publish stages (channels/publisher.ts, channels/filtered.ts, delta/deliver.ts) publish
// through a Fanout only.

import type { RecognizedString, TemplatedApp } from 'uWebSockets.js';

/** What a publishing connection offers: its own publish skips itself (uWS ws.publish). */
export interface FanoutSender {
  publish(topic: string, message: RecognizedString, isBinary?: boolean): boolean;
}

export interface Fanout {
  /** To every subscriber of the topic. */
  publish(topic: string, message: RecognizedString, isBinary?: boolean): boolean;
  /** To every subscriber of the topic but `sender` (which is one of them). */
  publishFrom(sender: FanoutSender, topic: string, message: RecognizedString): void;
  numSubscribers(topic: string): number;
}

/** The uWS App alone: its topics are every subscriber there is. */
export function nativeFanout(uws: Pick<TemplatedApp, 'publish' | 'numSubscribers'>): Fanout {
  return {
    publish: (topic, message, isBinary = false) => uws.publish(topic, message, isBinary),
    publishFrom: (sender, topic, message) => void sender.publish(topic, message, false),
    numSubscribers: (topic) => uws.numSubscribers(topic),
  };
}
