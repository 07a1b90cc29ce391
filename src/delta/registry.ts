// The delta shard's subscriber sets by channel (delta/subscribers.ts), and what the
// sequencer is told of them:
//   - unfiltered: one set per channel (key `app C`); the shard's first and last socket of
//     (channel, algorithm) register and unregister it (sequencer rule 5);
//   - tag-filtered (delta/shard.ts rule 8): one group per (channel, filter, algorithm),
//     under the channel's `app C\x01*` topic for member events and counts; a group's first
//     socket registers its filter (`delta_filter`), its last one unregisters it, and the
//     group is pending until the sequencer's answer.
//   - with positions (history channels, docs/history.md "With delta compression"): the
//     sockets whose subscription asked for `recover` get the frames with the serial, so
//     they are a set of their own per channel (`serials`, topic `app C\0s`), registered as
//     the unfiltered set is.
// A registration the sequencer does not take is logged; its sockets get full messages.

import type { Logger } from 'pino';
import { topicOf } from '../channels/topic';
import type { CompiledFilter } from '../filter/compile';
import { ALGOS, type Algo } from './settings';
import type { DeltaSocketData } from './socket';
import { channelSubs, dropIdle, groupId, leave, type ChannelGroups, type ChannelSubs, type FilterGroup, type StreamMember } from './subscribers';

/** How the shard tells the sequencer about its sets (a request answered in order). */
export type RegisterFilter = (op: 'add' | 'remove', app: string, channel: string, filter: string, algo: Algo) => Promise<unknown>;

export class DeltaRegistry<S extends StreamMember> {
  /** Unfiltered sets by channel topic. */
  readonly channels = new Map<string, ChannelSubs<S>>();
  /** Filter groups by channel topic. */
  readonly filtered = new Map<string, ChannelGroups<S>>();
  /** Sets of the subscriptions with positions, by channel topic (their own topic is `app C\0s`). */
  readonly serials = new Map<string, ChannelSubs<S>>();

  constructor(
    private readonly register: RegisterFilter,
    private readonly log: Logger,
  ) {}

  /** The socket's set of `channel`: its filter group, or the channel's. */
  of(d: DeltaSocketData<S>, channel: string): ChannelSubs<S> | undefined {
    if (!d.app) return undefined;
    return d.delta?.filtered.get(channel) ?? this.setsOf(d, channel).get(topicOf(d.app.id, channel));
  }

  /** Where the socket's unfiltered set of `channel` is: with positions or without. */
  private setsOf(d: DeltaSocketData<S>, channel: string): Map<string, ChannelSubs<S>> {
    return d.delta?.serial?.has(channel) ? this.serials : this.channels;
  }

  /** The channel's `app C\x01*` topic when `ch` is one of its filter groups. */
  internalOf(ch: ChannelSubs<S>, app: string, channel: string): string | undefined {
    return (ch as Partial<FilterGroup<S>>).filter === undefined ? undefined : this.filtered.get(topicOf(app, channel))?.internal;
  }

  /** The socket joins the channel's unfiltered set (`serial`: the one with positions), on its full-message topic. */
  join(ws: S, app: string, channel: string, algo: Algo, serial = false): ChannelSubs<S> {
    const key = topicOf(app, channel);
    const sets = serial ? this.serials : this.channels;
    let ch = sets.get(key);
    if (ch === undefined) sets.set(key, (ch = channelSubs(serial ? key + '\0s' : key)));
    if (!ch.sockets.has(ws) && !ch.paused.has(ws)) this.count(ch, app, channel, algo, 1);
    ch.sockets.set(ws, algo);
    ws.subscribe(ch.allTopic);
    return ch;
  }

  /** Rule 8: the socket joins the group of (channel, filter, algorithm), on its topics. */
  joinGroup(ws: S, d: DeltaSocketData<S>, app: string, channel: string, filter: CompiledFilter, algo: Algo): FilterGroup<S> {
    const group = this.groupOf(app, channel, filter, algo);
    d.delta!.filtered.set(channel, group);
    group.sockets.set(ws, algo);
    ws.subscribe(group.allTopic);
    ws.subscribe(this.filtered.get(topicOf(app, channel))!.internal);
    return group;
  }

