// The primary's record of the channel transitions it has accepted for sending: which
// channels it announced as occupied and which presence members as added, per app (only
// for apps whose endpoints ask for those events). It makes the owner's decisions
// exactly-once per process even where a shard's decision can be lost or repeated:
//
//   1. Dedup. An owner-decided transition is accepted only when it changes the ledger:
//      channel_occupied for a channel not in it, channel_vacated for one in it,
//      member_added for a user not in the channel's set, member_removed for one in it.
//
//   2. The crash rule. When shard i crashes, the owner records of the channels hashed to
//      i are lost and rebuilt from the surviving shards (channels/rebuild.ts) without any
//      occupied / member_added. Transitions of those channels can also be lost in flight
//      (decided by the dead shard, never read by the primary) or never decided at all
//      (the dead shard's own connections vanish without an unsubscribe). So, once the
//      replacement has rebuilt its records and before it applies any later operation, it
//      sends the primary a `webhook_sync`: every channel (and member) it holds for apps
//      with webhooks. The primary then *re-decides* each channel owned by i by comparing
//      the ledger with that state and sending the difference:
//        in the ledger, not rebuilt   → member_removed for its members, channel_vacated
//        rebuilt, not in the ledger   → channel_occupied, member_added for its members
//        both                         → member_removed / member_added for the differences
//      Channels owned by surviving shards need nothing: their owners drop the dead
//      shard's connections themselves (OwnerStore.dropShard), with ordinary transitions.
//      So each transition is sent once: a lost one is sent by the sync, one the primary
//      already sent is not sent again, and one that did not happen (the channel never
//      emptied for its clients) is not sent at all.

import { ownerOf, userKey } from '../channels/owner';
import type { SyncChannel, WebhookEvent } from '../bus/messages';

export type { SyncChannel } from '../bus/messages';

export class Ledger {
  /** app → channel → members (userKey → user_id), or null for a channel whose members are not followed. */
  private readonly apps = new Map<string, Map<string, Map<string, unknown> | null>>();

  constructor(private readonly shards: number) {}

  /** Whether the transition changes the ledger (then it is applied and must be sent). */
  accept(app: string, e: WebhookEvent): boolean {
    switch (e.name) {
      case 'channel_occupied': {
        const chans = this.chans(app);
        if (chans.has(e.channel)) return false;
        chans.set(e.channel, null);
        return true;
      }
      case 'channel_vacated':
        return this.apps.get(app)?.delete(e.channel) ?? false;
      case 'member_added': {
        const chans = this.chans(app);
        let m = chans.get(e.channel);
        if (!m) chans.set(e.channel, (m = new Map()));
        const k = userKey(e.user_id);
        if (m.has(k)) return false;
        m.set(k, e.user_id);
        return true;
      }
      case 'member_removed':
        return this.apps.get(app)?.get(e.channel)?.delete(userKey(e.user_id)) ?? false;
      default:
        return true; // not a transition the ledger follows
    }
  }

  /**
   * The crash rule (above): the events that bring the ledger's channels owned by `shard`
   * to the rebuilt state `synced`, applied to the ledger. (Shards report occupancy for
   * every app with occupancy or member webhooks, so a channel leaves the ledger with its
   * channel_vacated; each endpoint's event_types filter what it is sent.)
   */
  reconcile(shard: number, synced: readonly SyncChannel[]): { app: string; event: WebhookEvent }[] {
    const out: { app: string; event: WebhookEvent }[] = [];
    const now = new Map<string, Map<string, unknown[] | null>>();
    for (const [app, channel, members] of synced) {
      let m = now.get(app);
      if (!m) now.set(app, (m = new Map<string, unknown[] | null>()));
      m.set(channel, members);
    }
    const emit = (app: string, event: WebhookEvent) => {
      if (this.accept(app, event)) out.push({ app, event });
    };
    // Gone: in the ledger, owned by the crashed shard, not rebuilt.
    for (const [app, chans] of [...this.apps]) {
      for (const [channel, members] of [...chans]) {
        if (ownerOf(app, channel, this.shards) !== shard) continue;
        const rebuilt = now.get(app)?.get(channel);
        if (rebuilt !== undefined) continue;
        for (const id of [...(members?.values() ?? [])]) emit(app, { name: 'member_removed', channel, user_id: id });
        emit(app, { name: 'channel_vacated', channel });
      }
      if (chans.size === 0) this.apps.delete(app);
    }
    // Rebuilt: occupied if not known, then the member differences.
    for (const [app, chans] of now) {
      for (const [channel, members] of chans) {
        emit(app, { name: 'channel_occupied', channel });
        if (!members) continue;
        const keep = new Set(members.map(userKey));
        const known = this.apps.get(app)?.get(channel);
        for (const id of [...(known?.values() ?? [])]) {
          if (!keep.has(userKey(id))) emit(app, { name: 'member_removed', channel, user_id: id });
        }
        for (const id of members) emit(app, { name: 'member_added', channel, user_id: id });
      }
    }
    return out;
  }

  /** Channels in the ledger (tests, logs). */
  get size(): number {
    let n = 0;
    for (const c of this.apps.values()) n += c.size;
    return n;
  }

  private chans(app: string): Map<string, Map<string, unknown> | null> {
    let c = this.apps.get(app);
    if (!c) this.apps.set(app, (c = new Map<string, Map<string, unknown> | null>()));
    return c;
  }
}
