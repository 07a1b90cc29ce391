// An HTTP session whose receiving request the client aborted (it left) ends after
// http_fallback.abort_delay_ms, not disconnect_delay: with pusher-js (Node build, unmodified)
// on xhr_streaming and on xhr_polling, a presence member that disconnects is removed within
// about a second (disconnect_delay is 30 s here). pusher-js's own reopen of a stream past
// 256 KiB (buffer_too_long) is an abort too, and must not end the session: a member that
// took a 330 KiB burst is still there when the leaver's member_removed arrives after it.
import t from 'tap';
import { CLIENT_STREAM_LIMIT } from '../../src/fallback/frames';
import { createSessionTopics } from '../../src/fallback/hub';
import { Session, type Receiver } from '../../src/fallback/session';
import { nativeFanout } from '../../src/channels/fanout';
import { newSocketData } from '../../src/ws/connection';
import { loadConfig } from '../../src/config';
import { FALLBACK_TRANSPORTS, counterValue, fallbackClient } from '../helpers/fallback';
import { connected, collect } from '../helpers/pusher-js';
import { RawClient, WORKERS, eventually, sleep, startServer } from '../helpers/server';

const ABORT_MS = 1000;

t.test('Session: an aborted request ends the session after the short grace, a reopen past the stream limit does not', async (t) => {
  const closed: string[] = [];
  const mk = (id: string) => new Session(id, 'key', { ip: '127.0.0.1', ua: '' }, newSocketData(`1.${id}`, null, null), {
    handlers: { open() {}, message() {}, close: () => void closed.push(id) },
    topics: createSessionTopics(nativeFanout({ publish: () => true, numSubscribers: () => 0 })),
    maxQueueBytes: 1 << 24, closeOnOverflow: false, onClosed() {}, now: () => 0,
  });
  const recv = (streaming: boolean): Receiver => ({ streaming, write() {}, end() {} });
  const left = mk('left');
  const r1 = recv(true);
  left.attach(r1);
  t.equal(left.detach(r1, true), true, 'an abort: the client left');
  left.tick(ABORT_MS - 1, 25_000, 5000, ABORT_MS);
  t.same(closed, [], 'not before the short grace');
  left.tick(ABORT_MS, 25_000, 5000, ABORT_MS);
  t.same(closed, ['left'], 'ended at the short grace');

  const reopen = mk('reopen');
  const r2 = recv(true);
  reopen.attach(r2);
  reopen.send('x'.repeat(CLIENT_STREAM_LIMIT + 10));
  await new Promise((r) => setImmediate(r));
  t.equal(reopen.detach(r2, true), false, 'an abort past the stream limit: pusher-js reopens');
  reopen.tick(4999, 25_000, 5000, ABORT_MS);
  t.same(closed, ['left'], 'the full grace applies');

  const poll = mk('poll');
  const r3 = recv(false);
  poll.attach(r3);
  t.equal(poll.detach(r3, false), false, 'ended by the server (a poll answered): the full grace');
  t.equal(poll.detach(recv(false), true), false, 'a request that is not the current one: nothing');
});

t.test('http_fallback.abort_delay_ms: bad values are refused', async (t) => {
  t.throws(() => loadConfig({ env: {}, overrides: { http_fallback: { abort_delay_ms: -1 } } as never }), /abort_delay_ms/);
  t.throws(() => loadConfig({ env: {}, overrides: { http_fallback: { abort_delay_ms: 'soon' } } as never }), /abort_delay_ms/);
});

t.test(`pusher-js over HTTP: a member that leaves is removed within abort_delay_ms (${WORKERS} workers)`, async (t) => {
  const srv = await startServer({ http_fallback: { disconnect_delay: 30, abort_delay_ms: ABORT_MS }, metrics: { enabled: true, host: '127.0.0.1', port: 0 } });
  const polls = () => counterValue(srv.server.metricsPort!, 'fallback_requests_total', 'transport="xhr"');
  t.teardown(() => srv.stop());
  const watcher = srv.track(await RawClient.connect(srv.wsUrl()));
  await watcher.subscribeAuthed('presence-room', { user_id: 'watcher' });
  const sdk = srv.sdk();
  const removed = () => watcher.frames.filter((f) => f.event === 'pusher_internal:member_removed').map((f) => (JSON.parse(f.data as string) as { user_id: string }).user_id);
  const added = (id: string) => watcher.next((f) => f.event === 'pusher_internal:member_added' && (JSON.parse(f.data as string) as { user_id: string }).user_id === id, 15_000);

  // a member on xhr_streaming that takes a 330 KiB burst: pusher-js reopens its stream (an abort)
  const stayer = srv.track(fallbackClient(srv.port, 'xhr_streaming', { user: { user_id: 'stayer' } }));
  await connected(stayer, 15_000);
  const joined = added('stayer');
  stayer.subscribe('presence-room');
  await joined;
  const burst = stayer.subscribe('burst');
  await new Promise<void>((r) => burst.bind('pusher:subscription_succeeded', () => r()));
  const ev = collect<{ i: number }>(burst, 'b');
  const pad = 'x'.repeat(900);
  for (let i = 0; i < 340; i += 10) {
    await sdk.triggerBatch(Array.from({ length: 10 }, (_, k) => ({ channel: 'burst', name: 'b', data: { i: i + k, pad } })));
  }
  await ev.until(340, '340 events', 30_000);

  for (const transport of FALLBACK_TRANSPORTS) {
    const user = `leaver-${transport}`;
    const c = fallbackClient(srv.port, transport, { user: { user_id: user } });
    await connected(c, 15_000);
    const joinedL = added(user);
    const before = await polls();
    const ch = c.subscribe('presence-room');
    const answered = new Promise<void>((r) => ch.bind('pusher:subscription_succeeded', () => r()));
    await joinedL;
    await answered;
    // polling: the poll pusher-js opens at once after the one that brought subscription_succeeded
    // has reached the server (a client that leaves between two polls aborts nothing the server
    // holds: its session then ends after disconnect_delay)
    if (transport === 'xhr_polling') {
      await eventually(async () => (await polls()) > before, 5000, 'the next poll');
      await sleep(100);
    }
    const t0 = Date.now();
    c.disconnect();
    await watcher.next((f) => f.event === 'pusher_internal:member_removed' && (JSON.parse(f.data as string) as { user_id: string }).user_id === user, 10_000);
    const took = Date.now() - t0;
    t.ok(took >= ABORT_MS - 100 && took < ABORT_MS + 1500, `${transport}: member_removed ${took} ms after the disconnect (abort_delay_ms ${ABORT_MS}, disconnect_delay 30 s)`);
  }
  t.notOk(removed().includes('stayer'), 'the member whose stream pusher-js reopened is still there');
  t.equal(stayer.connection.state, 'connected');
  stayer.disconnect();
});
