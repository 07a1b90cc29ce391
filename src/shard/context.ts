// One shard's services, built once at the thread's start (shard/worker.ts) and passed to
// whatever needs them: the uWS App, the bus end of this thread, the owner records of the
// channels hashed to this shard, the publish pipeline with its stages, the directories,
// the rate limiter, caches, webhooks reports and watchlists. Nothing here listens or
// reads a frame yet: worker.ts starts the bus and the listener once the handlers exist.

import uWS, { type TemplatedApp } from 'uWebSockets.js';
import { AppRegistry } from '../apps/registry';
import { Bus } from '../bus/bus';
import type { ControlMsg } from '../bus/messages';
import { CacheChannels, CacheStore } from '../channels/cache';
import { createSharedCache, type SharedCache } from '../channels/shared-cache';
import { ConnectionCounters } from '../channels/counters';
import { bridgeOut } from '../channels/bridge';
import { createClusterDirectory } from '../channels/cluster-directory';
import { createBusDirectory, type ChannelDirectory } from '../channels/directory';
import { nativeFanout } from '../channels/fanout';
import { createFilteredSubscriptions, type FilteredSubscriptions } from '../channels/filtered';
import { Interest } from '../channels/interest';
import { createBucketGate, type BucketGate } from '../channels/bucket-gate';
import { createOwnerService, type OwnerService } from '../channels/owner-service';
import { createShardHistory, createShardHistorySide, type ShardHistory } from './history';
import type { HistoryShard } from '../history/shard';
import type { RedisHistory } from '../history/redis';
import { createPublisher, type Publisher } from '../channels/publisher';
import { tracing } from '../tracing/tracer';
import { createUserDirectory } from '../channels/user-directory';
import { createUserOwner, type UserOwner } from '../channels/users';
import { deepFreeze } from '../config/freeze';
import type { Config } from '../config/types';
import type { Logger } from 'pino';
import { createShardLogger, moduleLogger } from '../log';
import { createRateLimiter, type RateLimiter } from '../ratelimit';
import { metersFor } from '../metrics/meters';
import type { PromMetrics } from '../metrics/registry';
import { threadMetrics } from '../metrics/lazy';
import { noMetrics, type MetricsSink } from '../metrics/types';
import { outName } from '../protocol/events';
import { Backpressure } from '../ws/backpressure';
import { createWatchlists, type Watchlists } from '../ws/watchlist';
import type { Socket } from '../ws/types';
import { sendFrame } from '../ws/send';
import { createTap, type Tap } from '../console/tap';
import { appsWithWebhooks } from '../webhooks/service';
import { createShardWebhooks, type ShardWebhooks } from '../webhooks/shard';
import { createDeltaShard, type DeltaShard } from '../delta/shard';
import { deltaRoute } from '../delta/stage';
import { coordinated, coordRoute } from '../delta/coord';
import type { CacheStates } from '../delta/streams';
import type { PresenceShadows } from '../channels/rebuild';
import { MemberTally } from '../channels/reconcile';
import { createSessionTopics, type SessionTopics } from '../fallback/hub';
import type { Fallback } from '../fallback/service';
import type { ShardEvent, ShardInit } from './init';

