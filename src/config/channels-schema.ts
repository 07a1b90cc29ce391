// What happens to events on channels, server-wide: the event, channel and presence limits
// (defaults of the per-app ones), the wire prefix, tag filtering, delta compression,
// history and idempotent publish. The per-channel settings are in app-schema.ts.
// Composed into GlobalSchema in schema.ts.

import { bool, int, oneOf, section } from './schema-kit';
import { DELTA_ALGORITHMS, MAX_HISTORY_SIZE } from './constants';

export const eventLimits = section({
  max_channels_at_once: int(100, 1, { doc: 'Default of apps[].max_event_channels_at_once.' }),
  max_name_length: int(200, 1, { doc: 'Default of apps[].max_event_name_length.' }),
  max_payload_in_kb: int(100, 1, { doc: 'Default of apps[].max_event_payload_in_kb.' }),
  max_batch_size: int(10, 1, { doc: 'Default of apps[].max_event_batch_size.' }),
}, 'Defaults of the per-app event limits.');

export const channelLimits = section({
  max_name_length: int(200, 1, { doc: 'Default of apps[].max_channel_name_length.' }),
  cache_ttl: int(3600, 1, { doc: 'Seconds a cache channel keeps its last event.' }),
}, 'Channel limits.');

export const presence = section({
  max_members_per_channel: int(100, 1, { doc: 'Default of apps[].max_presence_members_per_channel.' }),
  max_member_size_in_kb: int(2, 1, { doc: 'Default of apps[].max_presence_member_size_in_kb.' }),
}, 'Defaults of the per-app presence limits.');

export const protocol = section({
  event_prefix: oneOf(['pusher', 'proto'], 'pusher', { doc: 'pusher (pusher: / pusher_internal: on the wire) or proto.' }),
}, 'Wire names.');

export const tagFiltering = section({
  enabled: bool(false, { doc: 'Server-side filtering of events by tags (opt-in extension).', env: 'TAG_FILTERING_ENABLED' }),
  max_nodes: int(50, 1, { doc: 'Largest filter (nodes) a subscription may send.' }),
}, 'Tag filtering (docs/tag-filtering.md).');

export const deltaCompression = section({
  enabled: bool(true, { doc: 'Delta compression for the clients that ask for it.', env: 'DELTA_COMPRESSION_ENABLED', ours: true }),
  algorithm: oneOf(DELTA_ALGORITHMS, 'Fossil', { doc: 'Default algorithm.' }),
  full_message_interval: int(10, 1, { doc: 'A full message after every N deltas.' }),
  min_message_size: int(100, 0, { doc: 'Bytes; smaller messages are sent whole.' }),
  max_state_age_secs: int(300, 1, { doc: 'Seconds a channel\'s base message is kept.' }),
  max_channel_states_per_socket: int(100, 1, { doc: 'Channels with delta state per socket.' }),
  cluster_coordination: bool(false, { doc: 'Same delta bases on every node (needs a redis, redis-cluster or nats adapter).' }),
  omit_delta_algorithm: bool(false, { doc: 'Leave the algorithm out of delta messages.' }),
  pool_size: int(0, 0, { max: 64, doc: 'Ours: piscina threads behind the delta sequencer; 0 computes on the sequencer thread (measured faster: docs/benchmarks.md).' }),
  pool_max_queue: int(256, 1, { max: 65_536, doc: 'Ours: deltas waiting for a pool thread (pool_size > 0, piscina maxQueue); past it a message goes out in full (delta_pool_refused_total).' }),
}, 'Delta compression (docs/delta.md).');

export const history = section({
  driver: oneOf(['memory', 'redis', 'redis-cluster'], 'memory', { doc: 'Where history channels are numbered and kept (docs/history.md): memory (per process; with a cluster adapter each node numbers its own), redis (database.redis) or redis-cluster (database.redis_cluster, Redis ≥ 7): one sequence per channel for every node.', env: 'HISTORY_DRIVER' }),
  meta_ttl: int(86_400, 1, { doc: 'Seconds a channel\'s epoch and last serial outlive its last message once it has no subscribers; while it has some they are kept (redis drivers: touched every quarter of meta_ttl, at least every second).' }),
  max_recover: int(1000, 1, { max: MAX_HISTORY_SIZE, doc: 'Most messages one recovery replays; more: recovered false, reason too_many.' }),
  max_questions_per_connection: int(4, 1, { max: 10_000, doc: 'History questions (a rewind, a recovery) one connection may have unanswered, one per channel at most; beyond: pusher:subscription_error LimitReached (status 4100), the connection kept.', ours: true }),
  max_channels_per_shard: int(100_000, 1, { max: 100_000_000, doc: 'history.driver memory: channels with stored messages or numbering one shard keeps (a channel that never had a message takes none); past it the channel written least recently is forgotten, messages and numbering (its next message starts a new epoch; history_channels_forgotten_total). Each also counts ~200 bytes in memory_budget_mb.', ours: true }),
  replay_bytes_per_second: int(8 * 1024 * 1024, 1024, { max: 2 ** 40, doc: 'Bytes of rewound or recovered messages one connection may be sent per second (bursts of one second\'s worth); past it its next rewind or recovery is refused with pusher:subscription_error LimitReached (status 4100) until the budget refills, the connection kept.', ours: true }),
  memory_budget_mb: int(256, 1, { max: 1024 * 1024, doc: 'MiB of stored messages in the process; past it the least recently written channels are evicted first (history_evictions_total).', ours: true }),
}, 'Message history, rewind and recovery (apps[].channel_history says which channels).');

export const idempotency = section({
  window_seconds: int(120, 1, { max: 86_400, doc: 'Seconds a publish\'s idempotency_key is remembered per app: a repeat gets the first answer and is not delivered again. Process-wide with adapter.driver local; cluster-wide with a cluster adapter: in Redis with redis / redis-cluster, in a NATS JetStream key-value bucket with nats (the NATS server needs JetStream: nats-server -js).' }),
  max_keys: int(100_000, 1, { max: 10_000_000, doc: 'Keys remembered per process with adapter.driver local; past it the app holding the most keys forgets its oldest first (idempotency_evictions_total). (With a redis adapter Redis keeps them, each for window_seconds.)', ours: true }),
}, 'Idempotent publish (idempotency_key on events and batch items).');
