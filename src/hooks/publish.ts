// The publish hook of the HTTP API (POST /apps/{id}/events and /batch_events): one call per
// event × channel that a hook pattern matches, all at once, after validation and the rate
// limits and before anything is delivered, cached or sent to other nodes. A denial refuses
// the request whole: 403 {"error": reason}, a batch naming its item (`batch[2]: reason`).
// A replaced `data` is delivered instead on that channel; one larger than the app's
// max_event_payload_in_kb is refused as the original would be (413).

import type { AppConfig } from '../config/types';
import type { HookCaller } from './caller';
import { hookFor } from './settings';

/** The part of a parsed API event the hook needs (http/events.ts ParsedEvent). */
export interface PublishItem {
  name: string;
  data: string;
  channels: string[];
  socketId: string;
}

export type PublishCheck<T> = { ok: true; items: T[] } | { ok: false; status: number; error: string };

export interface PublishHooks {
  /** null when no hook applies to any item (the caller goes on synchronously). */
  check<T extends PublishItem>(app: AppConfig, items: T[], batch: boolean): Promise<PublishCheck<T>> | null;
}

export function createPublishHooks(caller: HookCaller): PublishHooks {
  return {
    check(app, items, batch) {
      if (app.hooks === null) return null;
      const calls: Promise<{ i: number; channel: string; allow: boolean; reason?: string; data?: unknown }>[] = [];
      items.forEach((ev, i) => {
        for (const channel of ev.channels) {
          const hook = hookFor(app, 'publish', channel, ev.name);
          if (hook === null) continue;
          const body = {
            hook: 'publish' as const, app_id: app.id, time_ms: Date.now(), channel, event: ev.name, data: ev.data,
            ...(ev.socketId ? { socket_id: ev.socketId } : {}),
          };
          calls.push(caller.call(app, hook, body).then((v) => (v.allow ? { i, channel, allow: true, data: v.data } : { i, channel, allow: false, reason: v.reason })));
        }
      });
      if (calls.length === 0) return null;
      return Promise.all(calls).then((answers) => {
        const where = (i: number) => (batch ? `batch[${i}]: ` : '');
        const denied = answers.find((a) => !a.allow);
        if (denied) return { ok: false, status: 403, error: where(denied.i) + denied.reason! };
        const replaced = new Map<number, Map<string, string>>();
        const limit = app.max_event_payload_in_kb * 1024;
        for (const a of answers) {
          if (a.data === undefined) continue;
          // a string is delivered as is, other JSON as its text (as the API takes `data`); caller.ts checked it serialises
          const data = typeof a.data === 'string' ? a.data : JSON.stringify(a.data);
          const size = Buffer.byteLength(data);
          if (size > limit) {
            return { ok: false, status: 413, error: `${where(a.i)}data is ${size} bytes, more than the ${app.max_event_payload_in_kb} KB allowed (as replaced by the publish hook)` };
          }
          let m = replaced.get(a.i);
          if (!m) replaced.set(a.i, (m = new Map<string, string>()));
          m.set(a.channel, data);
        }
        if (replaced.size === 0) return { ok: true, items };
        // An event whose data was replaced on some channel goes out once per channel.
        const out: (typeof items)[number][] = [];
        items.forEach((ev, i) => {
          const m = replaced.get(i);
          if (!m) return void out.push(ev);
          for (const channel of ev.channels) out.push({ ...ev, channels: [channel], data: m.get(channel) ?? ev.data });
        });
        return { ok: true, items: out };
      });
    },
  };
}
