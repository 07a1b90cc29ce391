// Positive markers for checks that something did NOT happen (no duplicate, no member
// event, no echo...): never a fixed sleep. After the action under test, the test publishes
// a marker through the HTTP API and waits until every client has it; whatever the action
// made the server send a client is then already there, and the test asserts on the frames.
//
// Why that holds (docs/architecture.md, "Rings" → "Ordering"):
//  - every frame on the bus carries a stamp taken when it is written, and every shard
//    delivers frames in stamp order; uWS queues one socket's publishes in one list in
//    publish order, whatever their topic (its TopicTree), and sends them in that order;
//  - the marker is written after the test saw an answer or an event that came after the
//    frames of the action (a publish answered 200, a subscription_succeeded that the
//    channel's owner sent after its member events, an event a peer received...).
// Best on the channel the action touched (per-channel order, the plainest guarantee). A
// client that is not on it (unsubscribed, refused, an outsider) gets its marker on a
// channel of its own, which rests on the same stamp order across channels.
//
// A change that happens later on a timer (the owner's coalesced subscription_count) or
// after a close (presence_leave) is not covered: wait for a positive sign of it first
// (test/e2e/subscription-count.test.ts, the presence tests).

import type { Channel } from 'pusher-js';
import { signedPost, type AppCreds } from './http';
import { APP, type Frame, type RawClient, type TestServer } from './server';

/** Event name of the markers (settle takes them out of `frames`). */
export const MARKER = 'test-marker';

let seq = 0;

export interface SettleOptions {
  /** App of the channel (default APP). */
  app?: AppCreds;
  /** Headers of the marker publish (e.g. an X-Forwarded-For of its own under a per-IP limit). */
  headers?: Record<string, string>;
  timeoutMs?: number;
}

/** Publishes one marker to `channel` through the HTTP API; returns its data (a unique string). */
async function publishMarker(srv: TestServer, channel: string, opts: SettleOptions): Promise<string> {
  // A string that is not JSON: pusher-js hands it over as it is.
  const id = `marker-${process.pid}-${++seq}`;
  const r = await signedPost(srv.port, opts.app ?? APP, 'events', { name: MARKER, channel, data: id }, opts.headers);
  if (r.status !== 200) throw new Error(`marker publish to ${channel}: ${r.status} ${r.text}`);
  return id;
}

/**
 * For each channel in turn: publishes a marker and waits until every client (each
 * subscribed to that channel) has received it. The marker frames are taken out of
 * `client.frames`; what is left there arrived before them (or is later still).
 */
export async function settle(srv: TestServer, clients: RawClient | RawClient[], channels: string | string[], opts: SettleOptions = {}): Promise<void> {
  for (const channel of [channels].flat()) {
    const id = await publishMarker(srv, channel, opts);
    const isMarker = (f: Frame) => f.event === MARKER && f.channel === channel && f.data === id;
    // next() also finds a marker that arrived before the publish was answered.
    await Promise.all([clients].flat().map((c) => c.next(isMarker, opts.timeoutMs ?? 5000)));
  }
}

/** The same for a pusher-js channel object: resolves once the marker reached its handlers. */
export async function settleChannel(srv: TestServer, channel: Channel, opts: SettleOptions = {}): Promise<void> {
  const ms = opts.timeoutMs ?? 5000;
  const seen = new Set<unknown>();
  let check: () => void = () => undefined;
  const onMarker = (data: unknown) => {
    seen.add(data);
    check();
  };
  channel.bind(MARKER, onMarker);
  let timer: NodeJS.Timeout | undefined;
  try {
    const id = await publishMarker(srv, channel.name, opts);
    await new Promise<void>((resolve, reject) => {
      check = () => { if (seen.has(id)) resolve(); };
      timer = setTimeout(() => reject(new Error(`no marker on ${channel.name} within ${ms} ms`)), ms);
      check();
    });
  } finally {
    clearTimeout(timer);
    channel.unbind(MARKER, onMarker);
  }
}
