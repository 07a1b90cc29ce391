// The cluster adapter and the backends of the drivers: adapter, cache, queue,
// rate_limiter and database (redis, redis_cluster). Composed into GlobalSchema in schema.ts.

import { Type } from '@sinclair/typebox';
import { bool, hostPorts, int, intOrNull, meta, oneOf, optStr, port, section, str, strList, text } from './schema-kit';

/** Shortest adapter.cluster_secret: an HMAC key a guess cannot find. */
export const MIN_CLUSTER_SECRET = 16;

/** A secret of at least MIN_CLUSTER_SECRET characters, or null (an empty string counts as null). */
function clusterSecret(d: Parameters<typeof optStr>[0]) {
  return Type.Transform(Type.Union([Type.String({ pattern: `^(|[\\s\\S]{${MIN_CLUSTER_SECRET},})$` }), Type.Null()],
    { default: null, ...meta({ rule: `must be a string of at least ${MIN_CLUSTER_SECRET} characters, or null`, ...d }) }))
    .Decode((v) => (v === '' ? null : v))
    .Encode((v) => v);
}

const DRIVERS = ['memory', 'redis', 'redis-cluster', 'none'] as const;

export const adapter = section({
  driver: oneOf(['local', 'redis', 'redis-cluster', 'nats'], 'local', {
    doc: 'How server instances share events: local (one node), redis, redis-cluster or nats. Nodes sharing a backend and prefix form one cluster.', env: 'ADAPTER_DRIVER',
  }),
  cluster_health: section({
    enabled: bool(true, { doc: 'Heartbeats between nodes; false: only a clean stop removes a node.' }),
    heartbeat_interval_ms: int(10_000, 1, { doc: 'Heartbeat period (ms); must be ≤ node_timeout_ms / 3.' }),
    node_timeout_ms: int(30_000, 1, { doc: 'A node silent this long (ms) is declared failed and its presence members removed.' }),
    cleanup_interval_ms: int(10_000, 1, { doc: 'How often (ms) silent nodes are looked for.' }),
  }, 'Node liveness for the multi-node drivers.'),
  nats: section({
    servers: strList(['nats://127.0.0.1:4222'], { doc: 'NATS server URLs (env: comma-separated); at least one when adapter.driver is nats.', env: 'NATS_SERVERS', ours: true }),
    user: optStr({ doc: 'NATS user name.' }),
    password: optStr({ doc: 'NATS password.' }),
    token: optStr({ doc: 'NATS token.' }),
    prefix: Type.String({
      pattern: '^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$', default: 'ringcast',
      ...meta({ doc: 'Subject prefix: <prefix>.pub, .ctl, .node.<id>, .b.<bucket>.', rule: 'must be NATS subject tokens (letters, digits, _ and -) joined by single dots, with no wildcard' }),
    }),
  }, 'The nats adapter.'),
  cluster_secret: clusterSecret({
    doc: 'Signs every cluster frame this node sends (HMAC-SHA256) and drops every frame received without the same secret\'s signature; null: frames unsigned, anyone who can publish on the backend under the prefix is a node. Every node of a cluster needs the same value. At least 16 characters.',
    env: 'ADAPTER_CLUSTER_SECRET', ours: true,
  }),
  buckets: int(16_384, 1, {
    max: 65_536, ours: true, env: 'ADAPTER_BUCKETS',
    doc: 'Publishes travel on one of this many bucket subjects (a hash of app and channel; a power of two); a node subscribes to a bucket only while it has a subscriber of one of its channels. Every node of a cluster needs the same value.',
  }),
  bucket_linger_ms: int(10_000, 0, {
    max: 3_600_000, ours: true,
    doc: 'A bucket without local subscribers stays subscribed this long (ms) before the node unsubscribes (churn does not thrash the backend).',
  }),
  when_down: oneOf(['refuse', 'local'], 'refuse', {
    ours: true, env: 'ADAPTER_WHEN_DOWN',
    doc: 'While the backend is down: refuse (API publishes answered 503 and client events refused with 4301, nothing delivered anywhere, so a 200 always reaches every node) or local (200, delivered to this node\'s subscribers only; the other nodes\' copies are lost).',
  }),
  buffer_multiplier_per_cpu: int(64, 1, {
    doc: 'Refused when changed: the adapter has no per-CPU buffer (a publish goes to the backend at once).', env: 'ADAPTER_BUFFER_MULTIPLIER_PER_CPU',
  }),
}, 'The cluster adapter (README, "Many hosts").');

