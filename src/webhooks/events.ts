// Webhook events: the wire shapes of docs/protocol.md ("Webhooks") and of the spec's event
// table, and which of them an app's endpoints ask for. Pure: no thread, socket or I/O.
//
// Every request body is `{"time_ms": <ms>, "events": [ … ]}` (batched or not), each event
// `{name, channel, …}`:
//
//   channel_occupied     {name, channel}
//   channel_vacated      {name, channel}
//   member_added         {name, channel, user_id}
//   member_removed       {name, channel, user_id}
//   client_event         {name, channel, event, data, socket_id, user_id?}  (user_id: presence)
//   cache_miss           {name, channel}
//   subscription_count   {name, channel, subscription_count}
//
// user_id is echoed in the type the presence channel_data gave it (string or number), as
// in the member events clients get; client_event `data` is the string the client sent, or
// the JSON of the object it sent (Pusher sends the data as a string).

import type { WebhookEvent } from '../bus/messages';
import type { AppConfig } from '../config/types';
import { WEBHOOK_EVENT_TYPES } from '../config/constants';

export type WebhookEventName = (typeof WEBHOOK_EVENT_TYPES)[number];

/** Defined with the bus messages that carry it (the core imports nothing of ours). */
export type { WebhookEvent } from '../bus/messages';

/** The events that are transitions of a channel's state, decided by its owner shard. */
export const OWNER_DECIDED: ReadonlySet<WebhookEventName> = new Set<WebhookEventName>([
  'channel_occupied', 'channel_vacated', 'member_added', 'member_removed', 'subscription_count',
]);

/** What an app's endpoints want, resolved once per app (shards check it before any work). */
export interface WebhookInterest {
  any: boolean;
  /**
   * Occupancy is reported: channel_occupied, channel_vacated, or a member event is asked
   * for (the primary's ledger, ledger.ts, drops a channel's members with its vacated).
   */
  occupancy: boolean;
  /** member_added or member_removed (the ledger follows members). */
  members: boolean;
  types: ReadonlySet<WebhookEventName>;
}

const NONE: WebhookInterest = { any: false, occupancy: false, members: false, types: new Set() };

export function interestOf(app: Pick<AppConfig, 'webhooks'> | undefined): WebhookInterest {
  if (!app || app.webhooks.length === 0) return NONE;
  const types = new Set<WebhookEventName>();
  for (const w of app.webhooks) for (const t of w.event_types) types.add(t as WebhookEventName);
  return {
    any: types.size > 0,
    occupancy: types.has('channel_occupied') || types.has('channel_vacated') || types.has('member_added') || types.has('member_removed'),
    members: types.has('member_added') || types.has('member_removed'),
    types,
  };
}

/** Per-app interest, cached by app id (the config is frozen for the life of a thread). */
export class InterestTable {
  private readonly byApp = new Map<string, WebhookInterest>();

  constructor(private readonly apps: { byId(id: string): Pick<AppConfig, 'webhooks'> | undefined }) {}

  of(app: string): WebhookInterest {
    let i = this.byApp.get(app);
    if (!i) this.byApp.set(app, (i = interestOf(this.apps.byId(app))));
    return i;
  }
}

/** The request body for a list of events, serialised once and signed as is. */
export function requestBody(events: readonly WebhookEvent[], timeMs: number): string {
  return JSON.stringify({ time_ms: timeMs, events });
}
