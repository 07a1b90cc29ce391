// Delivery of serialised messages to channel subscribers on every shard.
// Bytes are produced once per publish; each shard hands them to uWS's native topic
// publish, so JavaScript never loops over plain subscribers.

import type { TemplatedApp } from 'uWebSockets.js';
import type { Bus } from '../bus/bus';
import type { PublishFrame } from '../bus/messages';
import { metersFor, type Meters } from '../metrics/meters';
import { noMetrics, type MetricsSink } from '../metrics/types';
import type { Socket } from '../ws/types';

/** uWS topic of a channel. Channel names never contain a space, so this is unambiguous. */
export function topicOf(app: string, channel: string): string {
  return app + ' ' + channel;
}

/** Sees every local publish before uWS does (the slow-consumer watch, ws/backpressure.ts). */
export interface PublishGuard {
  beforePublish(topic: string, bytes: number, except: string): void;
}

export class Fanout {
  private readonly meters: Meters;

  constructor(
    private readonly bus: Bus,
    private readonly uws: TemplatedApp,
    private readonly sockets: Map<string, Socket>,
    metrics: MetricsSink = noMetrics,
    private readonly guard: PublishGuard | null = null,
  ) {
    this.meters = metersFor(metrics);
  }

  /**
   * Sends `message` to every subscriber of `channel` in the process, except the socket
   * `except` ('' for none). All or nothing: throws BusFullError, having sent it nowhere,
   * when a shard's queue is full.
   */
  broadcast(app: string, channel: string, except: string, message: string | Uint8Array): void {
    const bytes = typeof message === 'string' ? Buffer.from(message) : message;
    this.bus.publishAll(app, channel, except, bytes);
  }

  /** A publish frame arrived for this shard: hand it to uWS. */
  deliverLocal(f: PublishFrame): void {
    const topic = topicOf(f.app, f.channel);
    this.guard?.beforePublish(topic, f.message.length, f.except);
    if (f.except) {
      const sender = this.sockets.get(f.except);
      // ws.publish skips the publishing socket natively. It publishes nothing at all
      // when that socket has never subscribed to any topic (uWS: no subscriber record),
      // e.g. a presence joiner whose member_added goes out before its own subscribe;
      // a socket not subscribed to this topic cannot receive it anyway.
      if (sender && !sender.getUserData().closed && sender.isSubscribed(topic)) {
        sender.publish(topic, f.message, false);
        // messages_sent_total counts what is handed to uWS (sockets over their
        // backpressure limit skip it inside uWS, uncounted).
        if (this.meters.enabled) this.meters.delivered(f.app, f.message, this.uws.numSubscribers(topic) - 1);
        return;
      }
    }
    this.uws.publish(topic, f.message, false);
    if (this.meters.enabled) this.meters.delivered(f.app, f.message, this.uws.numSubscribers(topic));
  }
}
