// Periodic owner reconciliation (docs/owner-reconciliation.md).
//
// The notices a shard sends its channels' owners (sub ±1, presence_leave) and the member
// events an owner sends the shards are fire and forget: a full ring drops them (logged,
// bus_full_total). Every bus.owner_reconcile_interval_ms each shard sends every owner
// shard one `reconcile` report: its local truth of the channels that owner owns (what a
// rebuild after a crash collects, channels/rebuild.ts collectLocal, plus the presence
// sockets whose join is not answered yet). The report travels on the same FIFO ring as
// the notices, so the owner has applied every notice written before it and none after:
// its records' part of that shard must equal the report, and whatever differs was lost.
// The owner corrects it with ordinary transitions (OwnerStore.reconcile), so occupied /
// vacated, member_added / member_removed, counts and webhooks follow as for any change.
//
// Member events the shard's clients missed: the report carries each presence channel's
// shadow set (what the clients were told) and how many member events the shard has read
// from that owner (MemberTally). When the owner has sent no more than that (none is on its
// way) and no join of the channel waits for its answer there, the owner sends that shard
// the difference between the shadow and the members (missedMemberEvents).

import type { ControlMsg } from '../bus/messages';
import { PresenceShadows, collectLocal, type LocalSocket } from './rebuild';

/** Member events per pair of shards: sent by this (owner) shard to each shard, read by this shard from each owner. */
export class MemberTally {
  readonly sent: Float64Array;
  readonly read: Float64Array;

  constructor(shards: number) {
    this.sent = new Float64Array(shards);
    this.read = new Float64Array(shards);
  }

  /** The rings with `shard` were made anew (it was restarted): both directions start from zero. */
  reset(shard: number): void {
    this.sent[shard] = 0;
    this.read[shard] = 0;
  }
}

/** One `reconcile` report per owner shard 0 … shards − 1 (empty where this shard holds nothing of its channels). */
export function reconcileReports(
  sockets: Iterable<LocalSocket>, shards: number, shadows: PresenceShadows, tally: MemberTally,
): Extract<ControlMsg, { type: 'reconcile' }>[] {
  const byOwner = collectLocal(sockets, null, shards, shadows, true);
  const out: Extract<ControlMsg, { type: 'reconcile' }>[] = [];
  for (let o = 0; o < shards; o++) out.push({ type: 'reconcile', channels: byOwner.get(o) ?? [], members: tally.read[o] });
  return out;
}
