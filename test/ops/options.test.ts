// No option of the spec is accepted and silently ignored. This walks every key of the
// defaults (config/defaults.ts, read off config/schema.ts: the list of keys the loader
// accepts) and every per-app key, and each must be claimed below as one of:
//  - effect: the file that reads it and the expression it reads it by (checked in src/);
//  - refused: a value that the loader or config/support.ts refuses, naming the key
//    (checked by loading it); for a switch, `true` / another driver;
//  - inert: only read once another option is on, and that option is refused here (checked);
//  - pending: work under way in another branch at the time of writing; its current state.
// A key added to the defaults without a claim fails this test; so does a claim for a key
// that no longer exists.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { loadConfig, type ConfigInput } from '../../src/config';
import { appDefaults, defaultConfig, defaultRawTree } from '../../src/config/defaults';
import { assertSupported } from '../../src/config/support';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const APP = { id: 'a', key: 'k', secret: 's' };

type Claim =
  | { effect: [file: string, needle: string] }
  | { refused: ConfigInput; why: RegExp }
  | { inert: string; enabler: ConfigInput }
  | { pending: string };


const CLAIMS: Record<string, Claim> = {
  host: { effect: ['src/shard/listen.ts', 'uws.listen(config.host, init.port'] },
  port: { effect: ['src/main.ts', 'config.port === 0 ? await freePort(config.host) : config.port'] },
  domain: { effect: ['src/listeners/redirect.ts', 'config.domain'] },
  workers: { effect: ['src/main.ts', 'const shards = config.workers'] },
  shutdown_grace_period: { effect: ['src/shard/worker.ts', 'graceMs: config.shutdown_grace_period'] },
  'unix_socket.enabled': { effect: ['src/shard/listen.ts', 'config.unix_socket.enabled && ctx.shardId === 0'] },
  'unix_socket.path': { effect: ['src/listeners/unix.ts', 'app.listen_unix((ls) => { listen = ls; }, cfg.path)'] },
  'unix_socket.permission_mode': { effect: ['src/listeners/unix.ts', 'chmodSync(cfg.path, cfg.permission_mode)'] },
  'ssl.enabled': { effect: ['src/shard/context.ts', 'config.ssl.enabled'] },
  'ssl.cert_path': { effect: ['src/shard/context.ts', 'cert_file_name: config.ssl.cert_path'] },
  'ssl.key_path': { effect: ['src/shard/context.ts', 'key_file_name: config.ssl.key_path'] },
  'ssl.redirect_http': { effect: ['src/main.ts', 'if (config.ssl.redirect_http)'] },
  'ssl.http_port': { effect: ['src/listeners/redirect.ts', 'listenHttp(server, config.ssl.http_port'] },
  'adapter.driver': { effect: ['src/adapter/index.ts', 'switch (config.adapter.driver)'] },
  'adapter.cluster_health.enabled': { effect: ['src/adapter/cluster.ts', 'if (health.enabled)'] },
  'adapter.cluster_health.heartbeat_interval_ms': { effect: ['src/adapter/cluster.ts', 'health.heartbeat_interval_ms'] },
  'adapter.cluster_health.node_timeout_ms': { effect: ['src/adapter/cluster.ts', 'health.node_timeout_ms'] },
  'adapter.cluster_health.cleanup_interval_ms': { effect: ['src/adapter/cluster.ts', 'health.cleanup_interval_ms'] },
  'adapter.nats.servers': { effect: ['src/adapter/nats.ts', 'servers: this.cfg.servers'] },
  'adapter.nats.user': { effect: ['src/adapter/nats.ts', 'user: this.cfg.user'] },
  'adapter.nats.password': { effect: ['src/adapter/nats.ts', 'pass: this.cfg.password'] },
  'adapter.nats.token': { effect: ['src/adapter/nats.ts', 'token: this.cfg.token'] },
  'adapter.nats.prefix': { effect: ['src/adapter/index.ts', 'config.adapter.nats.prefix'] },
  'adapter.cluster_secret': { effect: ['src/primary/cluster.ts', 'signedTransport(w.transport, w.config.adapter.cluster_secret'] },
  'adapter.buffer_multiplier_per_cpu': { refused: { adapter: { buffer_multiplier_per_cpu: 128 } }, why: /adapter\.buffer_multiplier_per_cpu: the adapter has no per-CPU buffer/ },
  // memory / none in the shard (worker.ts); redis / redis-cluster in channels/shared-cache.ts
  'cache.driver': { effect: ['src/channels/shared-cache.ts', "config.cache.driver === 'redis-cluster'"] },
  'queue.driver': { effect: ['src/webhooks/service.ts', "config.queue.driver === 'redis'"] },
  'rate_limiter.enabled': { effect: ['src/ratelimit/index.ts', 'rate_limiter.enabled'] },
  'rate_limiter.driver': { effect: ['src/ratelimit/index.ts', 'rate_limiter.driver'] },
  'rate_limiter.api.max_requests': { effect: ['src/http/ratelimit.ts', 'config.rate_limiter.api.max_requests'] },
  'rate_limiter.api.window_seconds': { effect: ['src/http/ratelimit.ts', 'window_seconds'] },
  'rate_limiter.api.trust_hops': { effect: ['src/http/ratelimit.ts', 'trust_hops'] },
  'rate_limiter.websocket.max_requests': { effect: ['src/ws/connection.ts', 'config.rate_limiter.websocket.max_requests'] },
  'rate_limiter.websocket.window_seconds': { effect: ['src/ws/connection.ts', 'config.rate_limiter.websocket.window_seconds'] },
  'database.redis.host': { effect: ['src/config/redis.ts', 'cfg.host'] },
  'database.redis.port': { effect: ['src/config/redis.ts', 'cfg.port'] },
  'database.redis.username': { effect: ['src/config/redis.ts', 'cfg.username'] },
  'database.redis.password': { effect: ['src/config/redis.ts', 'cfg.password'] },
  'database.redis.db': { effect: ['src/config/redis.ts', 'cfg.db'] },
  'database.redis.key_prefix': { effect: ['src/ratelimit/redis.ts', 'key_prefix'] },
  'database.redis.pool_min': { refused: { database: { redis: { pool_min: 1 } } }, why: /database\.redis\.pool_min: ringcast keeps one command and one subscriber connection/ },
  'database.redis.pool_max': { refused: { database: { redis: { pool_max: 20 } } }, why: /database\.redis\.pool_max: .*no connection pool to size/ },
  'database.redis.sentinels': { effect: ['src/config/redis.ts', 'sentinels: cfg.sentinels'] },
  'database.redis.sentinel_password': { effect: ['src/config/redis.ts', 'cfg.sentinel_password'] },
  'database.redis.name': { effect: ['src/config/redis.ts', 'name: cfg.name'] },
  'database.redis_cluster.nodes': { effect: ['src/redis/client.ts', 'new Cluster(cfg.nodes'] },
  'database.redis_cluster.username': { effect: ['src/redis/client.ts', 'username: cfg.username'] },
  'database.redis_cluster.password': { effect: ['src/redis/client.ts', 'password: cfg.password'] },
  'database.redis_cluster.key_prefix': { effect: ['src/ratelimit/redis-cluster.ts', 'key_prefix'] },
  'database.pooling.enabled': { refused: { database: { pooling: { enabled: true } } }, why: /database\.pooling\.enabled: .*keeps a node's publishes in order|database\.pooling\.enabled: .*no connection pool/ },
  'database.pooling.min': { refused: { database: { pooling: { min: 1 } } }, why: /database\.pooling\.min: .*no connection pool/ },
  'database.pooling.max': { refused: { database: { pooling: { max: 20 } } }, why: /database\.pooling\.max: .*no connection pool/ },
  'http_fallback.enabled': { effect: ['src/shard/context.ts', 'config.http_fallback.enabled ? createSessionTopics(native) : null'] },
  'http_fallback.path': { effect: ['src/fallback/service.ts', 'const base = `${fb.path}/app/:key/:server/:session`'] },
  'http_fallback.heartbeat_interval': { effect: ['src/fallback/service.ts', 'fb.heartbeat_interval * 1000'] },
  'http_fallback.disconnect_delay': { effect: ['src/fallback/service.ts', 'fb.disconnect_delay * 1000'] },
  'http_fallback.max_sessions': { effect: ['src/fallback/service.ts', 'Math.ceil(fb.max_sessions / shards)'] },
  'tag_filtering.enabled': { effect: ['src/shard/context.ts', 'config.tag_filtering.enabled ? createFilteredSubscriptions'] },
  'tag_filtering.max_nodes': { effect: ['src/ws/subscribe.ts', 'parseFilter(raw, tf.max_nodes, '] },
  // limits (config/schema.ts; behaviour: test/e2e/hostile-limits.test.ts, hostile-http.test.ts)
  'limits.max_subscriptions_per_connection': { effect: ['src/ws/subscribe.ts', 'd.channels.size >= limits.max_subscriptions_per_connection'] },
  'limits.max_filter_values': { effect: ['src/ws/subscribe.ts', 'parseFilter(raw, tf.max_nodes, limits.max_filter_values)'] },
  'limits.max_filter_values_per_connection': { effect: ['src/ws/subscribe.ts', 'held + values <= limits.max_filter_values_per_connection'] },
  'limits.frames_per_second': { effect: ['src/ws/limits.ts', 'frames_per_second: rate'] },
  'limits.frame_burst': { effect: ['src/ws/limits.ts', 'frame_burst: burst'] },
  'limits.max_connections': { effect: ['src/ws/limits.ts', 'max_connections: maxConnections'] },
  'limits.http_body_bytes_in_flight': { effect: ['src/http/router.ts', 'createBodyBudget(config.limits.http_body_bytes_in_flight)'] },
  'cors.origin': { effect: ['src/http/router.ts', 'config.cors.origin'] },
  'cors.methods': { effect: ['src/http/router.ts', 'config.cors.methods'] },
  'cors.allowed_headers': { effect: ['src/http/router.ts', 'config.cors.allowed_headers'] },
  'cors.credentials': { effect: ['src/http/router.ts', 'cors.credentials'] },
  'metrics.enabled': { effect: ['src/main.ts', 'config.metrics.enabled'] },
  'metrics.driver': { refused: { metrics: { driver: 'statsd' as 'prometheus' } }, why: /metrics\.driver must be one of prometheus/ },
  'metrics.host': { effect: ['src/main.ts', 'host: m.host'] },
  'metrics.port': { effect: ['src/main.ts', 'port: m.port'] },
  'metrics.prefix': { effect: ['src/main.ts', 'new PromMetrics(config.metrics.prefix)'] },
  'metrics.token': { effect: ['src/main.ts', 'token: m.token'] },
  'websocket.max_payload_kb': { effect: ['src/ws/connection.ts', 'config.websocket.max_payload_kb'] },
  'websocket.max_messages': { effect: ['src/shard/context.ts', 'maxMessages: config.websocket.max_messages'] },
  'websocket.max_bytes': { effect: ['src/shard/context.ts', 'maxBytes: config.websocket.max_bytes'] },
  'websocket.auto_ping': { effect: ['src/ws/connection.ts', 'sendPingsAutomatically: config.websocket.auto_ping'] },
  'websocket.ping_interval': { effect: ['src/ws/connection.ts', 'ws.ping_interval + margin'] },
  'websocket.activity_timeout': { effect: ['src/ws/connection.ts', 'config.websocket.activity_timeout * 1000'] },
  'websocket.pong_timeout': { effect: ['src/ws/connection.ts', 'config.websocket.pong_timeout * 1000'] },
  'websocket.on_backpressure': { effect: ['src/shard/context.ts', 'action: config.websocket.on_backpressure'] },
  'bus.ring_bytes': { effect: ['src/main.ts', 'config.bus.ring_bytes'] },
  'bus.max_spill_bytes': { effect: ['src/main.ts', 'config.bus.max_spill_bytes'] },
  'http.request_limit_in_mb': { effect: ['src/http/router.ts', 'config.http.request_limit_in_mb'] },
  'log.level': { effect: ['src/log.ts', 'level: cfg.level'] },
  'log.output_format': { effect: ['src/log.ts', "cfg.output_format === 'human'"] },
  'log.colors_enabled': { effect: ['src/log.ts', 'colorize: cfg.colors_enabled'] },
  'log.include_target': { effect: ['src/log.ts', 'cfg.include_target ? { thread } : {}'] },
  // Global limits are the defaults of each app's own limits (config/schema.ts AppSchema: `x-default-from`).
  'event_limits.max_channels_at_once': { effect: ['src/config/schema.ts', "limit('event_limits.max_channels_at_once'"] },
  'event_limits.max_name_length': { effect: ['src/config/schema.ts', "limit('event_limits.max_name_length'"] },
  'event_limits.max_payload_in_kb': { effect: ['src/config/schema.ts', "limit('event_limits.max_payload_in_kb'"] },
  'event_limits.max_batch_size': { effect: ['src/config/schema.ts', "limit('event_limits.max_batch_size'"] },
  'channel_limits.max_name_length': { effect: ['src/config/schema.ts', "limit('channel_limits.max_name_length'"] },
  'channel_limits.cache_ttl': { effect: ['src/shard/context.ts', 'config.channel_limits.cache_ttl'] },
  'presence.max_members_per_channel': { effect: ['src/config/schema.ts', "limit('presence.max_members_per_channel'"] },
  'presence.max_member_size_in_kb': { effect: ['src/config/schema.ts', "limit('presence.max_member_size_in_kb'"] },
  'delta_compression.enabled': { effect: ['src/main.ts', 'const deltaOn = config.delta_compression.enabled;'] },
  'delta_compression.algorithm': { effect: ['src/delta/settings.ts', 'wireAlgo(config.delta_compression.algorithm)'] },
  'delta_compression.full_message_interval': { effect: ['src/delta/sequencer.ts', 'dc.full_message_interval'] },
  'delta_compression.min_message_size': { effect: ['src/delta/sequencer.ts', 'dc.min_message_size'] },
  'delta_compression.max_state_age_secs': { effect: ['src/delta/sequencer.ts', 'dc.max_state_age_secs * 1000'] },
  'delta_compression.max_channel_states_per_socket': { effect: ['src/delta/shard.ts', 'dc.max_channel_states_per_socket'] },
  'delta_compression.pool_size': { effect: ['src/delta/thread.ts', 'createComputer(config.delta_compression.pool_size, '] },
  'delta_compression.pool_max_queue': { effect: ['src/delta/thread.ts', 'config.delta_compression.pool_max_queue)'] },
  'delta_compression.cluster_coordination': { effect: ['src/delta/coord.ts', 'dc.enabled && dc.cluster_coordination && config.adapter.driver !== \'local\''] },
  'delta_compression.omit_delta_algorithm': { effect: ['src/delta/sequencer.ts', 'dc.omit_delta_algorithm'] },
  'webhooks.batching.enabled': { effect: ['src/webhooks/batcher.ts', 'if (!this.cfg.enabled)'] },
  'webhooks.batching.duration': { effect: ['src/webhooks/batcher.ts', 'this.cfg.duration'] },
  'webhooks.batching.size': { effect: ['src/webhooks/batcher.ts', 'this.cfg.size'] },
  'webhooks.key_header': { effect: ['src/webhooks/send.ts', '[deps.cfg.key_header]'] },
  'webhooks.signature_header': { effect: ['src/webhooks/send.ts', '[deps.cfg.signature_header]'] },
  'webhooks.timeout_ms': { effect: ['src/webhooks/service.ts', 'timeoutMs: cfg.timeout_ms'] },
  'webhooks.retry.max_retries': { effect: ['src/webhooks/deliver.ts', 'this.retry.max_retries'] },
  'webhooks.retry.initial_delay_ms': { effect: ['src/webhooks/send.ts', 'retry.initial_delay_ms'] },
  'webhooks.retry.max_delay_ms': { effect: ['src/webhooks/send.ts', 'retry.max_delay_ms'] },
  'webhooks.max_queue': { effect: ['src/webhooks/service.ts', 'cfg.max_queue'] },
  'webhooks.concurrency': { effect: ['src/webhooks/service.ts', 'concurrency: cfg.concurrency'] },
  'webhooks.lambda_endpoint': { effect: ['src/webhooks/service.ts', 'endpoint: cfg.lambda_endpoint'] },
  'protocol.event_prefix': { effect: ['src/shard/context.ts', 'config.protocol.event_prefix'] },
  apps: { effect: ['src/shard/context.ts', 'new AppRegistry(deepFreeze(init.apps), init.appSlots)'] },
  'console.enabled': { effect: ['src/main.ts', 'if (config.console.enabled)'] },
  'console.host': { effect: ['src/primary/console.ts', 'host: cc.host'] },
  'console.port': { effect: ['src/primary/console.ts', 'port: cc.port'] },
  'console.token': { effect: ['src/primary/console.ts', 'token: cc.token'] },
  'apps[].enable_user_authentication': { effect: ['src/ws/signin.ts', 'if (!app.enable_user_authentication)'] },
  'apps[].enable_watchlist_events': { effect: ['src/ws/signin.ts', 'app.enable_watchlist_events'] },
  'apps[].user_authentication_timeout': { effect: ['src/ws/connection.ts', 'd.app!.user_authentication_timeout * 1000'] },
  'app_manager.driver': { refused: { app_manager: { driver: 'memory', array: { apps: [APP] } } }, why: /app_manager\.driver must be array: the memory app store/ },
  'app_manager.array.apps': { effect: ['src/config/apps.ts', "'app_manager.array.apps'"] },
  'apps[].enabled': { effect: ['src/http/router.ts', 'app.enabled'] },
  'apps[].allowed_origins': { effect: ['src/ws/connection.ts', 'originAllowed'] },
  'apps[].max_connections': { effect: ['src/ws/connection.ts', 'd.app!.max_connections'] },
  'apps[].max_client_events_per_second': { effect: ['src/http/ratelimit.ts', 'app.max_client_events_per_second'] },
  'apps[].max_backend_events_per_second': { effect: ['src/http/ratelimit.ts', 'max_backend_events_per_second'] },
  'apps[].max_event_payload_in_kb': { effect: ['src/http/events.ts', 'app.max_event_payload_in_kb'] },
  'apps[].max_event_channels_at_once': { effect: ['src/http/events.ts', 'app.max_event_channels_at_once'] },
  'apps[].max_event_batch_size': { effect: ['src/http/events.ts', 'app.max_event_batch_size'] },
  'apps[].max_event_name_length': { effect: ['src/http/events.ts', 'max_event_name_length'] },
  'apps[].max_channel_name_length': { effect: ['src/http/events.ts', 'app.max_channel_name_length'] },
  'apps[].max_message_size_kb': { effect: ['src/ws/connection.ts', 'd.app!.max_message_size_kb'] },
  'apps[].max_presence_members_per_channel': { effect: ['src/channels/owner-service.ts', 'max_presence_members_per_channel'] },
  'apps[].max_presence_member_size_in_kb': { effect: ['src/ws/subscribe.ts', 'max_presence_member_size_in_kb'] },
  'apps[].enable_client_messages': { effect: ['src/ws/client-events.ts', 'enable_client_messages'] },
  'apps[].subscription_count_events': { effect: ['src/channels/owner-service.ts', 'subscription_count_events'] },
  'apps[].webhooks': { effect: ['src/webhooks/service.ts', 'a.webhooks.length > 0'] },
  'apps[].channel_delta_compression': { effect: ['src/delta/settings.ts', 'app.channel_delta_compression'] },
  // history and idempotent publish (behaviour: test/history/)
  'history.driver': { effect: ['src/config/rules.ts', "cfg.history.driver !== 'memory'"] },
  'history.meta_ttl': { effect: ['src/history/index.ts', 'config.history.meta_ttl * 1000'] },
  'history.max_recover': { effect: ['src/shard/history.ts', 'maxRecover: config.history.max_recover'] },
  'history.memory_budget_mb': { effect: ['src/history/index.ts', 'config.history.memory_budget_mb * MIB'] },
  'idempotency.window_seconds': { effect: ['src/shard/history.ts', 'config.idempotency.window_seconds * 1000'] },
  'idempotency.max_keys': { effect: ['src/shard/history.ts', 'config.idempotency.max_keys / shards'] },
  'apps[].channel_history': { effect: ['src/history/settings.ts', 'channel_history'] },
  // backend hooks (behaviour: test/hooks/)
  'apps[].hooks': { effect: ['src/hooks/connection.ts', 'hooks'] },
  'hook_client.max_in_flight': { effect: ['src/hooks/caller.ts', 'inFlight >= hc.max_in_flight'] },
  'hook_client.max_response_kb': { effect: ['src/hooks/index.ts', 'maxResponseBytes: hc.max_response_kb * 1024'] },
  'hook_client.max_pending_per_connection': { effect: ['src/hooks/connection.ts', 'config.hook_client.max_pending_per_connection'] },
  'hook_client.breaker.failures': { effect: ['src/hooks/caller.ts', 'hc.breaker.failures'] },
  'hook_client.breaker.open_ms': { effect: ['src/hooks/caller.ts', 'hc.breaker.open_ms'] },
  'hook_client.ca_path': { effect: ['src/hooks/index.ts', 'readFileSync(hc.ca_path'] },
};

function leaves(o: unknown, prefix: string, out: string[]): string[] {
  if (o !== null && typeof o === 'object' && !Array.isArray(o) && Object.keys(o).length > 0) {
    for (const [k, v] of Object.entries(o)) leaves(v, prefix ? `${prefix}.${k}` : k, out);
  } else {
    out.push(prefix);
  }
  return out;
}

const KEYS = [...leaves(defaultRawTree(), '', []), ...leaves(appDefaults(defaultConfig()), 'apps[]', [])];

/** The loader and config/support.ts together, as `ringcast start` runs them: the error message, or null. */
function refusal(input: ConfigInput): string | null {
  try {
    assertSupported(loadConfig({ env: {}, overrides: { apps: [APP], ...input } }));
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

t.test('every option of the defaults is claimed, and every claim names an option', async (t) => {
  t.same(KEYS.filter((k) => !(k in CLAIMS)), [], 'no option without a claim');
  t.same(Object.keys(CLAIMS).filter((k) => !KEYS.includes(k)), [], 'no claim for an option that does not exist');
  t.equal(refusal({}), null, 'the defaults themselves start');
});

for (const key of KEYS) {
  const claim = CLAIMS[key];
  if (!claim) continue;
  t.test(key, async (t) => {
    if ('effect' in claim) {
      const [file, needle] = claim.effect;
      const src = readFileSync(path.join(ROOT, file), 'utf8');
      t.ok(src.includes(needle), `${file} reads it: ${needle}`);
    } else if ('refused' in claim) {
      t.match(refusal(claim.refused), claim.why, 'refused, with the key and the reason');
    } else if ('inert' in claim) {
      t.not(refusal(claim.enabler), null, `inert: read by ${claim.inert}, whose switch is refused`);
    } else {
      t.comment(`${key}: ${claim.pending}`);
      t.pass('listed with its current state');
    }
  });
}
