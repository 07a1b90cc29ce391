// A startup step that fails stops everything started before it (primary/resources.ts):
// the console's port is taken, so start() fails after the webhook service, the delta
// sequencer, the shards and the metrics listener have started; none of them may be left
// running (timers, threads, listeners), or a supervisor that retries start() would leak them.

import net from 'node:net';
import t from 'tap';
import { loadConfig } from '../../src/config';
import { ListenError, start } from '../../src/main';
import { APP, eventually, WORKERS } from '../helpers/server';

function takePort(): Promise<net.Server> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => resolve(s));
  });
}

const resources = () => process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap').sort().join(',');

t.test('a console that cannot listen: start() rejects and leaves nothing running', async (t) => {
  const taken = await takePort();
  t.teardown(() => taken.close());
  const before = resources();
  const config = loadConfig({
    env: {},
    overrides: {
      host: '127.0.0.1', port: 0, workers: WORKERS, log: { level: 'fatal' },
      apps: [{ ...APP, webhooks: [{ url: 'http://127.0.0.1:9/hook', event_types: ['channel_occupied'] }] }],
      metrics: { enabled: true, host: '127.0.0.1', port: 0 },
      delta_compression: { enabled: true },
      console: { enabled: true, host: '127.0.0.1', port: (taken.address() as net.AddressInfo).port, token: 'a-console-token-of-enough-length' },
    },
  });
  const err = await start(config).then(() => null, (e: unknown) => e);
  t.ok(err instanceof ListenError, 'start() rejects with a ListenError');
  t.match((err as Error).message, /could not start the console/);
  await eventually(() => resources() === before, 10_000, 'the failed start to close what it started').catch(() => undefined);
  t.equal(resources(), before, 'no timer, thread or listener of the failed start is left');
});
