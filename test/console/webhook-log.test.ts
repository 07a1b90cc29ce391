// test-modes: once (webhook delivery and the console both run in the primary thread)
// Webhook deliveries in the console's live log (console/server.ts ← webhooks/deliver.ts's
// observer): each attempt's outcome (delivered, retry, failed) with the events' names and
// the endpoint (no credentials or query), for the app watched.

import t from 'tap';
import { APP, RawClient, WORKERS, startServer } from '../helpers/server';
import { LiveLog, TOKEN } from '../helpers/console';
import { startReceiver } from '../webhooks/receiver';

t.test(`webhook deliveries show in the live log: delivered, and a refused one as failed (workers ${WORKERS})`, async (t) => {
  const good = await startReceiver('/good');
  const bad = await startReceiver('/bad');
  bad.respond = () => 400;
  t.teardown(async () => { await good.close(); await bad.close(); });
  const srv = await startServer({
    webhooks: { batching: { enabled: false } },
    apps: [{ ...APP, webhooks: [{ url: `${good.url}?token=hidden`, event_types: ['channel_occupied'] }, { url: bad.url, event_types: ['channel_vacated'] }] }],
    console: { enabled: true, host: '127.0.0.1', port: 0, token: TOKEN },
  });
  t.teardown(() => srv.stop());
  const log = new LiveLog(srv.server.consolePort!, APP.id);
  t.teardown(() => log.close());
  // the log is on once a connection of the app shows in it
  for (let i = 0; ; i++) {
    const probe = await RawClient.connect(srv.wsUrl());
    try {
      await log.next((e) => e.kind === 'connection' && e.op === 'open', 300);
      await probe.close();
      break;
    } catch (err) {
      await probe.close();
      if (i > 40) throw err;
    }
  }
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  await c.subscribe('hooked');
  const ok = await log.next((e) => e.kind === 'webhook' && e.event === 'channel_occupied');
  t.equal(ok.op, 'delivered');
  t.equal(ok.data, `${new URL(good.url).origin}/good 200`, 'the endpoint without its query, and the status');
  t.equal(good.requests.length, 1);
  c.send({ event: 'pusher:unsubscribe', data: { channel: 'hooked' } });
  const failed = await log.next((e) => e.kind === 'webhook' && e.event === 'channel_vacated');
  t.equal(failed.op, 'failed', 'a 400 is final: failed');
  t.equal(failed.data, `${bad.url} 400`);
});
