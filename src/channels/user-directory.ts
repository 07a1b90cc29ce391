// Watchlists, the shard's side of the bus: what ws/ tells (and asks) the owners of users
// (channels/users.ts). Like the channel directory (directory.ts), a notification nobody
// waits for is logged and counted when the queue is full; a question is a promise.

import type { Logger } from 'pino';
import { BusFullError } from '../bus/errors';
import { metersFor } from '../metrics/meters';
import { noMetrics, type MetricsSink } from '../metrics/types';
import type { DirectoryBus } from './directory';
import { userOwnerOf } from './users';
import { logLimited } from '../log';

export interface UserDirectory {
  /** The owner of a user (group watchlists by it). */
  ownerOf(app: string, userId: string): number;
  /** A signed-in connection of this shard (+1) / closed (-1). */
  connection(app: string, userId: string, delta: 1 | -1): void;
  /** Registers a watcher of `userIds` (all owned by `owner`): the ids online now. Rejects with a bus error. */
  watch(app: string, owner: number, userIds: string[]): Promise<string[]>;
  /** A watcher counted by watch() went away. */
  unwatch(app: string, owner: number, userIds: string[]): void;
}

export function createUserDirectory(deps: { bus: Omit<DirectoryBus, 'batch'>; shards: number; log: Logger; metrics?: MetricsSink }): UserDirectory {
  const { bus, shards, log } = deps;
  const meters = metersFor(deps.metrics ?? noMetrics);

  function tell(to: number, msg: Parameters<typeof bus.control>[1], what: string): void {
    try {
      bus.control(to, msg);
    } catch (err) {
      if (err instanceof BusFullError) meters.busFullAt('owner');
      logLimited(log, 'error', { err, shard: to, what }, 'could not tell the user\'s owner: internal queue full or closed');
    }
  }

  return {
    ownerOf: (app, userId) => userOwnerOf(app, userId, shards),
    connection(app, userId, delta) {
      tell(userOwnerOf(app, userId, shards), { type: 'user_conn', app, userId, shard: bus.self, delta }, delta > 0 ? 'a sign-in' : 'a signed-in close');
    },
    watch(app, owner, userIds) {
      try {
        return bus.request<string[]>(owner, { type: 'watch', app, userIds });
      } catch (err) {
        return Promise.reject(err);
      }
    },
    unwatch(app, owner, userIds) {
      tell(owner, { type: 'unwatch', app, userIds, shard: bus.self }, 'a watcher that left');
    },
  };
}
