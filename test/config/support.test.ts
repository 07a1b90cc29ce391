// Options refused at startup (src/config/support.ts): each names its key and the reason;
// the multi-node adapters themselves are accepted.

import t from 'tap';
import { loadConfig, type ConfigInput } from '../../src/config';
import { unsupportedIssues } from '../../src/config/support';
import { start } from '../../src/main';

const APP = { id: 'a', key: 'k', secret: 's' };
const issues = (overrides: ConfigInput) => unsupportedIssues(loadConfig({ env: {}, overrides: { apps: [APP], ...overrides } }));

t.test('the adapters are accepted', (t) => {
  for (const driver of ['local', 'redis', 'nats'] as const) t.same(issues({ adapter: { driver } }), [], driver);
  t.same(issues({ adapter: { driver: 'redis-cluster' }, database: { redis_cluster: { nodes: [{ host: '127.0.0.1', port: 7000 }] } } }), [], 'redis-cluster');
  t.end();
});

t.test('pooling and buffer options are refused with the reason', (t) => {
  const cases: [ConfigInput, string, RegExp][] = [
    [{ database: { pooling: { enabled: true } } }, 'database.pooling.enabled', /one command and one subscriber connection/],
    [{ database: { pooling: { max: 20 } } }, 'database.pooling.max', /no connection pool/],
    [{ database: { redis: { pool_min: 1 } } }, 'database.redis.pool_min', /no connection pool/],
    [{ database: { redis: { pool_max: 4 } } }, 'database.redis.pool_max', /no connection pool/],
    [{ adapter: { buffer_multiplier_per_cpu: 128 } }, 'adapter.buffer_multiplier_per_cpu', /no per-CPU buffer/],
  ];
  for (const [input, key, re] of cases) {
    const found = issues(input);
    t.equal(found.length, 1, `${key}: one issue`);
    t.equal(found[0]?.key, key);
    t.match(found[0]?.message, re);
  }
  t.same(issues({}), [], 'the defaults are fine');
  t.end();
});

t.test('watchlist events are accepted with a cluster adapter', (t) => {
  for (const driver of ['redis', 'nats'] as const) {
    t.same(issues({ adapter: { driver }, apps: [{ ...APP, enable_watchlist_events: true }] }), [], `adapter.driver ${driver}`);
  }
  t.same(issues({ apps: [{ ...APP, enable_watchlist_events: true }] }), [], 'and on a single node');
  t.end();
});

t.test('start() refuses such a config before it listens', async (t) => {
  const config = loadConfig({ env: {}, overrides: { port: 0, host: '127.0.0.1', apps: [APP], database: { pooling: { enabled: true } } } });
  await t.rejects(start(config), /database\.pooling\.enabled/);
});
