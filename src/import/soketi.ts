// soketi's options (a `--config` JSON file, keys nested or dotted, or its environment
// variables in an env file) → a ringcast config tree, and what has no equivalent.

import { expandDotted, getPath, isTree, leafPaths, setPath, show, type Tree } from './tree';

/** soketi's environment variables (with or without SOKETI_) → its option paths. */
const ENV: Record<string, string> = {
  ADAPTER_DRIVER: 'adapter.driver', ADAPTER_CLUSTER_PREFIX: 'adapter.cluster.prefix', ADAPTER_REDIS_PREFIX: 'adapter.redis.prefix',
  APP_MANAGER_DRIVER: 'appManager.driver', APP_MANAGER_DYNAMODB_TABLE: 'appManager.dynamodb.table',
  APP_MANAGER_DYNAMODB_REGION: 'appManager.dynamodb.region', APP_MANAGER_DYNAMODB_ENDPOINT: 'appManager.dynamodb.endpoint',
  APP_MANAGER_MYSQL_TABLE: 'appManager.mysql.table', APP_MANAGER_MYSQL_VERSION: 'appManager.mysql.version',
  APP_MANAGER_POSTGRES_TABLE: 'appManager.postgres.table', APP_MANAGER_POSTGRES_VERSION: 'appManager.postgres.version',
  APP_MANAGER_MYSQL_USE_V2: 'appManager.mysql.useMysql2', CHANNEL_LIMITS_MAX_NAME_LENGTH: 'channelLimits.maxNameLength',
  DEBUG: 'debug', DEFAULT_APP_ID: 'appManager.array.apps.0.id', DEFAULT_APP_KEY: 'appManager.array.apps.0.key',
  DEFAULT_APP_SECRET: 'appManager.array.apps.0.secret', DEFAULT_APP_MAX_CONNS: 'appManager.array.apps.0.maxConnections',
  DEFAULT_APP_ENABLE_CLIENT_MESSAGES: 'appManager.array.apps.0.enableClientMessages', DEFAULT_APP_ENABLED: 'appManager.array.apps.0.enabled',
  DEFAULT_APP_MAX_BACKEND_EVENTS_PER_SEC: 'appManager.array.apps.0.maxBackendEventsPerSecond',
  DEFAULT_APP_MAX_CLIENT_EVENTS_PER_SEC: 'appManager.array.apps.0.maxClientEventsPerSecond',
  DEFAULT_APP_MAX_READ_REQ_PER_SEC: 'appManager.array.apps.0.maxReadRequestsPerSecond', DEFAULT_APP_WEBHOOKS: 'appManager.array.apps.0.webhooks',
  DB_POOLING_ENABLED: 'databasePooling.enabled', DB_POOLING_MIN: 'databasePooling.min', DB_POOLING_MAX: 'databasePooling.max',
  DB_MYSQL_HOST: 'database.mysql.host', DB_MYSQL_PORT: 'database.mysql.port', DB_MYSQL_USERNAME: 'database.mysql.user',
  DB_MYSQL_PASSWORD: 'database.mysql.password', DB_MYSQL_DATABASE: 'database.mysql.database',
  DB_POSTGRES_HOST: 'database.postgres.host', DB_POSTGRES_PORT: 'database.postgres.port', DB_POSTGRES_USERNAME: 'database.postgres.user',
  DB_POSTGRES_PASSWORD: 'database.postgres.password', DB_POSTGRES_DATABASE: 'database.postgres.database',
  DB_REDIS_HOST: 'database.redis.host', DB_REDIS_PORT: 'database.redis.port', DB_REDIS_DB: 'database.redis.db',
  DB_REDIS_USERNAME: 'database.redis.username', DB_REDIS_PASSWORD: 'database.redis.password', DB_REDIS_KEY_PREFIX: 'database.redis.keyPrefix',
  DB_REDIS_SENTINELS: 'database.redis.sentinels', DB_REDIS_SENTINEL_PASSWORD: 'database.redis.sentinelPassword',
  DB_REDIS_INSTANCE_NAME: 'database.redis.name', EVENT_MAX_CHANNELS_AT_ONCE: 'eventLimits.maxChannelsAtOnce',
  EVENT_MAX_NAME_LENGTH: 'eventLimits.maxNameLength', EVENT_MAX_SIZE_IN_KB: 'eventLimits.maxPayloadInKb',
  METRICS_ENABLED: 'metrics.enabled', METRICS_DRIVER: 'metrics.driver', METRICS_PROMETHEUS_PREFIX: 'metrics.prometheus.prefix',
  METRICS_SERVER_PORT: 'metrics.port', PORT: 'port', PATH_PREFIX: 'pathPrefix', PRESENCE_MAX_MEMBER_SIZE: 'presence.maxMemberSizeInKb',
  PRESENCE_MAX_MEMBERS: 'presence.maxMembersPerChannel', QUEUE_DRIVER: 'queue.driver', QUEUE_REDIS_CONCURRENCY: 'queue.redis.concurrency',
  RATE_LIMITER_DRIVER: 'rateLimiter.driver', SHUTDOWN_GRACE_PERIOD: 'shutdownGracePeriod',
  SSL_CERT: 'ssl.certPath', SSL_KEY: 'ssl.keyPath', SSL_PASS: 'ssl.passphrase',
};

