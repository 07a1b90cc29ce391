// The channel directory: where `ws/` and `http/` ask about channels and tell about
// subscriptions. This implementation talks to the channel's owner shard over the bus
// (owner = channelHash % shards; the owner side is channels/owner-service.ts); a cluster
// adapter will put remote owners behind the same interface.

import type { Logger } from 'pino';
import { BusFullError } from '../bus/errors';
import type { ChannelInfo, ControlMsg, PresenceJoinReply, RequestBody } from '../bus/messages';
import { metersFor } from '../metrics/meters';
import { noMetrics, type MetricsSink } from '../metrics/types';
import { ownerOf } from './owner';
import { logLimited } from '../log';

export type ChannelList = [name: string, userCount: number | null][];
export type MemberList = [userId: unknown, userInfo: unknown][];

export interface ChannelDirectory {
  /** A non-presence subscription of this shard was added (fire and forget; a full queue is logged). */
  subscribe(app: string, channel: string): void;
  /** A non-presence subscription of this shard went away. */
  unsubscribe(app: string, channel: string): void;
  /** Presence join: the member snapshot (with the joiner), or a refusal. Rejects with a bus error. */
  join(app: string, channel: string, socketId: string, userId: unknown, userInfo: unknown): Promise<PresenceJoinReply>;
  /** A joined presence subscription of this shard went away (fire and forget). */
  leave(app: string, channel: string, socketId: string, userKey: string): void;
  info(app: string, channel: string): Promise<ChannelInfo>;
  /** Occupied channels of the app whose names start with prefix. */
  list(app: string, prefix: string): Promise<ChannelList>;
  /** Presence members as [user_id, user_info]. */
  members(app: string, channel: string): Promise<MemberList>;
  /** Closes (4009) every socket signed in as this user, everywhere. Throws BusFullError (nothing sent). */
  terminateUser(app: string, userId: string): void;
}

/** The bus calls the directory makes (bus/bus.ts). */
export interface DirectoryBus {
  readonly self: number;
  control(to: number, msg: ControlMsg): void;
  request<T>(to: number, body: RequestBody): Promise<T>;
  /** Frames written all or nothing (bus/batch.ts). */
  batch(): { control(to: number, msg: ControlMsg): unknown; commit(): void };
}

export interface BusDirectoryDeps {
  bus: DirectoryBus;
  shards: number;
  log: Logger;
  metrics?: MetricsSink;
}

export function createBusDirectory(deps: BusDirectoryDeps): ChannelDirectory {
  const { bus, shards, log } = deps;
  const self = bus.self;
  const meters = metersFor(deps.metrics ?? noMetrics);
  const owner = (app: string, channel: string) => ownerOf(app, channel, shards);

  /** A notification nobody waits for: a full queue loses it, which is logged and counted. */
  function tell(to: number, msg: ControlMsg, what: string): void {
    try {
      bus.control(to, msg);
    } catch (err) {
      if (err instanceof BusFullError) meters.busFullAt('owner');
      logLimited(log, 'error', { err, shard: to, what }, 'could not tell the channel owner: internal queue full or closed');
    }
  }

  /** A request as a promise: a synchronous bus error becomes a rejection. */
  function ask<T>(to: number, body: RequestBody): Promise<T> {
    try {
      return bus.request<T>(to, body);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  return {
    subscribe(app, channel) {
      tell(owner(app, channel), { type: 'sub', app, channel, shard: self, delta: 1 }, 'a subscribe');
    },
    unsubscribe(app, channel) {
      tell(owner(app, channel), { type: 'sub', app, channel, shard: self, delta: -1 }, 'an unsubscribe');
    },
    join(app, channel, socketId, userId, userInfo) {
      return ask<PresenceJoinReply>(owner(app, channel), { type: 'presence_join', app, channel, socketId, userId, userInfo });
    },
    leave(app, channel, socketId, userKey) {
      tell(owner(app, channel), { type: 'presence_leave', app, channel, socketId, userKey, shard: self }, 'a presence leave');
    },
    info(app, channel) {
      return ask<ChannelInfo>(owner(app, channel), { type: 'channel_info', app, channel });
    },
    async list(app, prefix) {
      const parts = await Promise.all(Array.from({ length: shards }, (_, s) =>
        ask<ChannelList>(s, { type: 'channels_list', app, prefix })));
      return parts.flat();
    },
    members(app, channel) {
      return ask<MemberList>(owner(app, channel), { type: 'members', app, channel });
    },
    terminateUser(app, userId) {
      const msg: ControlMsg = { type: 'terminate_user', app, userId };
      const batch = bus.batch();
      for (let s = 0; s < shards; s++) batch.control(s, msg);
      batch.commit();
    },
  };
}
