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

/** Largest frame encoded into Fanout's reused buffer (bigger ones get a Buffer of their own). */
const MAX_SCRATCH = 1024 * 1024;

export class Fanout {
  private readonly meters: Meters;
  private scratch = Buffer.allocUnsafe(16 * 1024);
  /** True while a broadcast from `scratch` is being delivered. */
  private encoding = false;

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
    if (typeof message !== 'string') {
      this.bus.publishAll(app, channel, except, message);
      return;
    }
    // Encoded into a reused buffer: uWS copies what it publishes and the bus copies what it
    // keeps (bus.ts publish), so the bytes are only needed during the call. A Buffer per
    // publish cost a slice of Node's 8 KiB pool and a malloc'd pool every few dozen
    // (docs/performance.md). A broadcast made while one is delivering (a slow consumer
    // closed during a publish, its presence member_removed) gets its own Buffer.
    if (this.encoding || 3 * message.length > MAX_SCRATCH) {
      this.bus.publishAll(app, channel, except, Buffer.from(message));
      return;
    }
    if (3 * message.length > this.scratch.length) this.scratch = Buffer.allocUnsafe(Math.min(MAX_SCRATCH, Math.max(3 * message.length, 2 * this.scratch.length)));
    const n = this.scratch.write(message, 0, 'utf8');
    this.encoding = true;
    try {
      this.bus.publishAll(app, channel, except, this.scratch.subarray(0, n));
    } finally {
      this.encoding = false;
    }
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
