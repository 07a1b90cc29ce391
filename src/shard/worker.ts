// Shard wiring: one uWS App on the shared port (SO_REUSEPORT), the bus end of this
// thread, the owner records of the channels hashed to this shard, and the handlers
// built with their dependencies.

import { parentPort, workerData } from 'node:worker_threads';
import uWS, { type TemplatedApp, type us_listen_socket } from 'uWebSockets.js';
import { AppRegistry } from '../apps/registry';
import { Bus } from '../bus/bus';
import type { ChannelInfo, ControlMsg } from '../bus/messages';
import { ConnectionCounters } from '../channels/counters';
import { OwnerStore, ownerOf } from '../channels/owner';
import type { AppConfig } from '../config/types';
import { registerRoutes } from '../http/router';
import { deepFreeze } from '../config';
import { createLogger } from '../log';
import { noMetrics, type MetricsSink } from '../metrics/types';
import { ErrorCode } from '../protocol/codes';
import { Ev, outName } from '../protocol/events';
import { frame } from '../protocol/frames';
import { createWsBehavior } from '../ws/connection';
import type { Socket } from '../ws/types';
import { Fanout } from './fanout';
import type { PrimaryCommand, ShardEvent, ShardInit } from './init';

const init = workerData as ShardInit;
const { shardId, shards } = init;
// Frozen again: structured cloning to this thread drops the primary's freeze, and
// frozen arrays let protocol/origin.ts cache compiled origin matchers.
const config = deepFreeze(init.config);
const log = createLogger(config.log, { shard: shardId });
const apps = new AppRegistry(config.apps);
const prefix = config.protocol.event_prefix;
const out = (canonical: string) => outName(canonical, prefix);
const post = (e: ShardEvent) => parentPort!.postMessage(e);

const uws: TemplatedApp = config.ssl.enabled
  ? uWS.SSLApp({ cert_file_name: config.ssl.cert_path, key_file_name: config.ssl.key_path })
  : uWS.App();
const sockets = new Map<string, Socket>();
const bus = new Bus(shardId, init.topology);
const fanout = new Fanout(bus, uws, sockets);
const counters = new ConnectionCounters(init.counters);
const metrics: MetricsSink = noMetrics;

function broadcastSafe(app: string, channel: string, except: string, message: string) {
  try {
    fanout.broadcast(app, channel, except, message);
  } catch (err) {
    log.error({ err, channel }, 'member event not delivered: internal queue full');
  }
}

const owner = new OwnerStore(shards, {
  occupied: (app, channel) => log.debug({ app, channel }, 'channel occupied'),
  vacated: (app, channel) => log.debug({ app, channel }, 'channel vacated'),
  memberAdded: (app, channel, userId, userInfo, except) => broadcastSafe(app, channel, except,
    frame(out(Ev.MemberAdded), JSON.stringify({ user_id: userId, user_info: userInfo }), channel)),
  memberRemoved: (app, channel, userId) => broadcastSafe(app, channel, '',
    frame(out(Ev.MemberRemoved), JSON.stringify({ user_id: userId }), channel)),
});

function onControl(msg: ControlMsg, from: number): void {
  switch (msg.type) {
    case 'sub':
      return owner.sub(msg.app, msg.channel, msg.shard, msg.delta);
    case 'presence_join': {
      const app = apps.byId(msg.app);
      const max = app ? app.max_presence_members_per_channel : config.presence.max_members_per_channel;
      return bus.reply(from, msg.req, owner.join(msg.app, msg.channel, from, msg.socketId, msg.userId, msg.userInfo, max));
    }
    case 'presence_leave':
      return owner.leave(msg.app, msg.channel, msg.shard, msg.userKey);
    case 'channel_info':
      return bus.reply(from, msg.req, owner.info(msg.app, msg.channel));
    case 'channels_list':
      return bus.reply(from, msg.req, owner.list(msg.app, msg.prefix));
    case 'members':
      return bus.reply(from, msg.req, owner.members(msg.app, msg.channel));
    case 'reply':
      return; // settled by the bus itself
  }
}

bus.start({
  onPublish: (f) => fanout.deliverLocal(f),
  onControl,
  onError: (err, type) => log.error({ err, frameType: type }, 'bus frame handler failed'),
});

let socketSeq = 0;
const behavior = createWsBehavior({
  config, apps, shardId, shards, bus, fanout, counters, sockets, uws, log, metrics, out,
  stopping: () => stopping,
  nextSocketId: () => `${init.socketIdPrefix}.${++socketSeq}`,
});
uws.ws('/app/:key', behavior);

registerRoutes(uws, {
  config, apps, fanout, log, metrics,
  stopping: () => stopping,
  channelInfo: (app: AppConfig, channel: string) =>
    bus.request<ChannelInfo>(ownerOf(app.id, channel, shards), { type: 'channel_info', app: app.id, channel }),
  channelList: async (app: AppConfig, prefix: string) => {
    const parts = await Promise.all(Array.from({ length: shards }, (_, s) =>
      bus.request<[string, number | null][]>(s, { type: 'channels_list', app: app.id, prefix })));
    return parts.flat();
  },
  members: (app: AppConfig, channel: string) =>
    bus.request<[unknown, unknown][]>(ownerOf(app.id, channel, shards), { type: 'members', app: app.id, channel }),
});

const sweepTimer = setInterval(() => behavior.sweep(Date.now()), 1000);

let listenSocket: us_listen_socket | null = null;
uws.listen(config.host, init.port, (ls) => {
  if (!ls) {
    shutdownNow({ type: 'listen_failed', port: init.port });
    return;
  }
  listenSocket = ls;
  post({ type: 'ready', port: uWS.us_socket_local_port(ls) });
});

let stopping = false;

/**
 * Closes the listener and every client (4200). The thread then ends by itself once uWS
 * has no socket left: terminating a thread that still holds uWS sockets aborts the
 * process, so nothing is forced. Idle HTTP keep-alive sockets close within uWS's 10 s
 * idle timeout; requests still arriving on them are answered with Connection: close.
 * Clients that ignore the close handshake are cut after half the grace period.
 */
function shutdownNow(final: ShardEvent): void {
  stopping = true;
  clearInterval(sweepTimer);
  if (listenSocket) {
    uWS.us_listen_socket_close(listenSocket);
    listenSocket = null;
  }
  for (const ws of [...sockets.values()]) {
    ws.end(ErrorCode.ShuttingDown, 'Server shutting down');
  }
  const started = Date.now();
  const done = () => {
    bus.stop();
    post(final);
    parentPort!.close();
  };
  if (sockets.size === 0) return done();
  const poll = setInterval(() => {
    if (sockets.size > 0 && Date.now() - started > config.shutdown_grace_period / 2) {
      for (const ws of [...sockets.values()]) ws.close();
    }
    if (sockets.size > 0) return;
    clearInterval(poll);
    done();
  }, 5);
}

parentPort!.on('message', (cmd: PrimaryCommand) => {
  if (cmd.type === 'shutdown' && !stopping) shutdownNow({ type: 'stopped' });
});