export const cache = section({
  driver: oneOf(DRIVERS, 'memory', {
    doc: 'Cache channels\' last events: memory (per owner shard), redis / redis-cluster (shared by the nodes, kept across restarts), none (off).', env: 'CACHE_DRIVER',
  }),
}, 'Cache channels.');

export const queue = section({
  driver: oneOf(['sync', 'redis'], 'sync', { doc: 'Webhook queue: sync (in memory) or redis (database.redis; at-least-once across restarts).', env: 'QUEUE_DRIVER' }),
}, 'The webhook queue.');

export const rateLimiter = section({
  enabled: bool(true, { doc: 'Rate limits on (the per-app limits and the windows below).', env: 'RATE_LIMITER_ENABLED' }),
  driver: oneOf(DRIVERS, 'memory', { doc: 'Where counters live: memory (per process), redis or redis-cluster (shared), none.', env: 'RATE_LIMITER_DRIVER' }),
  api: section({
    max_requests: intOrNull(null, 1, { doc: 'Requests per window and client IP on the HTTP API; null = off.', env: 'RATE_LIMITER_API_MAX_REQUESTS' }),
    window_seconds: int(60, 1, { doc: 'Window length (s).', env: 'RATE_LIMITER_API_WINDOW_SECONDS' }),
    trust_hops: int(0, 0, { max: 32, doc: 'Deprecated: use http.trusted_proxies. While that list is empty, N > 0 takes the client address from the Nth X-Forwarded-For entry from the right, whoever the peer is.', env: 'RATE_LIMITER_API_TRUST_HOPS' }),
  }, 'Optional per-IP window on the HTTP API.'),
  websocket: section({
    max_requests: intOrNull(null, 1, { doc: 'Frames per window and connection; over it: pusher:error 4301, frame dropped; null = off.', env: 'RATE_LIMITER_WS_MAX_REQUESTS' }),
    window_seconds: int(60, 1, { doc: 'Window length (s).', env: 'RATE_LIMITER_WS_WINDOW_SECONDS' }),
  }, 'Optional per-connection window on WebSocket frames.'),
}, 'Rate limiting.');

