// The primary's cluster wiring (adapter.driver redis, redis-cluster, nats): joins this
// process to the cluster through its transport and attaches what the shards need of it —
// cluster-wide channel questions, presence and counts (adapter/presence.ts), watchlists
// (adapter/watchlist.ts), connection
// counts (adapter/connections.ts), and the backend's up/down flag that /up/{appId} reads.

import type { Logger } from 'pino';
import { ADAPTER_CONNECT_TIMEOUT_MS, bucketSubject, newNodeId, startClusterNode, subjectPrefix, type ClusterNode, type Transport } from '../adapter';
import { shareConnectionCounts } from '../adapter/connections';
import { signedTransport } from '../adapter/signed';
import { startClusterPresence } from '../adapter/presence';
import { startClusterWatchlists } from '../adapter/watchlist';
import type { Bus } from '../bus/bus';
import type { ControlMsg } from '../bus/messages';
import type { Bridge } from '../channels/bridge';
import { nodeAnswer, type ClusterQuestion } from '../channels/cluster-directory';
import { ConnectionCounters } from '../channels/counters';
import { createBusDirectory } from '../channels/directory';
import type { Config } from '../config/types';
import { coordinated, startDeltaCoordination, type DeltaCoord, type DeltaLocal } from '../delta/coord';
import type { DeltaShardInit } from '../delta/init';
import { Interest, slotsByBucket } from '../channels/interest';
import type { MetricsSink } from '../metrics/types';
import { isCacheChannel } from '../protocol/channels';
import type { WebhookService } from '../webhooks/service';

/** The publisher's backlog (Transport.backlog) at which API publishes are answered 503, and below which they are taken again. */
const BUSY_AT = 0.5;
const CLEAR_AT = 0.25;
/** How often the backlog is looked at. */
const BACKLOG_CHECK_MS = 10;

/** How long a node waits for the other nodes' answers to a channel question (then answers with what came). */
const CLUSTER_QUESTION_TIMEOUT_MS = 2000;

export interface ClusterWiring {
  config: Config;
  transport: Transport;
  /** The primary's end of the mesh and its bridge (channels/bridge.ts). */
  bus: Bus;
  bridge: Bridge;
  /** What the shards share: counters memory, the current app slots, the cluster-up flag. */
  base: { shards: number; counters: SharedArrayBuffer; appSlots: Record<string, number>; clusterUp: SharedArrayBuffer; delta?: DeltaShardInit | null; interest: SharedArrayBuffer; buckets: SharedArrayBuffer | null };
  log: Logger;
  metrics: MetricsSink;
  /** Where the occupancy and member webhooks the cluster decides go (null: no webhooks). */
  webhooks: Pick<WebhookService, 'send'> | null;
}

export interface PrimaryCluster {
  node: ClusterNode;
  /** Control messages the shards send the primary for the cluster (questions, presence, counts). */
  control: (msg: ControlMsg, from: number) => void;
  /** A shard's rings were renewed for its replacement: re-send it the other nodes' state. */
  renewed: (shard: number) => void;
  /** cluster_coordination: an event published on this node only (the console) to its delta clients; null otherwise. */
  deltaLocal: DeltaLocal | null;
}

