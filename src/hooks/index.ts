// A shard's backend hooks (docs/protocol.md "Backend hooks"), built once per shard by
// shard/worker.ts for every app: which app has which hook is read from the app's config
// at each call (hooks/settings.ts), so a SIGHUP reload that adds, changes or removes hooks
// applies from the next call on. Without hooks it costs a null check per subscribe,
// client event and publish, and one counter check per frame (hooks/connection.ts).

import { readFileSync } from 'node:fs';
import type { Config } from '../config/types';
import type { MetricsSink } from '../metrics/types';
import type { Tap } from '../console/tap';
import { createHookCaller, type HookCaller } from './caller';
import { createHookHttp } from './client';
import { createWsHooks, type HookConn, type HookSocket, type WsHooks } from './connection';
import { createPublishHooks, type PublishHooks } from './publish';

export interface ShardHooks<S extends HookSocket, D extends HookConn> {
  ws: WsHooks<S, D>;
  publish: PublishHooks;
  caller: HookCaller;
  /** Closes the kept-alive connections to the backends. */
  close(): void;
}

/** S, D: the shard's socket and connection state types (ws/types.ts). */
export function createShardHooks<S extends HookSocket, D extends HookConn>(deps: { config: Config; metrics: MetricsSink; tap?: Tap | null; out(canonical: string): string }): ShardHooks<S, D> {
  const hc = deps.config.hook_client;
  const http = createHookHttp({
    maxResponseBytes: hc.max_response_kb * 1024,
    maxSockets: hc.max_in_flight,
    ca: hc.ca_path === null ? null : readFileSync(hc.ca_path, 'utf8'),
  });
  const caller = createHookCaller({ config: deps.config, http, metrics: deps.metrics, tap: deps.tap });
  return {
    ws: createWsHooks<S, D>({ config: deps.config, caller, metrics: deps.metrics, out: (c) => deps.out(c) }),
    publish: createPublishHooks(caller),
    caller,
    close: () => caller.close(),
  };
}