/** soketi option → ringcast key, for the ones that mean the same. */
const SAME: Record<string, string> = {
  host: 'host', port: 'port', shutdownGracePeriod: 'shutdown_grace_period',
  'database.redis.host': 'database.redis.host', 'database.redis.port': 'database.redis.port',
  'database.redis.db': 'database.redis.db', 'database.redis.username': 'database.redis.username',
  'database.redis.password': 'database.redis.password', 'database.redis.keyPrefix': 'database.redis.key_prefix',
  'database.redis.sentinels': 'database.redis.sentinels', 'database.redis.sentinelPassword': 'database.redis.sentinel_password',
  'database.redis.name': 'database.redis.name', 'database.redis.clusterNodes': 'database.redis_cluster.nodes',
  'channelLimits.maxNameLength': 'channel_limits.max_name_length', 'channelLimits.cacheTtl': 'channel_limits.cache_ttl',
  'cors.credentials': 'cors.credentials', 'cors.origin': 'cors.origin', 'cors.methods': 'cors.methods',
  'cors.allowedHeaders': 'cors.allowed_headers',
  'eventLimits.maxChannelsAtOnce': 'event_limits.max_channels_at_once', 'eventLimits.maxNameLength': 'event_limits.max_name_length',
  'eventLimits.maxPayloadInKb': 'event_limits.max_payload_in_kb', 'eventLimits.maxBatchSize': 'event_limits.max_batch_size',
  'httpApi.requestLimitInMb': 'http.request_limit_in_mb',
  'metrics.enabled': 'metrics.enabled', 'metrics.driver': 'metrics.driver', 'metrics.host': 'metrics.host',
  'metrics.port': 'metrics.port', 'metrics.prometheus.prefix': 'metrics.prefix',
  'presence.maxMembersPerChannel': 'presence.max_members_per_channel', 'presence.maxMemberSizeInKb': 'presence.max_member_size_in_kb',
  'webhooks.batching.enabled': 'webhooks.batching.enabled', 'webhooks.batching.duration': 'webhooks.batching.duration',
  'adapter.nats.user': 'adapter.nats.user', 'adapter.nats.pass': 'adapter.nats.password',
  'adapter.nats.token': 'adapter.nats.token', 'adapter.nats.prefix': 'adapter.nats.prefix',
};

/** Read by the converter below by hand (never listed as having no equivalent). */
const HANDLED = new Set(['debug', 'adapter.driver', 'adapter.redis.clusterMode', 'adapter.nats.servers', 'appManager.driver',
  'appManager.array.apps', 'cache.driver', 'queue.driver', 'rateLimiter.driver', 'ssl.certPath', 'ssl.keyPath',
  'userAuthenticationTimeout', 'cache.redis.clusterMode', 'queue.redis.clusterMode', 'rateLimiter.redis.clusterMode']);

/** soketi app fields (any of its spellings, lower-cased without _) → ringcast app fields. */
const APP_FIELDS: Record<string, string> = {
  id: 'id', key: 'key', secret: 'secret', enabled: 'enabled',
  maxconnections: 'max_connections', maxconns: 'max_connections',
  enableclientmessages: 'enable_client_messages',
  maxbackendeventspersecond: 'max_backend_events_per_second', maxbackendeventspersec: 'max_backend_events_per_second',
  maxclienteventspersecond: 'max_client_events_per_second', maxclienteventspersec: 'max_client_events_per_second',
  maxpresencemembersperchannel: 'max_presence_members_per_channel',
  maxpresencemembersizeinkb: 'max_presence_member_size_in_kb', maxchannelnamelength: 'max_channel_name_length',
  maxeventchannelsatonce: 'max_event_channels_at_once', maxeventnamelength: 'max_event_name_length',
  maxeventpayloadinkb: 'max_event_payload_in_kb', maxeventbatchsize: 'max_event_batch_size',
  enableuserauthentication: 'enable_user_authentication',
};