export interface ShardContext {
  readonly init: ShardInit;
  readonly shardId: number;
  /** Thread count of the shards; the primary is thread `shards` of the mesh (bus/topology.ts). */
  readonly shards: number;
  readonly config: Config;
  readonly log: Logger;
  /** `module` on each line when log.include_target is on (log.ts). */
  readonly logOf: (module: string) => Logger;
  readonly apps: AppRegistry;
  /** The wire name of a canonical event under protocol.event_prefix. */
  readonly out: (canonical: string) => string;
  /** An event to the primary over the thread's port. */
  readonly post: (e: ShardEvent) => void;
  /** A control message to the primary that nobody waits for: logged when the queue is full. */
  readonly toPrimary: (msg: ControlMsg, what: string) => void;
  readonly uws: TemplatedApp;
  readonly sockets: Map<string, Socket>;
  readonly bus: Bus;
  /** null when metrics are off. */
  readonly promMetrics: PromMetrics | null;
  readonly metrics: MetricsSink;
  readonly backpressure: Backpressure;
  readonly counters: ConnectionCounters;
  readonly limiter: RateLimiter;
  readonly cacheStore: CacheStore | null;
  readonly sharedCache: SharedCache | null;
  readonly cache: CacheChannels | null;
  readonly interest: Interest;
  /** In a cluster: the first subscriber of a bucket waits for the node's backend subscription (channels/bucket-gate.ts). */
  readonly buckets: BucketGate | null;
  readonly tap: Tap | null;
  readonly filters: FilteredSubscriptions<Socket> | null;
  readonly delta: DeltaShard<Socket> | null;
  readonly publisher: Publisher;
  readonly directory: ChannelDirectory;
  readonly webhooks: ShardWebhooks | null;
  readonly owner: OwnerService;
  readonly users: UserOwner;
  readonly watchlists: Watchlists;
  /** History channels and idempotent publish (shard/history.ts). */
  readonly historySide: HistoryShard;
  /** history.driver redis / redis-cluster: this shard's Redis numbering (history/redis.ts); null with memory. */
  readonly historyRedis: RedisHistory | null;
  readonly history: ShardHistory;
  /** Set once the shard stops (shutdown or crash handling): closing sockets then tell no owner. */
  stopping: boolean;
  /** Set once a drain starts (shard/drain.ts): /up, new upgrades and new HTTP sessions answer 503. */
  draining: boolean;
  /** Presence shadows of the failover (shard/failover.ts), bound once it is built. */
  shadows: PresenceShadows | null;
  /** Member events per pair of shards, for the owner reconciliation (channels/reconcile.ts). */
  readonly tally: MemberTally;
  /** HTTP fallback sessions on topics (fallback/hub.ts): every native publish also visits them; null when http_fallback is off. */
  readonly topics: SessionTopics | null;
  /** HTTP fallback endpoints and sessions (fallback/service.ts), bound once the handlers exist; null when off. */
  fallback: Fallback | null;
}

