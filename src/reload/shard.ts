// A shard's side of a config reload (reload/plan.ts): swap the app registry, then walk
// this shard's sockets. A connection of a removed app (or of an app whose key changed:
// the key it connected with is gone) is closed with 4001, of a disabled app with 4003,
// each with the error frame first as at connect. Every other connection stays open and
// sees its app's new settings (limits, secret, origins for the next connections) from
// its next frame on: its SocketData.app is the new object.

import type { AppRegistry, AppSlots } from '../apps/registry';
import type { AppConfig } from '../config/types';
import { metersFor } from '../metrics/meters';
import type { MetricsSink } from '../metrics/types';
import { CloseMessage, ErrorCode } from '../protocol/codes';
import { Ev } from '../protocol/events';
import { errorFrame } from '../protocol/frames';
import { sendFrame } from '../ws/send';
import type { Socket } from '../ws/types';

export interface ReloadDeps {
  apps: AppRegistry;
  sockets: Map<string, Socket>;
  metrics: MetricsSink;
  out(canonical: string): string;
}

/** Applies the new app list; returns how many connections were closed. Throws (nothing changed) on a bad list. */
export function applyApps(deps: ReloadDeps, apps: readonly AppConfig[], slots: AppSlots): number {
  deps.apps.replace(apps, slots);
  const meters = metersFor(deps.metrics);
  let closed = 0;
  for (const ws of [...deps.sockets.values()]) {
    const d = ws.getUserData();
    const old = d.app!;
    const now = deps.apps.byId(old.id);
    if (now && now.key === old.key && now.enabled) {
      d.app = now;
      continue;
    }
    const code = !now || now.key !== old.key ? ErrorCode.AppNotFound : ErrorCode.AppDisabled;
    const reason = code === ErrorCode.AppNotFound ? `App key ${old.key} no longer exists` : 'The app is disabled';
    closed++;
    ws.cork(() => {
      sendFrame(meters, ws, old.id, Ev.Error, errorFrame(deps.out(Ev.Error), code, reason));
      ws.end(code, CloseMessage[code] ?? 'Connection closed');
    });
  }
  return closed;
}