/** Parses a dotenv-style file: KEY=VALUE lines, `export` allowed, # comments, quotes stripped. */
export function parseEnvFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const m = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$/.exec(line);
    if (!m) throw new Error(`not a KEY=VALUE line: ${line}`);
    let v = m[2];
    const q = /^(['"])(.*)\1$/.exec(v);
    if (q) v = q[2];
    else v = v.replace(/\s+#.*$/, '');
    out[m[1]] = v;
  }
  return out;
}

/** soketi's options from its environment variables (values that parse as JSON are JSON, as soketi reads them). */
export function soketiOptionsFromEnv(vars: Record<string, string>, notes: string[]): Tree {
  const opts: Tree = {};
  for (const [name, value] of Object.entries(vars)) {
    const bare = name.replace(/^SOKETI_/, '');
    const path = ENV[bare];
    if (!path) {
      notes.push(`${name}: not a soketi variable; left out`);
      continue;
    }
    let v: unknown = value;
    try {
      v = JSON.parse(value);
    } catch { /* a plain string */ }
    setPath(opts, path, v);
  }
  return opts;
}

function appFrom(src: Tree, index: number, notes: string[]): Tree {
  const app: Tree = {};
  for (const [k, v] of Object.entries(src)) {
    const field = APP_FIELDS[k.toLowerCase().replace(/_/g, '')];
    if (k === 'webhooks' || k === 'Webhooks') {
      const hooks = typeof v === 'string' ? JSON.parse(v) as unknown : v;
      if (!Array.isArray(hooks)) {
        notes.push(`appManager.array.apps.${index}.webhooks: not a list; left out`);
        continue;
      }
      app.webhooks = hooks.map((h: Tree, j) => {
        for (const extra of Object.keys(h)) {
          if (!['url', 'event_types', 'headers'].includes(extra)) {
            notes.push(`appManager.array.apps.${index}.webhooks.${j}.${extra}: no equivalent (ringcast sends every event of the listed types${extra.startsWith('lambda') ? '; a Lambda target is a lambda:// url' : ''})`);
          }
        }
        const out: Tree = { url: h.url, event_types: h.event_types };
        if (h.headers !== undefined) out.headers = h.headers;
        return out;
      });
    } else if (field) {
      app[field] = field === 'max_connections' && v === -1 ? null : v;
    } else {
      notes.push(`appManager.array.apps.${index}.${k}: no equivalent${/read/i.test(k) ? ' (ringcast has no per-app limit on HTTP API reads; rate_limiter.api limits them per address)' : ''}`);
    }
  }
  return app;
}

/** soketi options (nested or dotted keys) → a ringcast config tree; what does not carry over goes to `notes`. */
export function fromSoketi(input: Tree, notes: string[]): Tree {
  const o = expandDotted(input);
  const out: Tree = {};
  for (const path of leafPaths(o)) {
    const v = getPath(o, path);
    const handled = [...HANDLED].some((h) => path === h || path.startsWith(h + '.'));
    if (SAME[path]) setPath(out, SAME[path], v);
    else if (!handled) notes.push(`${path}: no equivalent in ringcast; left out`);
  }
  if (o.debug === true) setPath(out, 'log.level', 'debug');

  const adapter = getPath(o, 'adapter.driver');
  if (adapter === 'redis') setPath(out, 'adapter.driver', getPath(o, 'adapter.redis.clusterMode') === true ? 'redis-cluster' : 'redis');
  else if (adapter === 'nats') {
    setPath(out, 'adapter.driver', 'nats');
    const servers = getPath(o, 'adapter.nats.servers');
    if (Array.isArray(servers)) setPath(out, 'adapter.nats.servers', servers.map((s) => (/^\w+:\/\//.test(String(s)) ? String(s) : `nats://${String(s)}`)));
  } else if (adapter === 'cluster') {
    notes.push('adapter.driver: cluster (UDP discovery between processes of one host) has no equivalent: one ringcast process uses every core (workers); for several hosts use redis or nats');
  } else if (adapter !== undefined && adapter !== 'local') setPath(out, 'adapter.driver', adapter);

  const drivers: [string, string][] = [['cache.driver', 'cache.driver'], ['rateLimiter.driver', 'rate_limiter.driver'], ['queue.driver', 'queue.driver']];
  for (const [from, to] of drivers) {
    const d = getPath(o, from);
    if (d === undefined) continue;
    const cluster = getPath(o, from.replace('driver', 'redis.clusterMode')) === true;
    if (d === 'redis') setPath(out, to, cluster && to !== 'queue.driver' ? 'redis-cluster' : 'redis');
    else if (d === 'local' || d === 'memory') setPath(out, to, to === 'queue.driver' ? 'sync' : 'memory');
    else if (d === 'sync') setPath(out, to, 'sync');
    else if (d === 'cluster') notes.push(`${from}: cluster has no equivalent; use redis to share ${to.split('.')[0]} between nodes`);
    else notes.push(`${from}: ${show(d)} has no equivalent; left out`);
  }

  const cert = getPath(o, 'ssl.certPath');
  const key = getPath(o, 'ssl.keyPath');
  if (cert || key) {
    setPath(out, 'ssl', { enabled: true, cert_path: cert ?? '', key_path: key ?? '' });
  }

  const driver = getPath(o, 'appManager.driver');
  if (driver !== undefined && driver !== 'array') {
    notes.push(`appManager.driver: ${show(driver)}: this file holds no database app store settings; keep the apps table and point ringcast's app store at it, or list the apps here`);
  }
  const apps = getPath(o, 'appManager.array.apps');
  if (Array.isArray(apps)) {
    const timeout = o.userAuthenticationTimeout;
    out.apps = apps.filter(isTree).map((a, i) => {
      const app = appFrom(a, i, notes);
      if (typeof timeout === 'number') app.user_authentication_timeout = Math.max(1, Math.ceil(timeout / 1000)); // soketi: ms
      return app;
    });
  }
  return out;
}
