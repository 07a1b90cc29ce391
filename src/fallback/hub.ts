// Fan-out to HTTP fallback sessions. uWS topics reach only WebSockets, so the shard's
// Fanout (channels/fanout.ts) is wrapped: each publish goes to the native topic and then,
// in JavaScript, to the sessions on it (like the filtered sockets of channels/filtered.ts,
// sessions are few next to WebSockets). The frame is encoded as an `a` element once per
// publish, not once per session.

import type { RecognizedString } from 'uWebSockets.js';
import type { Fanout, FanoutSender } from '../channels/fanout';
import { encodeFrame } from './frames';
import { Session, type SessionTopics } from './session';

export type { SessionTopics };

export function createSessionTopics(native: Fanout): SessionTopics {
  const byTopic = new Map<string, Set<Session>>();

  function visit(topic: string, message: RecognizedString, except: Session | null): void {
    const set = byTopic.get(topic);
    if (set === undefined) return;
    const encoded = encodeFrame(typeof message === 'string' ? message : Buffer.from(message as Uint8Array).toString());
    for (const s of set) if (s !== except) s.enqueue(encoded);
  }

  return {
    add(topic, s) {
      let set = byTopic.get(topic);
      if (set === undefined) byTopic.set(topic, (set = new Set()));
      set.add(s);
    },
    remove(topic, s) {
      const set = byTopic.get(topic);
      if (set === undefined) return;
      set.delete(s);
      if (set.size === 0) byTopic.delete(topic);
    },
    publish(topic, message, isBinary = false) {
      native.publish(topic, message, isBinary);
      visit(topic, message, null);
      return true;
    },
    publishFrom(sender: FanoutSender, topic, message) {
      if (sender instanceof Session) {
        native.publish(topic, message, false);
        visit(topic, message, sender);
      } else {
        native.publishFrom(sender, topic, message);
        visit(topic, message, null);
      }
    },
    numSubscribers(topic) {
      return native.numSubscribers(topic) + (byTopic.get(topic)?.size ?? 0);
    },
  };
}
