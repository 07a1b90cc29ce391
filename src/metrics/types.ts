// The seam between the engine and the metrics backend: code that counts something
// calls a MetricsSink; src/metrics/ implements it with prom-client (one registry per
// thread, aggregated by the primary on scrape). Names are the spec's, without the
// configurable prefix (`ringcast_` by default).

export type CounterName =
  | 'connections_total' | 'connection_errors_total'
  | 'channel_subscriptions_total' | 'channel_subscription_errors_total'
  | 'messages_sent_total' | 'messages_received_total' | 'message_send_errors_total'
  | 'message_bytes_sent_total' | 'message_bytes_received_total'
  | 'http_requests_total' | 'http_errors_total'
  | 'presence_joins_total' | 'presence_leaves_total'
  | 'websocket_buffer_full_total' | 'websocket_messages_dropped_total'
  | 'rate_limit_exceeded_total' | 'rate_limiter_errors_total'
  | 'adapter_publish_total' | 'adapter_subscribe_total' | 'adapter_errors_total'
  | 'cluster_nodes_failed_total' | 'cluster_heartbeat_failures_total'
  /** ours: frames refused because a ring and its spill queue were full (API answered 503) */
  | 'bus_full_total'
  /** ours: shard threads restarted by the primary after a crash */
  | 'shard_restarts_total';

export type GaugeName =
  | 'connections_active' | 'channels_active' | 'presence_members'
  | 'websocket_buffer_usage' | 'cluster_nodes_active'
  /** ours: bytes waiting in writer-side spill queues of this thread's rings */
  | 'bus_spill_bytes';

export type HistogramName = 'http_request_duration_seconds';

export type Labels = Record<string, string>;

export interface MetricsSink {
  inc(name: CounterName, labels?: Labels, by?: number): void;
  set(name: GaugeName, labels: Labels | undefined, value: number): void;
  add(name: GaugeName, labels: Labels | undefined, delta: number): void;
  observe(name: HistogramName, labels: Labels | undefined, value: number): void;
}

/** A sink that drops everything (metrics disabled). */
export const noMetrics: MetricsSink = {
  inc() {},
  set() {},
  add() {},
  observe() {},
};
