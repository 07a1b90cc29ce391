// prom-client implementation of MetricsSink: one Registry per thread (each shard and the
// primary). Every metric is created up front with the spec's label set, so a metric
// appears in /metrics (HELP/TYPE, and 0 for label-less ones) before it is first used.
// The primary merges the threads' registries on each scrape (see ./server.ts).
//
// Label decisions (README "Metrics" says the same):
// - `socket_id` labels of the spec (websocket_buffer_usage, websocket_messages_dropped_total)
//   are unbounded, so those metrics are kept per thread without labels and summed.
// - `event` of messages_sent_total / messages_received_total is the protocol event name for
//   pusher: / pusher_internal: events, and the buckets 'client-event' / 'api-event' for app
//   events (see ./meters.ts): an event name chosen by clients never becomes a label value.
// - `path` of the HTTP metrics is the route pattern (/apps/:appId/events), never the URL.

import { Counter, Gauge, Histogram, Registry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import type {
  BoundCounter, BoundGauge, CounterName, GaugeName, HistogramName, Labels, MetricsSink,
} from './types';

export type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

interface Def { help: string; labels: string[] }

const COUNTERS: Record<CounterName, Def> = {
  connections_total: { help: 'WebSocket connections opened (accepted)', labels: ['app_id'] },
  connection_errors_total: { help: 'WebSocket connections refused or closed by the server for an error', labels: ['app_id', 'reason'] },
  connections_refused_per_ip_total: { help: 'WebSockets and HTTP fallback sessions refused by limits.max_connections_per_ip', labels: ['transport'] },
  channel_subscriptions_total: { help: 'Successful channel subscriptions', labels: ['app_id', 'channel_type'] },
  channel_subscription_errors_total: { help: 'Refused channel subscriptions (reason: the subscription_error type)', labels: ['app_id', 'reason'] },
  messages_sent_total: { help: 'Messages handed to client sockets (event: protocol event name, client-event or api-event)', labels: ['app_id', 'event'] },
  messages_received_total: { help: 'Frames received from clients (event: protocol event name, client-event, other or malformed)', labels: ['app_id', 'event'] },
  message_send_errors_total: { help: 'Messages to a single socket that uWS dropped (backpressure limit)', labels: [] },
  message_bytes_sent_total: { help: 'Bytes of messages handed to client sockets', labels: [] },
  message_bytes_received_total: { help: 'Bytes of frames received from clients', labels: [] },
  http_requests_total: { help: 'HTTP requests on the main listener (path: the route pattern)', labels: ['method', 'path', 'status'] },
  http_errors_total: { help: 'HTTP requests answered with a 5xx status', labels: [] },
  presence_joins_total: { help: 'Presence subscriptions that joined (one per socket)', labels: [] },
  presence_leaves_total: { help: 'Presence subscriptions that left (unsubscribe or close)', labels: [] },
  websocket_buffer_full_total: { help: 'Sends that found a socket over its backpressure limit', labels: ['action'] },
  websocket_messages_dropped_total: { help: 'Messages dropped for a socket over its backpressure limit (summed over sockets)', labels: [] },
  rate_limit_exceeded_total: { help: 'Requests or events refused by a rate limit', labels: ['app_id', 'limit_type'] },
  rate_limiter_errors_total: { help: 'Rate limiter backend failures', labels: [] },
  adapter_publish_total: { help: 'Messages published to the multi-node adapter', labels: [] },
  adapter_subscribe_total: { help: 'Subjects this node subscribed to on the cluster backend', labels: [] },
  adapter_errors_total: { help: 'Multi-node adapter errors', labels: [] },
  adapter_frames_rejected_total: { help: 'Cluster frames dropped unread: no signature or a wrong one (adapter.cluster_secret set), a signed frame on a node without a secret, or a signed one stale (stamped more than 30 s away) or replayed (its sender\'s sequence number seen before)', labels: ['reason'] },
  cluster_nodes_failed_total: { help: 'Cluster nodes declared failed', labels: [] },
  cluster_heartbeat_failures_total: { help: 'Cluster heartbeats that failed', labels: [] },
  cluster_transport_renewals_total: { help: 'Times this node renewed its backend connections because its own heartbeat did not come back (a connected but deaf subscriber)', labels: [] },
  delta_pool_refused_total: { help: 'Deltas the delta pool refused because its queue was full (delta_compression.pool_max_queue); the message went out in full', labels: [] },
  delta_coordination_fallbacks_total: { help: 'Delta messages decided locally because the cluster-wide stream position did not come (cluster_coordination)', labels: [] },
  bus_full_total: { help: 'Frames refused because an internal ring and its spill queue were full (source: api, client_event, member_event, owner, history, webhook, delta_frame)', labels: ['source'] },
  shard_restarts_total: { help: 'Shard threads restarted after a crash', labels: [] },
  app_store_reads_total: { help: 'Reads of the apps table of a database app store (app_manager.driver; result: ok, error)', labels: ['result'] },
  app_store_rows_skipped_total: { help: 'Rows of the apps table not used because they are not a valid app (each logged)', labels: [] },
  app_store_lookups_total: { help: 'App lookups of connections and API requests with a database app store, answered from memory (result: hit, miss = an unknown key or id, stale = found while the store\'s last read failed)', labels: ['result'] },
  owner_reconcile_corrections_total: { help: 'Corrections of the periodic owner reconciliation (kind: subscription = a subscription counted anew, join / leave = a presence socket added / removed, member_event = a member event re-sent to one shard, count_event = a subscription_count re-sent, webhook = a webhook transition re-decided, user = the signed-in connections of a user on one shard counted anew (watchlists))', labels: ['kind'] },
  webhooks_sent_total: { help: 'Webhook requests delivered (2xx answer, or a Lambda invoke accepted)', labels: ['app_id'] },
  webhooks_failed_total: { help: 'Webhook requests given up (reason: status (a 4xx or the last retryable answer), network, timeout, config)', labels: ['app_id', 'reason'] },
  webhook_retries_total: { help: 'Webhook requests sent again after a retryable failure', labels: ['app_id'] },
  cache_errors_total: { help: 'Cache channel reads and writes the cache driver\'s Redis failed (op: read, write)', labels: ['op'] },
  webhooks_requeued_total: { help: 'queue.driver redis: webhook jobs taken back from a consumer that is gone (killed, or its lease lapsed) to be sent again', labels: [] },
  hook_calls_total: { help: 'Backend hook calls (result: allowed, denied, failed = no usable answer, skipped = not called: breaker open or too many in flight); failed and skipped then follow on_failure', labels: ['app_id', 'hook', 'result'] },
  hook_failures_total: { help: 'Backend hook calls without a usable answer (reason: timeout, network, status, invalid_answer, too_large, breaker_open, overloaded, cancelled)', labels: ['app_id', 'hook', 'reason'] },
  webhooks_dropped_total: { help: 'Webhook requests dropped before sending (reason: queue_full, queue_error, shutdown)', labels: ['app_id', 'reason'] },
  history_evictions_total: { help: 'History messages dropped to stay within history.memory_budget_mb (oldest-written channels first)', labels: ['app_id'] },
  history_channels_forgotten_total: { help: 'History channel entries (messages and numbering) dropped at history.max_channels_per_shard or the memory budget, least recently written first; their next message starts a new epoch', labels: ['app_id'] },
  history_store_errors_total: { help: 'history.driver redis / redis-cluster: commands that failed after they were sent (op publish: the message was neither stored nor delivered; op touch: a channel\'s numbering was not kept alive this time)', labels: ['op'] },
  history_recoveries_total: { help: 'Subscriptions with a resume position (result: recovered, no_history, epoch_changed, too_old, too_many, invalid, unavailable)', labels: ['app_id', 'result'] },
  history_catchups_total: { help: 'Messages a shard missed from the history store (its subscription to the store was down) fetched again for its subscriptions with positions (result: fetched, or why they could not be: too_old, too_many, unavailable)', labels: ['app_id', 'result'] },
  history_rewinds_total: { help: 'Subscriptions that were sent a rewind of stored messages', labels: ['app_id'] },
  idempotent_hits_total: { help: 'API publishes with an idempotency_key already seen in the window (answered with the first answer, not delivered again)', labels: ['app_id'] },
  idempotency_evictions_total: { help: 'Idempotency keys forgotten before their window ended to stay within idempotency.max_keys (adapter.driver local: the app holding the most keys loses its oldest)', labels: ['app_id'] },
  idempotency_errors_total: { help: 'Commands of the cluster-wide idempotency window its Redis (adapter.driver redis / redis-cluster) or NATS JetStream (nats) failed (op: claim = publish refused 503, done = answer not recorded, release)', labels: ['op'] },
  fallback_sessions_total: { help: 'HTTP fallback sessions opened (pusher-js xhr_streaming / xhr_polling)', labels: ['app_id'] },
  fallback_requests_total: { help: 'HTTP fallback requests (transport: xhr_streaming, xhr, xhr_send, options)', labels: ['transport'] },
  fallback_request_errors_total: { help: 'HTTP fallback requests answered with an error status (transport, status)', labels: ['transport', 'status'] },
  console_login_failures_total: { help: 'Console logins refused for a wrong or malformed token or secret (not counted: requests with no Authorization header)', labels: [] },
  console_login_throttled_total: { help: 'Console requests refused with 429: their client address failed console.login_max_failures logins within console.login_window', labels: [] },
  console_login_evictions_total: { help: 'Client addresses the console login throttle forgot to stay within console.login_max_addresses', labels: [] },
  console_stream_dropped_total: { help: 'Live console events not written to a browser that left more than console.stream_max_buffered_kb unread', labels: [] },
};

const GAUGES: Record<GaugeName, Def> = {
  connections_active: { help: 'Open WebSocket connections', labels: ['app_id'] },
  app_store_apps: { help: 'Apps of the database app store in force (the configured ones aside)', labels: [] },
  app_store_stale: { help: '1 while the last read of the database app store failed: the apps read before are served', labels: [] },
  channels_active: { help: 'Occupied channels', labels: ['app_id'] },
  presence_members: { help: 'Members of a presence channel', labels: ['app_id', 'channel'] },
  websocket_buffer_usage: { help: 'Bytes buffered for sending, summed over sockets', labels: [] },
  cluster_nodes_active: { help: 'Active cluster nodes', labels: [] },
  adapter_buckets_subscribed: { help: 'Bucket subjects this node subscribes on the cluster backend (those with a local subscriber)', labels: [] },
  bus_spill_bytes: { help: 'Bytes waiting in writer-side spill queues of internal rings', labels: [] },
  hook_calls_in_flight: { help: 'Backend hook calls waiting for their answer', labels: [] },
  hook_breakers_open: { help: 'Shards whose circuit breaker of a hook endpoint is open or half-open (url: scheme, host and path)', labels: ['url'] },
  webhook_queue_size: { help: 'Webhook requests waiting to be sent or retried (sync queue driver)', labels: [] },
  history_messages: { help: 'Messages kept by the memory history store (summed over shards)', labels: [] },
  history_subjects_subscribed: { help: 'Subjects of numbered history messages the shards subscribe on Redis (history.driver redis: those with a subscriber; summed over shards)', labels: [] },
  history_bytes: { help: 'Bytes counted against history.memory_budget_mb (summed over shards)', labels: [] },
  fallback_sessions_active: { help: 'Open HTTP fallback sessions (also counted in connections_active)', labels: ['app_id'] },
  console_stream_buffered_bytes: { help: 'Bytes of the live console\'s event streams waiting in the server\'s send buffers', labels: [] },
};

const HISTOGRAMS: Record<HistogramName, Def & { buckets: number[] }> = {
  http_request_duration_seconds: {
    help: 'HTTP request duration on the main listener (path: the route pattern)',
    labels: ['method', 'path'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  },
  app_store_read_duration_seconds: {
    help: 'Reads of the apps table of a database app store: time to the answer (or the failure)',
    labels: [],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  },
  hook_duration_seconds: {
    help: 'Backend hook calls: time from sending to the answer (or the failure), per hook',
    labels: ['hook'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  },
};

/**
 * A bound series for hot paths: inc/dec/set touch one number; the change is handed to
 * prom-client (which hashes the label set on every call) only when the registry is
 * collected. Flushing a delta keeps it exact when the same series is also updated through
 * the sink's inc()/add(); do not mix it with set()/remove() on the same series.
 */
class BufferedSeries implements BoundCounter, BoundGauge {
  private v = 0;
  private flushed = 0;

  constructor(private readonly metric: Counter<string> | Gauge<string>, private readonly labels: Labels | undefined) {}

  inc(by = 1): void {
    this.v += by;
  }

  dec(by = 1): void {
    this.v -= by;
  }

  set(value: number): void {
    this.v = value;
  }

  flush(): void {
    const d = this.v - this.flushed;
    if (d === 0) return;
    this.flushed = this.v;
    if (this.labels) this.metric.inc(this.labels, d);
    else this.metric.inc(d);
  }
}

/** One thread's metrics. `prefix` is metrics.prefix (e.g. 'ringcast_'). */
export class PromMetrics implements MetricsSink {
  readonly registry = new Registry();
  private readonly counters = new Map<CounterName, Counter<string>>();
  private readonly gauges = new Map<GaugeName, Gauge<string>>();
  private readonly histograms = new Map<HistogramName, Histogram<string>>();
  private readonly beforeCollect: (() => void)[] = [];
  private readonly bound = new Map<string, BufferedSeries>();

  constructor(readonly prefix: string) {
    const registers = [this.registry];
    for (const [name, d] of Object.entries(COUNTERS) as [CounterName, Def][]) {
      this.counters.set(name, new Counter({ name: prefix + name, help: d.help, labelNames: d.labels, registers }));
    }
    for (const [name, d] of Object.entries(GAUGES) as [GaugeName, Def][]) {
      this.gauges.set(name, new Gauge({ name: prefix + name, help: d.help, labelNames: d.labels, registers }));
    }
    for (const [name, d] of Object.entries(HISTOGRAMS) as [HistogramName, Def & { buckets: number[] }][]) {
      this.histograms.set(name, new Histogram({ name: prefix + name, help: d.help, labelNames: d.labels, buckets: d.buckets, registers }));
    }
  }

  inc(name: CounterName, labels?: Labels, by = 1): void {
    const c = this.counters.get(name)!;
    if (labels) c.inc(labels, by);
    else c.inc(by);
  }

  set(name: GaugeName, labels: Labels | undefined, value: number): void {
    const g = this.gauges.get(name)!;
    if (labels) g.set(labels, value);
    else g.set(value);
  }

  add(name: GaugeName, labels: Labels | undefined, delta: number): void {
    const g = this.gauges.get(name)!;
    if (labels) g.inc(labels, delta);
    else g.inc(delta);
  }

  observe(name: HistogramName, labels: Labels | undefined, value: number): void {
    const h = this.histograms.get(name)!;
    if (labels) h.observe(labels, value);
    else h.observe(value);
  }

  remove(name: GaugeName, labels: Labels): void {
    this.gauges.get(name)!.remove(labels);
  }

  counter(name: CounterName, labels?: Labels): BoundCounter {
    return this.bind(name, COUNTERS[name], this.counters.get(name)!, labels);
  }

  gauge(name: GaugeName, labels?: Labels): BoundGauge {
    return this.bind(name, GAUGES[name], this.gauges.get(name)!, labels);
  }

  private bind(name: string, def: Def, metric: Counter<string> | Gauge<string>, labels: Labels | undefined): BufferedSeries {
    const key = labels ? name + JSON.stringify(Object.entries(labels).sort()) : name;
    let s = this.bound.get(key);
    if (s === undefined) {
      // Checked here, at bind time: prom-client would only throw at the first scrape.
      const given = Object.keys(labels ?? {});
      if (given.length !== def.labels.length || !given.every((l) => def.labels.includes(l))) {
        throw new Error(`${name} takes the labels [${def.labels.join(', ')}], got [${given.join(', ')}]`);
      }
      s = new BufferedSeries(metric, labels);
      this.bound.set(key, s);
    }
    return s;
  }

  /** Runs `fn` before every collection (gauges sampled at scrape time, e.g. spill bytes). */
  onCollect(fn: () => void): void {
    this.beforeCollect.push(fn);
  }

  /** This thread's metrics as plain objects (postMessage-able), for the primary's aggregation. */
  async json(): Promise<MetricsJson> {
    for (const fn of this.beforeCollect) fn();
    for (const s of this.bound.values()) s.flush();
    return this.registry.getMetricsAsJSON();
  }
}
