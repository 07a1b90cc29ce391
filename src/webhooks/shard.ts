// A shard's side of webhooks: it only *reports*. The owner service's transitions
// (occupied / vacated, member added / removed, subscription count) and the client events
// and cache misses this shard sees become `webhook` control messages to the primary,
// which filters, batches, signs and sends them (webhooks/service.ts). Nothing here waits
// for the network: a report is an array push, and the events of one event-loop turn go
// to the primary as one bus frame (setImmediate), so a shard's cost is one small JSON
// frame per turn with webhook events, whatever the receivers do.
//
// Only events some endpoint of the app asks for are reported (interest resolved once per
// app), except that occupancy is also reported for apps with member webhooks: the
// primary's ledger drops a channel's members with its vacated.

import type { Logger } from 'pino';
import type { ControlMsg } from '../bus/messages';
import type { AppConfig } from '../config/types';
import type { MetricsSink } from '../metrics/types';
import { isPresence } from '../protocol/channels';
import { InterestTable, type WebhookEvent } from './events';
import type { SyncChannel } from './ledger';

/** subscription_count webhooks: at most one per channel per window (the count at its end). */
export const COUNT_WEBHOOK_DELAY_MS = 250;

export interface ShardWebhooksDeps {
  apps: { byId(id: string): AppConfig | undefined };
  /** bus.control to the primary (thread index `shards`); throws BusFullError when full. */
  toPrimary(msg: ControlMsg): void;
  /** The owner's current subscription count of a channel (read when the window ends). */
  count(app: string, channel: string): number;
  log: Logger;
  metrics: MetricsSink;
  countDelayMs?: number;
}

export interface ShardWebhooks {
  occupied(app: string, channel: string): void;
  vacated(app: string, channel: string): void;
  memberAdded(app: string, channel: string, userId: unknown): void;
  memberRemoved(app: string, channel: string, userId: unknown): void;
  countChanged(app: string, channel: string): void;
  clientEvent(app: string, channel: string, event: string, data: string, socketId: string, userId?: unknown): void;
  cacheMiss(app: string, channel: string): void;
  /** Whether any endpoint of the app wants client_event (the caller then builds the data string). */
  wantsClientEvents(app: string): boolean;
  /** After a rebuild (replacement shard): sends the owned channels' state (webhooks/ledger.ts). */
  sync(shard: number, channels: SyncChannel[]): void;
  /** Sends what this turn collected now (before a sync, at stop). */
  flush(): void;
  stop(): void;
}

export function createShardWebhooks(deps: ShardWebhooksDeps): ShardWebhooks {
  const interest = new InterestTable(deps.apps);
  const delay = deps.countDelayMs ?? COUNT_WEBHOOK_DELAY_MS;
  const countTimers = new Map<string, NodeJS.Timeout>();
  let pending: [string, WebhookEvent][] = [];
  let scheduled: NodeJS.Immediate | null = null;

  function report(app: string, e: WebhookEvent): void {
    pending.push([app, e]);
    scheduled ??= setImmediate(flush);
  }

  function flush(): void {
    if (scheduled) clearImmediate(scheduled);
    scheduled = null;
    if (pending.length === 0) return;
    const events = pending;
    pending = [];
    send({ type: 'webhook', events });
  }

  function send(msg: Extract<ControlMsg, { type: 'webhook' | 'webhook_sync' }>): void {
    try {
      deps.toPrimary(msg);
    } catch (err) {
      const n = msg.type === 'webhook' ? msg.events.length : msg.channels.length;
      deps.metrics.inc('bus_full_total', { source: 'webhook' });
      deps.log.error({ err, events: n, type: msg.type }, 'webhook events not handed to the primary: internal queue full');
    }
  }

  return {
    occupied(app, channel) {
      if (interest.of(app).occupancy) report(app, { name: 'channel_occupied', channel });
    },
    vacated(app, channel) {
      if (interest.of(app).occupancy) report(app, { name: 'channel_vacated', channel });
    },
    memberAdded(app, channel, userId) {
      if (interest.of(app).members) report(app, { name: 'member_added', channel, user_id: userId });
    },
    memberRemoved(app, channel, userId) {
      if (interest.of(app).members) report(app, { name: 'member_removed', channel, user_id: userId });
    },
    countChanged(app, channel) {
      // presence channels have member events instead (as pusher_internal:subscription_count)
      if (!interest.of(app).types.has('subscription_count') || isPresence(channel)) return;
      const key = app + '\n' + channel;
      if (countTimers.has(key)) return;
      const timer = setTimeout(() => {
        countTimers.delete(key);
        const n = deps.count(app, channel);
        // 0: the channel was vacated (channel_vacated says so)
        if (n > 0) report(app, { name: 'subscription_count', channel, subscription_count: n });
      }, delay);
      timer.unref();
      countTimers.set(key, timer);
    },
    clientEvent(app, channel, event, data, socketId, userId) {
      const e: WebhookEvent = { name: 'client_event', channel, event, data, socket_id: socketId };
      if (userId !== undefined) e.user_id = userId;
      report(app, e);
    },
    cacheMiss(app, channel) {
      if (interest.of(app).types.has('cache_miss')) report(app, { name: 'cache_miss', channel });
    },
    wantsClientEvents(app) {
      return interest.of(app).types.has('client_event');
    },
    sync(shard, channels) {
      flush();
      send({ type: 'webhook_sync', shard, channels });
    },
    flush,
    stop() {
      flush();
      for (const t of countTimers.values()) clearTimeout(t);
      countTimers.clear();
    },
  };
}

/** The owned channels of the apps with occupancy webhooks, for a `webhook_sync`. */
export function ownedState(
  apps: readonly AppConfig[],
  store: { list(app: string, prefix: string): [string, number | null][]; users(app: string, channel: string): unknown[] },
): SyncChannel[] {
  const table = new InterestTable({ byId: (id) => apps.find((a) => a.id === id) });
  const out: SyncChannel[] = [];
  for (const app of apps) {
    const i = table.of(app.id);
    if (!i.occupancy) continue;
    for (const [channel] of store.list(app.id, '')) {
      out.push([app.id, channel, i.members && isPresence(channel) ? store.users(app.id, channel) : null]);
    }
  }
  return out;
}