export const database = section({
  redis: section({
    host: str('127.0.0.1', { doc: 'Redis host.', env: 'DATABASE_REDIS_HOST' }),
    port: port(6379, { doc: 'Redis port.', env: 'DATABASE_REDIS_PORT' }, 1),
    username: optStr({ doc: 'Redis ACL user name.' }),
    password: optStr({ doc: 'Redis password.', env: 'DATABASE_REDIS_PASSWORD' }),
    db: int(0, 0, { doc: 'Database number (pub/sub ignores it).', env: 'DATABASE_REDIS_DB' }),
    key_prefix: text('', { doc: 'Prefix of every key, and of the adapter\'s channel (<key_prefix>ringcast).' }),
    pool_min: int(2, 0, { doc: 'Refused when changed: one connection per backend keeps a node\'s order, no pool.', env: 'DATABASE_REDIS_POOL_MIN' }),
    pool_max: int(10, 1, { doc: 'Refused when changed (as pool_min).', env: 'DATABASE_REDIS_POOL_MAX' }),
    sentinels: hostPorts({ doc: 'Sentinel mode: the Sentinels, e.g. ["10.0.0.1:26379", {host: 10.0.0.2, port: 26379}]; [] = connect to host:port.' }),
    sentinel_password: optStr({ doc: 'Password of the Sentinels.' }),
    name: str('mymaster', { doc: 'Sentinel master name.' }),
  }, 'Redis, for the redis drivers (adapter, cache, queue, rate limiter).'),
  redis_cluster: section({
    nodes: hostPorts({ doc: 'Cluster nodes ("host:port" or {host, port}); required when a driver is redis-cluster.', env: 'REDIS_CLUSTER_NODES' }),
    username: optStr({ doc: 'ACL user name.' }),
    password: optStr({ doc: 'Password.' }),
    key_prefix: text('', { doc: 'Prefix of every key.' }),
  }, 'Redis Cluster, for the redis-cluster drivers.'),
  pooling: section({
    enabled: bool(false, { doc: 'Refused when true: ringcast keeps one connection per backend (node order).', env: 'DATABASE_POOLING_ENABLED' }),
    min: int(2, 0, { doc: 'Refused when changed.', env: 'DATABASE_POOL_MIN' }),
    max: int(10, 1, { doc: 'Refused when changed.', env: 'DATABASE_POOL_MAX' }),
  }, 'Connection pools (refused when changed).'),
  postgres: section({
    host: str('127.0.0.1', { doc: 'PostgreSQL host (or a directory holding its Unix socket).', env: 'DATABASE_POSTGRES_HOST', ours: true }),
    port: port(5432, { doc: 'PostgreSQL port.', env: 'DATABASE_POSTGRES_PORT', ours: true }, 1),
    username: str('postgres', { doc: 'User name.', env: 'DATABASE_POSTGRES_USERNAME', ours: true }),
    password: optStr({ doc: 'Password; null = none.', env: 'DATABASE_POSTGRES_PASSWORD', ours: true }),
    database: str('ringcast', { doc: 'Database name.', env: 'DATABASE_POSTGRES_DATABASE', ours: true }),
    table_name: str('apps', { doc: 'Table of the apps (app_manager.driver postgres).', env: 'DATABASE_POSTGRES_TABLE_NAME', ours: true }),
  }, 'PostgreSQL, for app_manager.driver postgres.'),
  mysql: section({
    host: str('127.0.0.1', { doc: 'MySQL / MariaDB host (or a directory holding its Unix socket).', env: 'DATABASE_MYSQL_HOST', ours: true }),
    port: port(3306, { doc: 'MySQL / MariaDB port.', env: 'DATABASE_MYSQL_PORT', ours: true }, 1),
    username: str('root', { doc: 'User name.', env: 'DATABASE_MYSQL_USERNAME', ours: true }),
    password: optStr({ doc: 'Password; null = none.', env: 'DATABASE_MYSQL_PASSWORD', ours: true }),
    database: str('ringcast', { doc: 'Database name.', env: 'DATABASE_MYSQL_DATABASE', ours: true }),
    table_name: str('apps', { doc: 'Table of the apps (app_manager.driver mysql).', env: 'DATABASE_MYSQL_TABLE_NAME', ours: true }),
  }, 'MySQL / MariaDB, for app_manager.driver mysql.'),
  dynamodb: section({
    region: str('us-east-1', { doc: 'AWS region (credentials the AWS SDK\'s usual way, e.g. AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY).', env: 'DATABASE_DYNAMODB_REGION', ours: true }),
    table_name: str('apps', { doc: 'Table of the apps (app_manager.driver dynamodb).', env: 'DATABASE_DYNAMODB_TABLE_NAME', ours: true }),
    endpoint_url: optStr({ doc: 'Endpoint URL of a DynamoDB-compatible server; null = AWS\'s for the region.', env: 'DATABASE_DYNAMODB_ENDPOINT_URL', ours: true }),
  }, 'DynamoDB, for app_manager.driver dynamodb.'),
}, 'Backends of the redis and redis-cluster drivers and of the database app stores.');