export function createShardContext(init: ShardInit, post: (e: ShardEvent) => void): ShardContext {
  const { shardId, shards } = init;
  // Frozen again: structured cloning to this thread drops the primary's freeze, and
  // frozen arrays let protocol/origin.ts cache compiled origin matchers.
  const config = deepFreeze(init.config);
  const rootLog = createShardLogger(config.log, init.logPort!, shardId);
  const logOf = (module: string) => moduleLogger(rootLog, config.log, module);
  const log = logOf('shard');
  const apps = new AppRegistry(deepFreeze(init.apps), init.appSlots);
  const prefix = config.protocol.event_prefix;
  const out = (canonical: string) => outName(canonical, prefix);

  const uws: TemplatedApp = config.ssl.enabled
    ? uWS.SSLApp({ cert_file_name: config.ssl.cert_path, key_file_name: config.ssl.key_path })
    : uWS.App();
  const sockets = new Map<string, Socket>();
  const bus = new Bus(shardId, init.topology);
  const toPrimary = (msg: ControlMsg, what: string): void => {
    try {
      bus.control(shards, msg);
    } catch (err) {
      log.error({ err }, `could not tell the primary about ${what}: the other nodes miss it`);
    }
  };
  const promMetrics = threadMetrics(config.metrics);
  const metrics: MetricsSink = promMetrics ?? noMetrics;
  const backpressure = new Backpressure({
    maxBytes: config.websocket.max_bytes,
    maxMessages: config.websocket.max_messages,
    action: config.websocket.on_backpressure,
    metrics,
    sockets,
  });
  const counters = new ConnectionCounters(init.counters);
  // memory driver: maps the primary's buffer, so its limits are per process (ratelimit/memory.ts).
  const limiter = createRateLimiter(config, { memory: init.ratelimit, log: logOf('ratelimit') });
  // Cache channels (channels/cache.ts): the entries of the channels this shard owns; off with cache.driver `none`.
  const cacheStore = config.cache.driver === 'none' ? null : new CacheStore();
  // cache.driver redis / redis-cluster: those entries written through to Redis (channels/shared-cache.ts).
  const sharedCache = createSharedCache(config, cacheStore, { metrics, log: logOf('cache') });
  const cache = cacheStore ? new CacheChannels(bus, shards, config.channel_limits.cache_ttl) : null;
  cacheStore?.startSweep(30_000);
  // Which shards have subscribers of a channel: this shard keeps its own bit (channels/interest.ts).
  const interest = new Interest(init.interest, shards, shardId);
  const buckets = init.buckets && createBucketGate({
    ready: init.buckets, buckets: config.adapter.buckets,
    request: (bucket) => bus.request(shards, { type: 'cluster_bucket', bucket }),
  });
  // The live console's event tap (console/tap.ts): a pipeline stage only when the console is on.
  const tap = config.console.enabled ? createTap(shardId, post) : null;
  // Tag filtering (channels/filtered.ts): the filter visitor stage; null when disabled.
  // Native publishes: uWS topics, and the HTTP fallback sessions on them when enabled (fallback/hub.ts).
  const native = nativeFanout(uws);
  const topics = config.http_fallback.enabled ? createSessionTopics(native) : null;
  const fanout = topics ?? native;
  const filters = config.tag_filtering.enabled ? createFilteredSubscriptions<Socket>({ uws: fanout, sockets, meters: metersFor(metrics) }) : null;
  // Delta compression (delta/): this shard's delta sockets and the route to the sequencer (thread shards + 1).
  const deltaInit = init.delta;
  const deltaInterest = deltaInit && {
    fossil: new Interest(deltaInit.interest.fossil, shards, shardId),
    xdelta3: new Interest(deltaInit.interest.xdelta3, shards, shardId),
  };
  const delta = deltaInit && deltaInterest ? createDeltaShard<Socket>({
    config, uws: fanout, sockets, interest: deltaInterest, out, log, metrics, guard: backpressure, sendFrame,
    states: (app, channel, filter) => bus.request<CacheStates & { conflation_key: string | null }>(deltaInit.sequencer, { type: 'delta_states', app, channel, ...(filter === undefined ? {} : { filter }) }),
    register: (op, app, channel, filter, algo) => bus.request(deltaInit.sequencer, { type: 'delta_filter', op, app, channel, filter, algo }),
    filters,
  }) : null;
  backpressure.attach({ filters, delta });

  const tally = new MemberTally(shards);
  // Built at the end; the callbacks below read it (and the services made after them) late:
  // owner ↔ publisher ↔ webhooks, and the shadows the worker sets once it has them.
  let built: ShardContext | null = null;

  // History channels (history/): numbered and kept by their owner shard; its stage sends their events there.
  // With delta compression the owner sends their numbered messages to the sequencer (docs/history.md).
  const historyDelta = deltaInit && deltaInterest && !coordinated(config) ? { sequencer: deltaInit.sequencer, interest: deltaInterest } : null;
  const { side: historySide, redis: historyRedis } = createShardHistorySide({ config, apps, shards, fanout, sockets, bus, interest, out, log: logOf('history'), metrics, publisher: () => publisher, delta: historyDelta, filters });
  const publisher = createPublisher({
    bus, interest, shards, uws: fanout, sockets, cache, guard: backpressure, metrics, log: logOf('publisher'), out,
    onMember: (m) => built?.shadows?.apply(m.app, m.channel, m.op, m.userId),
    memberSent: (s) => tally.sent[s]++,
    tracing: tracing(),
    stages: {
      // cluster_coordination: the primary gets the event's position first (delta/coord.ts)
      // (a history channel's events reach the sequencer from its owner once numbered, memory driver)
      delta: deltaInit && deltaInterest ? [coordinated(config) ? coordRoute(shards) : deltaRoute(deltaInit.sequencer, deltaInterest, historyRedis ? null : (app, channel) => historySide.settings.of(app, channel) !== null)] : [],
      // history last: the adapter and the console tap see a history channel's event first;
      // with history in Redis the adapter does not carry history channels (Redis does: history/redis.ts)
      adapter: historyRedis
        ? [...(tap ? [tap.stage] : []), historySide.stage, ...(init.bridge ? [bridgeOut(shards)] : [])]
        : [...(init.bridge ? [bridgeOut(shards)] : []), ...(tap ? [tap.stage] : []), historySide.stage],
      // history's first: a stage that delivered a frame itself ends the list
      filter: [historySide.inbound, ...(filters ? [filters] : []), ...(delta ? [delta.inbound] : [])],
    },
  });
  const localDirectory = createBusDirectory({ bus, shards, log: logOf('bus'), metrics });
  // In a cluster the channel questions also go to every other node, through the primary
  // (adapter/, channels/cluster-directory.ts).
  const directory = config.adapter.driver === 'local'
    ? localDirectory
    : createClusterDirectory(localDirectory, (question) => bus.request<unknown[]>(shards, { type: 'cluster_ask', question }));
  // Webhook reports to the primary (webhooks/shard.ts); null when no app has webhooks.
  const webhooks = appsWithWebhooks(config) ? createShardWebhooks({
    apps, log, metrics,
    toPrimary: (msg) => bus.control(shards, msg),
    count: (app, channel) => owner.store.info(app, channel).subscription_count,
  }) : null;
  const owner = createOwnerService({
    shards, apps, cacheStore, sharedCache,
    publisher: tap ? { publishOne: (m) => publisher.publishOne(m), member: (m) => { tap.member(m); publisher.member(m); } } : publisher, log: logOf('channels'), metrics, out,
    defaultMaxMembers: config.presence.max_members_per_channel,
    reply: (to, req, body) => bus.reply(to, req, body),
    tally,
    sendMember: (to, m) => {
      bus.control(to, m);
      tally.sent[to]++;
    },
    // in a cluster, node-local presence transitions go to the other nodes through the primary
    cluster: config.adapter.driver === 'local' ? null : {
      memberChanged: (m) => toPrimary({ type: 'cluster_member', ...m }, 'a presence change'),
      countChanged: (c) => toPrimary({ type: 'cluster_count', ...c }, 'a subscription count'),
    },
    hooks: webhooks ? {
      occupied: (app, channel) => webhooks.occupied(app, channel),
      vacated: (app, channel) => webhooks.vacated(app, channel),
      memberAdded: (app, channel, userId) => webhooks.memberAdded(app, channel, userId),
      memberRemoved: (app, channel, userId) => webhooks.memberRemoved(app, channel, userId),
      countChanged: (app, channel) => webhooks.countChanged(app, channel),
    } : undefined,
  });
  // Watchlists: the online state of the users hashed to this shard, and this shard's watchers.
  const users = createUserOwner({
    control: (to, msg) => bus.control(to, msg),
    reply: (to, req, body) => bus.reply(to, req, body),
    log,
    rebuilding: init.restoreFrom !== null,
    // in a cluster, node-local online / offline go to the other nodes through the primary
    cluster: config.adapter.driver === 'local' ? null : {
      changed: (op, app, userId) => toPrimary({ type: 'cluster_user', op, app, userId }, 'a user\'s online state'),
      state: (list) => toPrimary({ type: 'cluster_users', shard: shardId, users: list }, 'the rebuilt online users'),
    },
  });
  const watchlists = createWatchlists({ users: createUserDirectory({ bus, shards, log, metrics }), log, metrics, out });
  const history = createShardHistory({ config, shards, bus, interest, side: historySide, redis: historyRedis, publisher, owner, log: logOf('history'), metrics, delta: historyDelta });
  built = {
    init, shardId, shards, config, log, logOf, apps, out, post, toPrimary, uws, sockets, bus, promMetrics, metrics, backpressure, counters, limiter,
    cacheStore, sharedCache, cache, interest, buckets, tap, filters, delta, stopping: false, draining: false, shadows: null, tally, topics, fallback: null,
    publisher, directory, webhooks, owner, users, watchlists, historySide, historyRedis, history,
  };
  return built;
}
