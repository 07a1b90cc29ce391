// Wiring of the live console (console/server.ts) in the primary: what it reads and how it
// publishes, from the primary's own pieces (the connection counters and the apps' slots,
// the bus as a directory of the channel owners, the bus endpoint, the shard threads).
// A history channel's publish goes to its owner shard (hist_pub), which numbers and keeps
// it as it does a shard's API publish (history/owner.ts); its history is read from that
// owner (hist_page) and answered as the REST history route does (history/rest.ts).

import { clientAddressOf } from '../limits/client-address';
import type { Logger } from 'pino';
import type { Bus } from '../bus/bus';
import type { PrimaryEndpoint } from '../channels/bridge';
import { ConnectionCounters } from '../channels/counters';
import { createBusDirectory } from '../channels/directory';
import { ownerOf } from '../channels/owner';
import type { HistPageReply } from '../bus/messages';
import type { Config } from '../config/types';
import { startConsole, type ConsoleServer } from '../console/server';
import { getHistory, type RestHistory } from '../history/rest';
import { HistorySettings } from '../history/settings';
import type { MetricsSink } from '../metrics/types';
import type { WebhookService } from '../webhooks/service';
import type { ReloadBase, Reloader } from '../reload/primary';
import type { ShardHandle } from './spawn';
import type { AppSync } from '../apps/sync';

export interface ConsoleWiring {
  config: Config;
  /** The shards' base: its `counters` memory and the current `appSlots`. */
  base: ReloadBase & { counters: SharedArrayBuffer };
  bus: Bus;
  endpoint: PrimaryEndpoint;
  handles: () => readonly ShardHandle[];
  reloader: Reloader;
  log: Logger;
  metrics: MetricsSink;
  webhooks: WebhookService | null;
  /** The database app store (null: app_manager.driver array), for the app API. */
  appStore: AppSync | null;
}

export function openConsole(w: ConsoleWiring): Promise<ConsoleServer> {
  const cc = w.config.console;
  const counts = new ConnectionCounters(w.base.counters);
  const shards = w.config.workers;
  const apps = () => w.reloader.current().apps;
  const settings = new HistorySettings({ byId: (id) => apps().find((a) => a.id === id) });
  const rest: RestHistory = {
    settings,
    page: (app, channel, q) => w.bus.request<HistPageReply>(ownerOf(app, channel, shards), { type: 'hist_page', app, channel, ...q }),
  };
  return startConsole({
    host: cc.host, port: cc.port, log: w.log, metrics: w.metrics,
    login: { token: cc.token, allowAppSecret: cc.allow_app_secret },
    throttle: { maxFailures: cc.login_max_failures, windowSeconds: cc.login_window, maxAddresses: cc.login_max_addresses },
    maxStreams: cc.max_streams,
    clientAddress: clientAddressOf(w.config),
    streamMaxBufferedBytes: cc.stream_max_buffered_kb * 1024,
    apps,
    connections: (id) => (w.base.appSlots[id] === undefined ? 0 : counts.get(w.base.appSlots[id])),
    directory: createBusDirectory({ bus: w.bus, shards, log: w.log }),
    publish: (app, channel, message) => {
      if (settings.of(app, channel) === null) w.endpoint.publish(app, channel, '', message);
      else w.bus.control(ownerOf(app, channel, shards), { type: 'hist_pub', app, channel, except: '', message });
    },
    history: (app, channel, params) => getHistory(rest, app, channel, params),
    shards: () => w.handles().map((h) => h.worker),
    webhooks: w.webhooks,
    appStore: { config: w.config, store: w.appStore },
  });
}
