// The seam between the engine and the metrics backend: code that counts something
// calls a MetricsSink; src/metrics/ implements it with prom-client (one registry per
// thread, aggregated by the primary on scrape). Names are the spec's, without the
// configurable prefix (`ringcast_` by default).

export type CounterName =
  | 'connections_total' | 'connection_errors_total'
  /** ours: WebSockets and HTTP sessions refused by limits.max_connections_per_ip (transport ws / http) */
  | 'connections_refused_per_ip_total'
  | 'channel_subscriptions_total' | 'channel_subscription_errors_total'
  | 'messages_sent_total' | 'messages_received_total' | 'message_send_errors_total'
  | 'message_bytes_sent_total' | 'message_bytes_received_total'
  | 'http_requests_total' | 'http_errors_total'
  | 'presence_joins_total' | 'presence_leaves_total'
  | 'websocket_buffer_full_total' | 'websocket_messages_dropped_total'
  | 'rate_limit_exceeded_total' | 'rate_limiter_errors_total'
  | 'adapter_publish_total' | 'adapter_subscribe_total' | 'adapter_errors_total'
  /** ours: cluster frames dropped by the adapter.cluster_secret check (reason unsigned, bad_signature, signed) */
  | 'adapter_frames_rejected_total'
  | 'cluster_nodes_failed_total' | 'cluster_heartbeat_failures_total'
  /** ours: backend connections renewed because the node's own heartbeat did not come back (adapter/echo.ts) */
  | 'cluster_transport_renewals_total'
  /** ours: delta messages whose full/delta decision was taken locally because the cluster's position did not come (cluster_coordination) */
  | 'delta_coordination_fallbacks_total'
  /** ours: deltas refused by the full delta pool queue (sent in full) */
  | 'delta_pool_refused_total'
  /** ours: frames refused because a ring and its spill queue were full (API answered 503) */
  | 'bus_full_total'
  /** ours: shard threads restarted by the primary after a crash */
  | 'shard_restarts_total'
  /** ours: reads of a database app store's table (result: ok, error; apps/sync.ts) */
  | 'app_store_reads_total' | 'app_store_rows_skipped_total'
  /** ours: app lookups of connections and API requests in a shard with a database app store (result: hit, miss, stale) */
  | 'app_store_lookups_total'
  /** ours: what the periodic owner reconciliation corrected (kind: subscription, join, leave, member_event, count_event, webhook) */
  | 'owner_reconcile_corrections_total'
  /** ours: webhook requests delivered (2xx), failed for good, retried, or dropped before sending */
  | 'webhooks_sent_total' | 'webhooks_failed_total' | 'webhook_retries_total' | 'webhooks_dropped_total'
  /** ours: queue.driver redis: jobs taken back from a consumer that is gone (its lease lapsed) */
  | 'webhooks_requeued_total'
  /** ours: cache.driver redis / redis-cluster commands that failed (op read / write) */
  | 'cache_errors_total'
  /** ours: backend hook calls by hook and result (allowed, denied, failed, skipped), and failures by reason */
  | 'hook_calls_total' | 'hook_failures_total'
  /** ours (history/): channel messages dropped to stay within history.memory_budget_mb */
  | 'history_evictions_total'
  /** ours (history/ memory driver): channel entries dropped at history.max_channels_per_shard or the memory budget */
  | 'history_channels_forgotten_total'
  /** ours (history/ redis drivers): numbering or reading scripts that failed after they were sent (op publish / read) */
  | 'history_store_errors_total'
  /** ours (history/): subscriptions with a resume position, by result (recovered or the reason) */
  | 'history_recoveries_total'
  | 'history_catchups_total'
  /** ours (history/): subscriptions that got a rewind */
  | 'history_rewinds_total'
  /** ours (history/): API publishes answered from the idempotency window (not delivered again) */
  | 'idempotent_hits_total'
  /** ours (history/): keys forgotten early to stay within idempotency.max_keys (the app holding the most loses its oldest) */
  | 'idempotency_evictions_total'
  /** ours (history/): commands of the cluster-wide idempotency window its Redis failed (op: claim, done, release) */
  | 'idempotency_errors_total'
  /** ours: HTTP fallback (fallback/): sessions opened, requests by transport, requests refused by transport and status */
  | 'fallback_sessions_total' | 'fallback_requests_total' | 'fallback_request_errors_total'
  /** ours (console/): failed console logins, requests refused 429 by the login throttle, addresses it forgot at its cap */
  | 'console_login_failures_total' | 'console_login_throttled_total' | 'console_login_evictions_total'
  /** ours (console/): live log events not written to a browser over console.stream_max_buffered_kb */
  | 'console_stream_dropped_total';

export type GaugeName =
  | 'connections_active' | 'channels_active' | 'presence_members'
  | 'websocket_buffer_usage' | 'cluster_nodes_active' | 'adapter_buckets_subscribed'
  /** ours: apps read from a database app store now in force; 1 while its last read failed (the apps in memory are served) */
  | 'app_store_apps' | 'app_store_stale'
  /** ours: bytes waiting in writer-side spill queues of this thread's rings */
  | 'bus_spill_bytes'
  /** ours: webhook requests waiting to be sent or retried (primary) */
  | 'webhook_queue_size'
  /** ours: backend hooks: calls in flight (per shard, summed), shards whose breaker of an endpoint is open or half-open */
  | 'hook_calls_in_flight' | 'hook_breakers_open'
  /** ours (history/): messages and bytes kept by the memory history store */
  | 'history_messages' | 'history_bytes' | 'history_subjects_subscribed'
  /** ours: open HTTP fallback sessions (connections_active counts them too) */
  | 'fallback_sessions_active'
  /** ours (console/): bytes of the live log waiting in the send buffers of the console's streams */
  | 'console_stream_buffered_bytes';

export type HistogramName = 'http_request_duration_seconds' | 'hook_duration_seconds' | 'app_store_read_duration_seconds';

export type Labels = Record<string, string>;

/** A counter series with its labels resolved once: hot paths cache these (per app) instead of passing labels. */
export interface BoundCounter {
  inc(by?: number): void;
}

/** A gauge series with its labels resolved once. */
export interface BoundGauge {
  set(value: number): void;
  inc(by?: number): void;
  dec(by?: number): void;
}

export interface MetricsSink {
  inc(name: CounterName, labels?: Labels, by?: number): void;
  set(name: GaugeName, labels: Labels | undefined, value: number): void;
  add(name: GaugeName, labels: Labels | undefined, delta: number): void;
  observe(name: HistogramName, labels: Labels | undefined, value: number): void;
  /** Drops one labelled gauge series (e.g. presence_members of a vacated channel). */
  remove(name: GaugeName, labels: Labels): void;
  /** The series `name{labels}`, resolved once; keep it and call inc() on the hot path. */
  counter(name: CounterName, labels?: Labels): BoundCounter;
  gauge(name: GaugeName, labels?: Labels): BoundGauge;
}

/** A sink that drops everything (metrics disabled). */
const noSeries: BoundCounter & BoundGauge = { inc() {}, dec() {}, set() {} };

export const noMetrics: MetricsSink = {
  inc() {},
  set() {},
  add() {},
  observe() {},
  remove() {},
  counter: () => noSeries,
  gauge: () => noSeries,
};
