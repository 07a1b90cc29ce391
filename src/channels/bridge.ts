// The primary thread as a bus endpoint: the bridge between this process and the others
// (the cluster adapters), and the way any non-shard thread publishes into the shards.
//
//   shard ──(adapter-out stage: local api/client events)──▶ primary ──▶ adapter transport
//   adapter transport ──▶ primary ──(publish pipeline, interest routing)──▶ shards
//
// Only messages made in this process go out (the stage sees a shard's outbound pipeline;
// what the primary publishes goes straight to the shards' inbound side), so a message
// never loops back to the cluster.
//
// A publish's `"delta": true|false` goes along: shard → primary as a byte before the
// message (the delta route's Force values, delta/wire.ts: 1 true, 2 false; a message is a
// JSON object, so its own first byte is `{`), only when the publish has one — the others
// are bridged as they were, at no cost; primary → nodes in the node frame
// (adapter/wire.ts), and a remote publish enters that node's delta route with it.

import { tracing } from '../tracing/tracer';
import type { Logger } from 'pino';
import type { PublishFrame } from '../bus/messages';
import { Force, forceOf } from '../bus/delta-input';
import type { CacheChannels } from './cache';
import { Interest } from './interest';
import { createPublisher, type OutboundStage, type Outgoing, type PipelineBus, type StageWrites } from './publisher';

/** Force → the one-character prefix of a flagged message (ASCII: one byte in UTF-8). */
const FLAG = ['', String.fromCharCode(Force.Delta), String.fromCharCode(Force.Full)];

/**
 * Adapter-out stage of a shard: a copy of each local API and client event to the primary,
 * in the publish's batch, so the other nodes get only a publish that was committed.
 */
export function bridgeOut(primary: number): OutboundStage {
  const to = [primary];
  return {
    out(m: Outgoing, w: StageWrites): boolean {
      // member events and subscription counts are decided per node by the owners; cluster
      // presence carries them (adapter/), not this copy
      if (m.kind === 'api' || m.kind === 'client' || m.kind === 'user') {
        const message = m.delta === undefined ? m.message : FLAG[forceOf(m.delta)] + m.message;
        const tr = tracing();
        w.publish(to, m.app, m.channel, m.except, Buffer.from(message), m.tags ?? null, tr === null ? null : tr.current());
      }
      return false; // the local shards get it as well
    },
  };
}

export interface Bridge {
  /**
   * Publishes a message made elsewhere (another node) to this process's subscribers of the
   * channel: written to every shard with interest. Throws BusFullError (sent nowhere).
   */
  publish(app: string, channel: string, except: string, message: string, tags?: string | null, delta?: boolean): void;
  /** Receives each local API and client event the shards hand to the primary, with its `delta` (absent: the configuration decides). */
  onLocal(handler: (f: PublishFrame, delta: boolean | undefined) => void): void;
}

export interface PrimaryEndpoint extends Bridge {
  /** Bus handler of the primary: a frame a shard wrote to it. */
  received(f: PublishFrame): void;
}

export function createPrimaryEndpoint(deps: {
  bus: PipelineBus;
  interest: SharedArrayBuffer;
  shards: number;
  log: Logger;
  /** cache.driver memory: a remote API publish to a cache channel is remembered by its owner here too. */
  cache?: CacheChannels | null;
  /** Delta compression: the route to the sequencer, so remote publishes reach delta subscribers too. */
  delta?: OutboundStage | null;
}): PrimaryEndpoint {
  const publisher = createPublisher({
    cache: deps.cache ?? null,
    stages: { delta: deps.delta ? [deps.delta] : [] },
    bus: deps.bus,
    interest: new Interest(deps.interest, deps.shards, -1),
    shards: deps.shards,
    uws: null,
    sockets: new Map(),
    log: deps.log,
    out: (e) => e,
  });
  let handler: ((f: PublishFrame, delta: boolean | undefined) => void) | null = null;
  return {
    publish(app, channel, except, message, tags = null, delta) {
      publisher.publishOne({ kind: 'api', app, channel, except, message, tags, ...(delta === undefined ? {} : { delta }) });
    },
    onLocal(h) {
      handler = h;
    },
    received(f) {
      const force = f.message[0];
      const flagged = force === Force.Delta || force === Force.Full;
      if (handler) handler(flagged ? { ...f, message: f.message.subarray(1) } : f, flagged ? force === Force.Delta : undefined);
      else deps.log.warn({ channel: f.channel }, 'a shard bridged a publish but nothing consumes it on the primary');
    },
  };
}
