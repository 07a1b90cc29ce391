// client/ (ringcast's ESM client, wrapping an unmodified pusher-js) against a real server:
// a filtered subscription gets only matching events while a plain pusher-js client on the
// same channel gets all, a bad filter surfaces as the channel's subscription_error, and
// the filter goes along again when pusher-js resubscribes after a reconnect.

import { createRequire } from 'node:module';
import path from 'node:path';
import t from 'tap';
import type PusherJS from 'pusher-js';
import type { Channel } from 'pusher-js';
import { signedPost } from '../helpers/http';
import { connected, pusherJs } from '../helpers/pusher-js';
import { WORKERS, startServer, type TestServer } from '../helpers/server';
import { settleChannel } from '../helpers/settle';

type ClientModule = typeof import('../../client/index.js');

// The client is ESM (client/package.json), at the checkout's root (this file runs from
// dist/test/e2e/): loaded with Node's require(esm) (Node ≥ 20.19).
const CLIENT = path.resolve(__dirname, '..', '..', '..', 'client', 'index.js');
const load = (): Promise<ClientModule> => Promise.resolve(createRequire(__filename)(CLIENT) as ClientModule);

function subscribed(ch: Channel): Promise<void> {
  return new Promise((resolve, reject) => {
    ch.bind('pusher:subscription_succeeded', () => resolve());
    ch.bind('pusher:subscription_error', (e: unknown) => reject(new Error(`subscription_error ${JSON.stringify(e)}`)));
  });
}

function record(ch: Channel): string[] {
  const got: string[] = [];
  for (const e of ['e0', 'e1', 'e2', 'e3']) ch.bind(e, () => got.push(e));
  return got;
}

async function publish(srv: TestServer, channel: string): Promise<void> {
  const events = [
    { name: 'e0', channel, data: '0' },
    { name: 'e1', channel, data: '1', tags: { region: 'eu' } },
    { name: 'e2', channel, data: '2', tags: { region: 'us' } },
    { name: 'e3', channel, data: '3', tags: { region: 'eu', tier: 'gold' } },
  ];
  const r = await signedPost(srv.port, srv.config.apps[0], 'batch_events', { batch: events });
  if (r.status !== 200) throw new Error(`publish: ${r.status} ${r.text}`);
}

t.test(`client: filtered and plain subscribers on one channel (${WORKERS} workers)`, async (t) => {
  const { ringcast, Filter } = await load();
  const srv = await startServer({ tag_filtering: { enabled: true }, delta_compression: { enabled: true } });
  const clients: PusherJS[] = [];
  const make = () => {
    const p = pusherJs(srv.port);
    clients.push(p);
    return p;
  };
  try {
    const plain = make();
    const filtered = ringcast(make());
    const both = ringcast(make());
    await Promise.all([connected(plain), connected(filtered.pusher), connected(both.pusher)]);

    const pCh = plain.subscribe('prices');
    const fCh = filtered.subscribe('prices', { filter: Filter.eq('region', 'eu') });
    const bCh = both.subscribe('prices', { filter: Filter.and(Filter.eq('region', 'eu'), Filter.exists('tier')) });
    const fMarks = filtered.subscribe('marks');
    const bMarks = both.subscribe('marks');
    const pGot = record(pCh);
    const fGot = record(fCh);
    const bGot = record(bCh);
    await Promise.all([subscribed(pCh), subscribed(fCh), subscribed(bCh), subscribed(fMarks), subscribed(bMarks)]);

    await publish(srv, 'prices');
    await settleChannel(srv, pCh);
    await settleChannel(srv, fMarks);
    await settleChannel(srv, bMarks);
    t.same(pGot, ['e0', 'e1', 'e2', 'e3'], 'plain pusher-js: every event');
    t.same(fGot, ['e1', 'e3'], 'eq filter: the eu events');
    t.same(bGot, ['e3'], 'and filter');

    t.throws(() => filtered.subscribe('prices', { filter: Filter.eq('region', 'us') }), /already subscribed with another filter/);
    t.throws(() => filtered.subscribe('other', { filter: 'region=eu' as never }), /filter must be an object/);

    // reconnect: pusher-js subscribes again, with the filter
    fGot.length = 0;
    const again = subscribed(fCh);
    filtered.pusher.disconnect();
    filtered.pusher.connect();
    await again;
    await publish(srv, 'prices');
    await settleChannel(srv, fMarks);
    t.same(fGot, ['e1', 'e3'], 'after a reconnect the filter still applies');

    // unsubscribe forgets the filter: a plain subscribe gets everything
    filtered.unsubscribe('prices');
    fGot.length = 0;
    const fresh = filtered.subscribe('prices');
    const freshGot = record(fresh);
    await subscribed(fresh);
    await publish(srv, 'prices');
    await settleChannel(srv, fresh);
    t.same(freshGot, ['e0', 'e1', 'e2', 'e3'], 'unsubscribed, then subscribed without a filter');
  } finally {
    for (const c of clients) c.disconnect();
    await srv.stop();
  }
});

t.test('client: an invalid filter is the channel\'s subscription_error', async (t) => {
  const { ringcast } = await load();
  const srv = await startServer({ tag_filtering: { enabled: true }, delta_compression: { enabled: true } });
  const p = pusherJs(srv.port);
  try {
    const client = ringcast(p);
    await connected(p);
    const ch = client.subscribe('prices', { filter: { key: 'region', cmp: 'regex' as never, val: '.*' } });
    const err = await new Promise<Record<string, unknown>>((resolve) => ch.bind('pusher:subscription_error', resolve));
    t.match(err, { type: 'InvalidFilter', status: 4000, error: /cmp must be one of/ });
  } finally {
    p.disconnect();
    await srv.stop();
  }
});
