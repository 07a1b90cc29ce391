// REST history: GET /apps/{id}/channels/{name}/history through the `pusher` SDK's
// get({path, params}) (signed), paging forwards and backwards through 1,000 messages with
// next_cursor; bad queries and a channel without history answer 400 naming what is wrong.
import t from 'tap';
import { APP, startServer } from '../helpers/server';
import { signedGet } from '../helpers/http';

interface Page { epoch: string; items: { serial: number; event: string; data: string; time_ms: number }[]; next_cursor: string | null }

t.test('REST history', async (t) => {
  const srv = await startServer({ apps: [{ ...APP, channel_history: { 'log-*': { size: 1000, ttl: 300 } } as never }] });
  t.teardown(() => srv.stop());
  const sdk = srv.sdk();
  const get = async (channel: string, params: Record<string, unknown> = {}) => {
    const res = await sdk.get({ path: `/channels/${encodeURIComponent(channel)}/history`, params }).catch((e: { status: number; body: string }) => e);
    if ('json' in res && typeof res.json === 'function') return { status: res.status, body: await res.json() as Page };
    return { status: (res as { status: number }).status, body: JSON.parse((res as { body: string }).body) as { error: string } };
  };
  for (let b = 0; b < 100; b++) {
    await sdk.triggerBatch(Array.from({ length: 10 }, (_, k) => ({ channel: 'log-a', name: 'line', data: String(b * 10 + k + 1) })));
  }
  const first = await get('log-a', { limit: 1 });
  t.equal(first.status, 200);
  const p1 = first.body as Page;
  t.equal(p1.items.length, 1);
  t.match(p1.items[0], { event: 'line', data: '1000', serial: 1000 });
  t.type(p1.items[0].time_ms, 'number');

  for (const direction of ['backwards', 'forwards'] as const) {
    const seen: number[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const r = await get('log-a', cursor ? { limit: 100, cursor } : { limit: 100, direction });
      t.equal(r.status, 200);
      const page = r.body as Page;
      for (const it of page.items) seen.push(Number(it.data));
      cursor = page.next_cursor;
      pages++;
    } while (cursor !== null && pages < 20);
    const want = Array.from({ length: 1000 }, (_, i) => i + 1);
    t.same(seen, direction === 'forwards' ? want : want.reverse(), `${direction}: every message once, in order, in ${pages} pages`);
    t.equal(pages, 10);
  }
  const range = (await get('log-a', { direction: 'forwards', after_serial: 10, before_serial: 14 })).body as Page;
  t.same(range.items.map((i) => i.serial), [11, 12, 13]);
  t.equal(range.next_cursor, null);

  const none = await get('plain-chan');
  t.equal(none.status, 400);
  t.match(none.body, { error: /has no history.*channel_history.*log-\*/ });
  for (const [params, rx] of [
    [{ limit: 0 }, /limit must be an integer from 1 to 1000/],
    [{ limit: 1001 }, /limit must be an integer from 1 to 1000/],
    [{ direction: 'up' }, /direction must be backwards or forwards/],
    [{ after_serial: -3 }, /after_serial must be a non-negative integer/],
    [{ before_serial: 'x' }, /before_serial must be a non-negative integer/],
    [{ cursor: 'garbage' }, /cursor is not one this server gave/],
  ] as const) {
    const r = await get('log-a', params);
    t.equal(r.status, 400, JSON.stringify(params));
    t.match(r.body, { error: rx });
  }
});

t.test('REST history is rate-limited like the other channel routes', async (t) => {
  const srv = await startServer({ apps: [{ ...APP, max_client_events_per_second: 2, channel_history: { 'log-*': { size: 10, ttl: 60 } } as never }] });
  t.teardown(() => srv.stop());
  // at once: a loaded machine must not let the bucket refill between them
  const answers = await Promise.all(Array.from({ length: 8 }, () => signedGet(srv.port, APP, 'channels/log-a/history')));
  const statuses = answers.map((r) => r.status);
  for (const r of answers.filter((x) => x.status === 429)) {
    t.ok(r.headers['retry-after'], 'Retry-After');
    t.equal(r.headers['x-ratelimit-limit'], '2');
  }
  t.ok(statuses.includes(200), 'the first ones are answered');
  t.ok(statuses.includes(429), `the bucket of 2 runs out: ${statuses.join(', ')}`);
  t.ok(statuses.every((s) => s === 200 || s === 429));
});
