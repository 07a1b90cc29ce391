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
 * too): client events until one is refused (pusher:error). Bounded: throws after `max`.
 */
export async function fillFrom(sender: RawClient, channel: string, max = 5000): Promise<number> {
  const refused = () => sender.frames.filter((f) => f.event === 'pusher:error' && JSON.stringify(f.data).includes('client event not delivered')).length;
  for (let sent = 0; sent < max;) {
    for (let i = 0; i < 50; i++, sent++) sender.send({ event: 'client-fill', channel, data: { i: sent, pad: PAD } });
    await sender.sync(30_000);
    if (refused() > 0) return sent;
  }
  throw new Error(`${max} client events and none refused: the ring did not fill`);
}