/** Joins the cluster; rejects (AdapterUnavailable) when the backend does not answer in time. */
export async function startPrimaryCluster(w: ClusterWiring): Promise<PrimaryCluster> {
  const { bus, base, log, metrics } = w;
  // adapter.cluster_secret: every frame of the node and of the delta coordination signed and checked
  const id = newNodeId();
  const transport = signedTransport(w.transport, w.config.adapter.cluster_secret, { log, metrics, self: id });
  // the data plane by interest (adapter/buckets.ts): what the shards subscribe decides the buckets
  const interest = new Interest(base.interest, base.shards, -1);
  const { buckets: count, bucket_linger_ms: lingerMs } = w.config.adapter;
  const slots = slotsByBucket(count);
  // cache channels (cache.driver memory): every node's owner remembers a remote publish
  const everywhere = w.config.cache.driver === 'memory' ? (_app: string, channel: string) => isCacheChannel(channel) : () => false;
  const node = await startClusterNode({
    transport, nodeId: id, prefix: subjectPrefix(w.config), bridge: w.bridge, health: w.config.adapter.cluster_health, log, metrics,
    buckets: base.buckets ? {
      count, lingerMs, subject: bucketSubject(w.config), ready: base.buckets, everywhere, interest: (b) => interest.anyIn(slots[b]),
    } : undefined,
  }, ADAPTER_CONNECT_TIMEOUT_MS);

  // another node's question is answered from this node's owner shards
  const local = createBusDirectory({ bus, shards: base.shards, log, metrics });
  for (const kind of ['info', 'list', 'members', 'terminate_user'] as const) {
    // the body is the asking node's ClusterQuestion (kind included)
    node.answer(kind, (body) => nodeAnswer(local, body as ClusterQuestion));
  }
  const webhooks = w.webhooks;
  const presence = startClusterPresence({ cluster: node, bus, shards: base.shards, log, webhook: webhooks && ((app, e) => webhooks.send(app, e)), ordered: w.transport.ordered, onBackendState: (fn) => w.transport.onState(fn) });
  const watchlists = startClusterWatchlists({ cluster: node, bus, shards: base.shards, log, onBackendState: (fn) => w.transport.onState(fn) });
  const counts = shareConnectionCounts({ cluster: node, counters: new ConnectionCounters(base.counters), slots: () => base.appSlots });
  // delta_compression.cluster_coordination: stream positions agreed over the cluster
  const d = base.delta;
  const coord: DeltaCoord | null = d && coordinated(w.config) ? await startDeltaCoordination({
    config: w.config, node, transport, prefix: subjectPrefix(w.config), bus, sequencer: d.sequencer, log, metrics,
    interest: { fossil: new Interest(d.interest.fossil, base.shards, -1), xdelta3: new Interest(d.interest.xdelta3, base.shards, -1) },
  }) : null;
  node.onStop(() => {
    counts.stop();
    presence.stop();
    coord?.stop();
  });
  // the shards' /up/{appId} reads it
  const up = new Int32Array(base.clusterUp);
  Atomics.store(up, 0, node.isUp() ? 1 : 0);
  w.transport.onState((isUp) => Atomics.store(up, 0, isUp ? 1 : 0));
  // the publisher's backlog past half its cap: the shards answer API publishes 503 (nothing
  // delivered) until it is below a quarter, so a publish answered 200 is not refused by the
  // publisher's cap later (http/events.ts)
  const tx = w.transport;
  if (tx.backlog) {
    const watch = setInterval(() => {
      const b = tx.backlog!();
      const busy = Atomics.load(up, 1) === 1;
      if (!busy && b >= BUSY_AT) {
        Atomics.store(up, 1, 1);
        log.warn({ backend: tx.name, backlog: b }, 'cluster: the backend is not answering publishes: API publishes are answered 503 until it catches up');
      } else if (busy && b <= CLEAR_AT) {
        Atomics.store(up, 1, 0);
        log.info({ backend: tx.name }, 'cluster: the backend answers publishes again');
      }
    }, BACKLOG_CHECK_MS);
    watch.unref();
    node.onStop(() => clearInterval(watch));
  }

  return {
    node,
    renewed: (shard) => {
      presence.resend(shard);
      watchlists.resend(shard);
    },
    deltaLocal: coord ? (app, channel, message) => coord.local(app, channel, message) : null,
    control: (msg, from) => {
      if (msg.type === 'cluster_member' || msg.type === 'cluster_count') return presence.fromShard(msg);
      if (msg.type === 'cluster_user' || msg.type === 'cluster_users') return watchlists.fromShard(msg);
      if (msg.type === 'delta_origin') return coord?.origin(msg);
      if (msg.type === 'cluster_bucket') {
        // answered once the backend acknowledged the subscription (or it failed: the shard goes on)
        const done = (ok: boolean) => bus.reply(from, msg.req, ok);
        if (!node.buckets) return done(true);
        const subscribed = node.buckets.ensure(msg.bucket);
        // backend down: the subscription is made when it is back; the subscriber does not wait for it
        if (!node.isUp()) {
          subscribed.catch(() => undefined);
          return done(false);
        }
        return void subscribed.then(() => done(true), () => done(false));
      }
      if (msg.type !== 'cluster_ask') {
        log.warn({ type: msg.type }, 'primary: unexpected control message from a shard');
        return;
      }
      // a shard's question goes to every other node
      void node.ask(msg.question.kind, msg.question, CLUSTER_QUESTION_TIMEOUT_MS).then(({ answers, complete }) => {
        if (!complete) {
          metrics.inc('adapter_errors_total');
          log.warn({ question: msg.question.kind, nodes: node.nodes().length, answers: answers.length }, 'cluster: not every node answered; answering with what came');
        }
        bus.reply(from, msg.req, answers);
      });
    },
  };
}
