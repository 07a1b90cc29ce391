// The shipped client (client/delta.js) around an unmodified pusher-js: channel.bind()
// receives the original data whether the server sent a message in full or as a delta
// (Fossil and Xdelta3, with a conflation key's cache sync), and sync errors are answered.

import path from 'node:path';
import t from 'tap';
import type PusherJS from 'pusher-js';
import type { ChannelDeltaSetting } from '../../src/config/types';
import { connected, pusherJs } from '../helpers/pusher-js';
import { APP, startServer } from '../helpers/server';
import { Books, rng } from './clients';

interface DeltaHandle { stats: { full: number; deltas: number; syncErrors: number }; decoder: { reset(channel: string): void }; detach(): void }
// eslint-disable-next-line @typescript-eslint/no-require-imports
const client = require(path.join(__dirname, '../../../client/delta.js')) as {
  withDeltaCompression(p: PusherJS, o?: { xdelta3?: boolean }): Promise<DeltaHandle>;
};

const keyed: ChannelDeltaSetting = { enabled: true, algorithm: null, conflation_key: 'sym', max_messages_per_key: 4, max_conflation_keys: 20, enable_tags: false };

for (const algo of ['fossil', 'xdelta3'] as const) {
  t.test(`pusher-js with client/delta.js (${algo}): bind() gets the data a plain pusher-js gets`, async (t) => {
    const srv = await startServer({
      delta_compression: { algorithm: algo === 'fossil' ? 'Fossil' : 'Xdelta3' },
      apps: [{ ...APP, channel_delta_compression: { 'keyed-*': keyed } }],
    });
    t.teardown(() => srv.stop());
    const plain = srv.track(pusherJs(srv.port));
    const dp = srv.track(pusherJs(srv.port));
    const handle = await client.withDeltaCompression(dp, { xdelta3: algo === 'xdelta3' });
    await Promise.all([connected(plain), connected(dp)]);
    const got: Record<string, unknown[]> = { plain: [], delta: [] };
    for (const [name, p] of [['plain', plain], ['delta', dp]] as const) {
      for (const ch of ['ticker', 'keyed-fx']) {
        const c = p.subscribe(ch);
        c.bind('price', (d: unknown) => got[name].push([ch, d]));
        c.bind('end', (d: unknown) => got[name].push([ch, 'end', d]));
        await new Promise<void>((r) => c.bind('pusher:subscription_succeeded', () => r()));
      }
    }
    const sdk = srv.sdk();
    const books = new Books(rng(3));
    const syms = ['EURUSD', 'GBPUSD', 'USDJPY'];
    const until = async (pred: () => boolean, what: string) => {
      for (let k = 0; k < 400 && !pred(); k++) await new Promise((r) => setTimeout(r, 50));
      if (!pred()) throw new Error(`timed out waiting for ${what}`);
    };
    for (let i = 0; i < 30; i++) {
      if (i === 15) {
        // lost bases once everything so far is in: the next ticker delta fails → pusher:delta_sync_error
        await until(() => got.delta.length === i && got.plain.length === i, 'the first 15 events');
        handle.decoder.reset('ticker');
      }
      // ticker: one book (no conflation key); keyed-fx: three, one stream each
      await sdk.trigger(i % 2 === 0 ? 'ticker' : 'keyed-fx', 'price', books.update(i % 2 === 0 ? 'BTC' : syms[i % 3]));
      if (i === 16) {
        // the server has read the sync error once a later frame of the socket is answered
        await until(() => handle.stats.syncErrors === 1, 'the sync error');
        await new Promise<void>((r) => dp.subscribe('marker').bind('pusher:subscription_succeeded', () => r()));
      }
    }
    // after the sync error the server sends ticker's next message in full
    await sdk.trigger('ticker', 'price', books.update('BTC'));
    await sdk.trigger(['ticker', 'keyed-fx'], 'end', '{"end":true}');
    const done = (l: unknown[]) => l.filter((x) => (x as unknown[])[1] === 'end').length === 2;
    for (let i = 0; i < 400 && !(done(got.plain) && done(got.delta)); i++) await new Promise((r) => setTimeout(r, 50));
    t.ok(done(got.plain) && done(got.delta), 'both clients got the end of both channels');
    t.equal(handle.stats.syncErrors, 1, 'one sync error (the reset bases)');
    // exactly the one undecodable delta is missing from the delta client's ticker events
    const lost = got.plain.filter((x) => !got.delta.some((y) => JSON.stringify(y) === JSON.stringify(x)));
    t.equal(lost.length, 1, 'only the delta that could not be applied is missing');
    t.same(got.delta, got.plain.filter((x) => x !== lost[0]), 'every other event: the same data, in the same order');
    t.ok(handle.stats.deltas >= 20, `most messages came as deltas (${handle.stats.deltas})`);
    t.type((got.delta.find((x) => (x as unknown[])[0] === 'keyed-fx') as unknown[])[1], 'object', 'data arrives parsed, as pusher-js gives it');
  });
}
