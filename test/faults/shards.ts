// Helpers of the owner-state fault tests: clients placed on chosen shards (the kernel
// spreads connections; the socket_id prefix tells the shard, RINGCAST_TEST_HOOKS=1), a
// channel name owned by a chosen shard, and filling the ring from one shard to a paused
// one (client events to a receiver there) until the sender is refused.

import { ownerOf } from '../../src/channels/owner';
import { APP, RawClient, type TestServer } from '../helpers/server';

/** A channel name `${prefix}-k` owned by shard `shard` of `shards`. */
export function ownedBy(prefix: string, shard: number, shards: number): string {
  for (let k = 0; ; k++) if (ownerOf(APP.id, `${prefix}-${k}`, shards) === shard) return `${prefix}-${k}`;
}

/** The shard index of a client (its socket_id prefix). */
export function shardOf(srv: TestServer, c: RawClient): number {
  return srv.server.testShardPrefixes!().indexOf(c.socketId.split('.')[0]);
}

/** `n` tracked clients on shard `shard` (connections elsewhere are closed again). */
export async function clientsOn(srv: TestServer, shard: number, n: number): Promise<RawClient[]> {
  const out: RawClient[] = [];
  for (let i = 0; i < 400 && out.length < n; i++) {
    const c = await RawClient.connect(srv.wsUrl());
    if (shardOf(srv, c) === shard) out.push(srv.track(c));
    else await c.close();
  }
  if (out.length < n) throw new Error(`only ${out.length} of ${n} connections landed on shard ${shard}`);
  return out;
}

const PAD = 'f'.repeat(4000);

/**
 * Fills the ring (and spill queue) from the sender's shard to a shard that does not read
 * (testPauseBus) and has a subscriber of `channel` (a private channel the sender is on
 * too): client events of 4 KB until one is refused (pusher:error), then empty ones until
 * one is refused. What room is left then is less than one empty client event, so any
 * frame longer than that (e.g. naming a channel of 100+ characters: LONG) is refused too.
 * Bounded: throws after `max` events.
 */
export async function fillFrom(sender: RawClient, channel: string, max = 20_000): Promise<number> {
  let sent = 0;
  for (const pad of [PAD, '']) {
    const before = refused(sender);
    while (refused(sender) === before) {
      if (sent >= max) throw new Error(`${max} client events and the ring did not fill`);
      for (let i = 0; i < 50; i++, sent++) sender.send({ event: 'client-f', channel, data: pad });
      await sender.sync(30_000);
    }
  }
  return sent;
}

/** A prefix that makes frames naming the channel longer than an empty client event. */
export const LONG = 'l'.repeat(120);

function refused(c: RawClient): number {
  return c.frames.filter((f) => f.event === 'pusher:error' && JSON.stringify(f.data).includes('client event not delivered')).length;
}
