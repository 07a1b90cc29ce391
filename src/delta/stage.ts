// The delta-route stage of a shard's publish pipeline (channels/publisher.ts): a message
// to a channel with delta subscribers anywhere also goes to the sequencer, which sends
// their variant (delta/sequencer.ts). Plain subscribers still get it on the bus as usual
// (the stage never takes the message over), so a channel's plain fan-out costs the same
// with or without delta subscribers beside it. The copy to the sequencer is written in the
// publish's batch: a publish refused (503) never reaches delta subscribers either.

import type { Interest } from '../channels/interest';
import type { OutboundStage, Outgoing, StageWrites } from '../channels/publisher';
import { isEncrypted } from '../protocol/channels';
import type { Algo } from './settings';
import { forceOf } from './wire';

// A history channel's events (history/, memory driver) are numbered by the channel's owner
// shard first, which sends them to the sequencer in serial order (history/owner.ts): the
// stage leaves them (`numbered`, asked only for channels with delta subscribers).

export function deltaRoute(sequencer: number, interest: Record<Algo, Interest>, numbered: ((app: string, channel: string) => boolean) | null = null): OutboundStage {
  const to = [sequencer];
  const scratch: number[] = [];
  const tables = [interest.fossil, interest.xdelta3];
  const wanted = (app: string, channel: string): boolean => {
    for (const t of tables) if (t.targets(app, channel, scratch).length > 0) return true;
    return false;
  };
  return {
    out(m: Outgoing, w: StageWrites): boolean {
      // only events are sequenced; member events and counts reach delta sockets on the
      // shard (delta/shard.ts, rule 4)
      if (m.kind !== 'api' && m.kind !== 'client') return false;
      if (!wanted(m.app, m.channel) || isEncrypted(m.channel)) return false;
      if (numbered !== null && numbered(m.app, m.channel)) return false;
      const bytes = Buffer.allocUnsafe(1 + Buffer.byteLength(m.message));
      bytes[0] = forceOf(m.delta);
      bytes.write(m.message, 1, 'utf8');
      // the tags: a tag-filtered delta subscriber's stream (delta/sequencer.ts rule 4)
      w.publish(to, m.app, m.channel, m.except, bytes, m.tags ?? null);
      return false;
    },
  };
}
