// Wiring of the live console (console/server.ts) in the primary: what it reads and how it
// publishes, from the primary's own pieces (the connection counters and the apps' slots,
// the bus as a directory of the channel owners, the bus endpoint, the shard threads).

import type { Logger } from 'pino';
import type { Bus } from '../bus/bus';
import type { PrimaryEndpoint } from '../channels/bridge';
import { ConnectionCounters } from '../channels/counters';
import { createBusDirectory } from '../channels/directory';
import type { Config } from '../config/types';
import { startConsole, type ConsoleServer } from '../console/server';
import type { ReloadBase, Reloader } from '../reload/primary';
import type { ShardHandle } from './spawn';

export interface ConsoleWiring {
  config: Config;
  /** The shards' base: its `counters` memory and the current `appSlots`. */
  base: ReloadBase & { counters: SharedArrayBuffer };
  bus: Bus;
  endpoint: PrimaryEndpoint;
  handles: () => readonly ShardHandle[];
  reloader: Reloader;
  log: Logger;
}

export function openConsole(w: ConsoleWiring): Promise<ConsoleServer> {
  const cc = w.config.console;
  const counts = new ConnectionCounters(w.base.counters);
  return startConsole({
    host: cc.host, port: cc.port, token: cc.token, log: w.log,
    apps: () => w.reloader.current().apps,
    connections: (id) => (w.base.appSlots[id] === undefined ? 0 : counts.get(w.base.appSlots[id])),
    directory: createBusDirectory({ bus: w.bus, shards: w.config.workers, log: w.log }),
    publish: (app, channel, message) => w.endpoint.publish(app, channel, '', message),
    shards: () => w.handles().map((h) => h.worker),
  });
}