  /** The socket leaves its set of `channel` (uWS has left its topics when it closed). */
  leave(ws: S, d: DeltaSocketData<S>, app: string, channel: string): void {
    if (d.delta?.filtered.has(channel)) return this.leaveGroup(ws, d, app, channel);
    const key = topicOf(app, channel);
    const sets = this.setsOf(d, channel);
    d.delta?.serial?.delete(channel);
    const ch = sets.get(key);
    if (ch === undefined) return;
    if (!d.closed) ws.unsubscribe(ch.allTopic);
    const algo = ch.sockets.get(ws) ?? ch.paused.get(ws);
    if (algo !== undefined) this.count(ch, app, channel, algo, -1);
    if (leave(ch, ws)) sets.delete(key);
  }

  /** Drops the streams unused for `maxAgeMs` (max_state_age_secs) of every set. */
  dropIdle(t: number, maxAgeMs: number): void {
    for (const ch of this.channels.values()) dropIdle(ch, t, maxAgeMs);
    for (const ch of this.serials.values()) dropIdle(ch, t, maxAgeMs);
    for (const cg of this.filtered.values()) for (const g of cg.groups.values()) dropIdle(g, t, maxAgeMs);
  }

  /** Sequencer rule 5: the shard's first / last unfiltered subscriber of (channel, algorithm). */
  private count(ch: ChannelSubs<S>, app: string, channel: string, algo: Algo, by: 1 | -1): void {
    const counts = (ch.counts ??= ALGOS.map(() => 0));
    const i = ALGOS.indexOf(algo);
    counts[i] += by;
    if (counts[i] !== (by === 1 ? 1 : 0)) return;
    this.register(by === 1 ? 'add' : 'remove', app, channel, '', algo)
      .catch((err: Error) => this.log.warn({ err, channel }, 'delta: the sequencer did not take a subscriber registration; its subscribers may get full messages'));
  }

  /** Rule 8: the group of (channel, filter, algorithm), registered with the sequencer when new. */
  private groupOf(app: string, channel: string, filter: CompiledFilter, algo: Algo): FilterGroup<S> {
    const key = topicOf(app, channel);
    let cg = this.filtered.get(key);
    if (cg === undefined) this.filtered.set(key, (cg = { groups: new Map(), internal: key + '\x01*', pending: 0 }));
    const id = groupId(algo, filter.key);
    const g = cg.groups.get(id);
    if (g !== undefined) return g;
    const topic = key + '\x02' + id;
    const group: FilterGroup<S> = { allTopic: topic + '\x01', topic, sockets: new Map(), paused: new Map(), streams: new Map(), filter, algo, pending: true };
    cg.groups.set(id, group);
    cg.pending++;
    const groups = cg;
    this.register('add', app, channel, filter.key, algo).then(() => {
      if (groups.groups.get(id) !== group || !group.pending) return;
      group.pending = false;
      groups.pending--;
    }, (err: Error) => this.log.warn({ err, channel }, 'delta: the sequencer did not take a tag filter; its subscribers get full messages'));
    return group;
  }

  /** Rule 8: the socket leaves its group of `channel`. */
  private leaveGroup(ws: S, d: DeltaSocketData<S>, app: string, channel: string): void {
    const g = d.delta!.filtered.get(channel)!;
    d.delta!.filtered.delete(channel);
    const key = topicOf(app, channel);
    const cg = this.filtered.get(key);
    if (!d.closed) {
      ws.unsubscribe(g.allTopic);
      if (cg !== undefined) ws.unsubscribe(cg.internal);
    }
    if (!leave(g, ws) || cg === undefined) return;
    const id = groupId(g.algo, g.filter.key);
    if (cg.groups.get(id) !== g) return;
    cg.groups.delete(id);
    if (g.pending) cg.pending--;
    if (cg.groups.size === 0) this.filtered.delete(key);
    this.register('remove', app, channel, g.filter.key, g.algo).catch((err: Error) => this.log.warn({ err, channel }, 'delta: a tag filter not unregistered from the sequencer'));
  }
}
